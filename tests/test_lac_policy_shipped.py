"""The shipped LAC student (robots/g1/policies/lac_policy.onnx, produced by `contactflow lac train`
with robots/g1/policies/lac_policy_train/config.yaml; docs/lac_policy.md): its training record, and
the 60 s stand in the LAC policy graph (dataflows/lac_g1_policy.yml, lac_policy --spec lac, the model
found at the spec's default path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from contactflow.policy.spec import load_policy_spec
from contactflow.recording.store import read_recording
from contactflow.robot import load_robot

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ROOT / "robots/g1/policies"
DORA = shutil.which("dora") or "dora"


def test_shipped_student_loads_through_the_spec_with_its_training_record():
    model = POLICIES / "lac_policy.onnx"
    assert model.stat().st_size < 10e6  # the bound for a committed policy
    spec = load_policy_spec("lac", load_robot("g1"))  # the spec's default model path
    assert Path(spec.model.path).resolve() == model.resolve()
    md = spec.model.metadata
    record = POLICIES / "lac_policy_train"
    run = json.loads((record / "run.json").read_text())
    cfg = yaml.safe_load((record / "config.yaml").read_text())
    # the model says how it was made, and the record beside it agrees
    assert md["spec_name"] == "lac" and md["spec_version"].startswith("lac-deploy/1")
    assert md["dataset_seed"] == cfg["dagger"]["dataset_seed"] == run["config"]["dagger"]["dataset_seed"]
    assert md["train_config"] == run["config"]
    assert md["git_revision"] == run["git_revision"]
    log = json.loads((record / "train_log.json").read_text())
    assert (record / "loss.png").stat().st_size > 0 and (record / "train_log.csv").stat().st_size > 0
    assert log and isinstance(log, (dict, list))


@pytest.mark.dora
def test_shipped_student_stands_60s_in_the_lac_policy_graph(tmp_path):
    """The issue's first "must show": the shipped student, in lac_g1_teleop.yml's graph with lac_policy
    in place of lac_expert, stands 60 s (default command) without falling and without a refused output."""
    env = dict(os.environ, CONTACTFLOW_RECORDINGS=str(tmp_path / "recordings"),
               CONTACTFLOW_SCENARIO=str(ROOT / "robots/g1/scenarios/stand_60s.yaml"))
    env.pop("CONTACTFLOW_POLICY_MODEL", None)
    proc = subprocess.run([DORA, "run", str(ROOT / "dataflows/lac_g1_policy.yml")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    (run,) = [p for p in (tmp_path / "recordings").iterdir() if p.is_dir() and not p.is_symlink()]
    s = json.loads((run / "summary.json").read_text())
    print({k: s.get(k) for k in ("fell", "sim_time_s", "standing_drift_m", "base_height_min_m")})
    assert s["fell"] is False and s["sim_time_s"] == pytest.approx(60.0, abs=0.1)
    rec = read_recording(run)
    cmd = rec.stream("lac_policy.command")
    assert len(cmd) >= 3000 and np.all(cmd.field("ok") == 1.0)  # 50 Hz, no refused output
    assert rec.manifest["configs"]["lac_policy"]["model"].endswith("lac_policy.onnx")
    assert s["standing_drift_m"] < 0.1 and s["base_height_min_m"] > 0.6
