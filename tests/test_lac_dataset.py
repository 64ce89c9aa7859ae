"""Dataset writer and `contactflow lac augment`: schema, determinism, resume."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from contactflow.config import to_dict
from contactflow.lac.augment import augment, episodes_per_min_per_core
from contactflow.lac.config import GateCfg, LacConfig, ProfileCfg
from contactflow.lac.dataset import read_episodes

# short episodes keep the test fast; the code path is the one of the full 500-frame config
CFG = LacConfig(
    profile=ProfileCfg(frames=100, rest_s=(0.1, 0.2), ramp_s=(0.3, 0.5), hold_s=(0.3, 0.5), release_s=(0.3, 0.5)),
    gates=GateCfg(n_iter=3, n_decay=8),
)


@pytest.fixture(scope="module")
def cfg_file(tmp_path_factory):
    import yaml

    p = tmp_path_factory.mktemp("cfg") / "lac_short.yaml"
    p.write_text(yaml.safe_dump(json.loads(json.dumps(to_dict(CFG)))))
    return p


def test_same_seed_same_shard_bytes_and_resume(tmp_path, cfg_file):
    a, b = tmp_path / "a", tmp_path / "b"
    sa = augment(a, 3, seed=7, shard_size=2, config=cfg_file, progress=False)
    sb = augment(b, 3, seed=7, shard_size=2, config=cfg_file, progress=False)
    shards = sorted(p.name for p in a.glob("shard-*.parquet"))
    assert shards == ["shard-00000.parquet", "shard-00001.parquet"]
    for s in shards:
        assert (a / s).read_bytes() == (b / s).read_bytes()
    assert sa["frames"] == 3 and sa["accepted"] + sa["decayed"] + sa["failed"] == 3
    assert {k: v for k, v in sa.items() if k not in ("wall_s", "episodes_per_min_per_core")} == {
        k: v for k, v in sb.items() if k not in ("wall_s", "episodes_per_min_per_core")}
    # resume: an interrupted run (one shard lost) rewrites only what is missing, same bytes
    before = (a / "shard-00001.parquet").read_bytes()
    (a / "shard-00001.parquet").unlink()
    sr = augment(a, 3, seed=7, shard_size=2, config=cfg_file, progress=False)
    assert sr["shards_skipped"] == 1 and sr["shards_written"] == 1
    assert (a / "shard-00001.parquet").read_bytes() == before
    # other parameters in the same directory are refused
    from contactflow.errors import ConfigError

    with pytest.raises(ConfigError, match="other parameters"):
        augment(a, 3, seed=8, shard_size=2, config=cfg_file, progress=False)


def test_schema_and_content(tmp_path, cfg_file):
    augment(tmp_path, 2, seed=11, shard_size=2, config=cfg_file, progress=False)
    rows = read_episodes(tmp_path)
    meta = json.loads(pq.read_schema(tmp_path / "shard-00000.parquet").metadata[b"lac"])
    assert meta["slots"] == [0, 2] and meta["seed"] == 11
    assert len(rows) == meta["stats"]["accepted"] + meta["stats"]["decayed"]
    for r in rows:
        T = 100
        assert r["q_aug"].shape == (T, 11) and r["base_vel"].shape == (T, 3) and r["base_height"].shape == (T,)
        assert r["f_ext"].shape == (T, 11, 3) and r["tau_ext"].shape == (T, 11, 3)
        assert r["stiffness"].shape == (5,) and r["event_type"] in ("force", "couple")
        assert np.all(r["base_height"] >= 0.56 - 1e-5) and np.all(r["base_height"] <= 0.78 + 1e-5)
        lo, hi = (15.0, 70.0) if r["event_type"] == "force" else (0.5, 10.0)
        assert lo - 1e-3 <= r["peak_sum"] <= hi + 1e-3
        peak = np.linalg.norm(r["force_peak"] if r["event_type"] == "force" else r["couple_peak"], axis=1).sum()
        assert peak == pytest.approx(r["peak_sum"], rel=1e-4)
        # the stored wrench profile peaks at the stored peak (profile reaches 1 in the hold)
        w = r["f_ext"] if r["event_type"] == "force" else r["tau_ext"]
        assert np.linalg.norm(w, axis=2).sum(axis=1).max() == pytest.approx(peak, rel=1e-3)
        assert set(r["links"]) <= {"torso_link", "left_shoulder_pitch_link", "left_shoulder_roll_link",
                                   "left_shoulder_yaw_link", "left_elbow_link", "left_wrist_roll_link",
                                   "right_shoulder_pitch_link", "right_shoulder_roll_link", "right_shoulder_yaw_link",
                                   "right_elbow_link", "right_wrist_roll_link"}
    f = pq.read_schema(tmp_path / "shard-00000.parquet").field("f_ext")
    assert json.loads(f.metadata[b"shape"]) == [100, 11, 3] and f.metadata[b"frame"] == b"base"


def test_cli_augment(tmp_path, cfg_file, capsys):
    from contactflow.cli import main

    rc = main(["lac", "augment", "--episodes", "1", "--workers", "1", "--out", str(tmp_path), "--seed", "2",
               "--config", str(cfg_file), "--no-progress"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "contact frames" in out
    assert (tmp_path / "shard-00000.parquet").exists() and (tmp_path / "summary.json").exists()
    # the printed rate counts the episodes written (accepted + decayed), as its label says
    summ = json.loads((tmp_path / "summary.json").read_text())
    assert summ["episodes_written"] == summ["accepted"] + summ["decayed"]
    assert summ["episodes_per_min_per_core"] == pytest.approx(summ["episodes_written"] / (summ["wall_s"] / 60.0))
    assert f"{summ['episodes_per_min_per_core']:.1f} episodes written (accepted + decayed) / min / core" in out
    rc = main(["lac", "augment", "--episodes", "1", "--out", str(tmp_path / "x"), "--frames", str(tmp_path / "none.yaml"),
               "--no-progress"])
    assert rc == 2


def test_episodes_per_min_per_core():
    assert episodes_per_min_per_core(0, 1.77, 1) == 0.0  # nothing written -> 0, whatever the time
    assert episodes_per_min_per_core(4, 30.0, 2) == pytest.approx(4.0)  # 4 in half a minute on 2 cores
    assert episodes_per_min_per_core(4, 0.0, 1) is None
    with pytest.raises(ValueError, match="cores >= 1"):
        episodes_per_min_per_core(1, 1.0, 0)
