"""Real `dora run` of the PRIME dataflows (replay -> prime_estimator -> recorder) on short
generated recordings (0.3 s, 30 samples), and the wiring of the shipped YAML."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from contactflow.prime.datagen import GenerateConfig, simulate_mujoco, write_recording
from contactflow.prime.model import load_prime_robot
from contactflow.paths import node_kind
from contactflow.prime.ports import prime_port_specs
from contactflow.recording.store import read_recording

ROOT = Path(__file__).resolve().parent.parent
DORA = shutil.which("dora") or str(Path(sys.executable).parent / "dora")


@pytest.mark.parametrize("robot,motion", [("go2", "squat"), ("g1", "weight_shift")])
def test_prime_dataflow_yaml_declares_the_estimator_ports(robot, motion):
    flow = yaml.safe_load((ROOT / "dataflows" / f"prime_replay_{robot}.yml").read_text())
    nodes = {n["id"]: n for n in flow["nodes"]}
    est = nodes["prime_estimator"]
    pr = load_prime_robot(robot)
    specs = prime_port_specs(pr, pr.config.identified_bodies)
    assert set(est["outputs"]) == set(specs) - {"sensors"}
    assert set(est["inputs"]) == {"sensors"}
    src = est["inputs"]["sensors"]["source"].split("/")[0]
    assert node_kind(nodes[src]["path"]) == "replay" and "ack" in nodes[src]["inputs"]
    assert nodes[src]["inputs"]["ack"]["source"] == "prime_estimator/ack"
    assert f"--robot {robot}" in est["args"]
    # the solve runs after the replay ends (~30 s for 3 s of Go2 data here, minutes for longer runs): dora
    # stops a node its finish_grace_secs after its inputs closed, the recorder included, before the estimator's
    # outputs reach it (the default 30 s lost the estimate of a 3 s run on a loaded machine)
    for node in ("prime_estimator", "recorder"):
        assert nodes[node]["finish_grace_secs"] >= 600, node  # contactflow.graphs.FINISH_GRACE_S_OFFLINE


@pytest.mark.dora
@pytest.mark.parametrize("robot,motion", [("go2", "squat"), ("g1", "weight_shift")])
def test_prime_dataflow_runs_on_a_generated_recording(robot, motion, tmp_path):
    pr = load_prime_robot(robot)
    recs = tmp_path / "recordings"
    run = simulate_mujoco(pr, GenerateConfig(motion=motion, duration_s=0.3, seed=1))
    write_recording(pr, run, recs / f"prime_{robot}_{motion}")
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(recs))
    proc = subprocess.run([DORA, "run", str(ROOT / "dataflows" / f"prime_replay_{robot}.yml")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    runs = [p for p in recs.iterdir() if p.name.startswith(f"prime_{robot}-") and not p.is_symlink()]
    assert len(runs) == 1, out[-2000:]
    rec = read_recording(runs[0])
    forces = rec.stream("prime_estimator.forces")
    assert forces.values.shape == (29, 3 * len(pr.points))
    assert rec.stream("prime_estimator.state").values.shape[0] == 30
    assert rec.stream("datagen.sensors").values.shape[0] == 31  # replayed input recorded too
    par = rec.stream("prime_estimator.parameters")
    mass = par.field("mass.root_joint")[0, 0]
    true = run.info["trunk_true"]["mass_kg"]
    assert abs(mass - true) < 1.0  # short horizon: coarse; the benchmark measures accuracy
    fz = forces.values.reshape(29, -1, 3)[:, :, 2].sum(axis=1)
    assert abs(fz.mean() - run.force_W[1:, :, 2].sum(axis=1).mean()) < 0.1 * fz.mean()
    report = json.loads((recs / f"prime_report_{robot}.json").read_text())
    assert report["robot"] == robot and np.isfinite(report["cost"])
