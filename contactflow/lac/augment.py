"""Dataset generation driver: sharded, resumable, deterministic per seed, multi-process.

Slot ``i`` (0 <= i < episodes) is processed with ``np.random.default_rng(SeedSequence([seed, i]))``:
the contact frame (synthetic, or drawn from a library file) and all of Algorithm 1 use only that
generator, so an episode does not depend on the worker count or on which shards already exist.
Shard ``k`` holds the accepted episodes of slots ``[k S, (k + 1) S)``; a slot whose contact frame
fails every restart leaves no row (it is counted as ``failed``). Shards are written atomically;
a rerun with the same arguments skips complete shards, so an interrupted run resumes.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import time
from pathlib import Path
from typing import Callable

import numpy as np

from contactflow.config import json_digest, to_dict
from contactflow.errors import ConfigError
from contactflow.lac.config import LacConfig, load_lac_config
from contactflow.lac.contact_frames import ContactFrame, load_contact_frames, sample_synthetic_frame
from contactflow.paths import write_text_atomic
from contactflow.lac.dataset import episodes_to_table, read_shard_meta, write_shard
from contactflow.lac.model import LacRobot
from contactflow.lac.synthesis import SynthesisStats, Synthesizer

__all__ = ["ShardJob", "run_shard", "augment", "slot_rng"]

log = logging.getLogger(__name__)


def slot_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of slot ``index``: ``default_rng(SeedSequence([seed, index]))``."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(index)]))


def _config_hash(cfg: LacConfig, frames_path: str | None) -> str:
    return json_digest({"cfg": to_dict(cfg), "frames": frames_path or "synthetic"}, default=list)


class ShardJob:
    """Everything a worker needs to produce shards (built once per process)."""

    def __init__(self, cfg: LacConfig, frames_path: str | None = None):
        self.cfg = cfg
        self.lac = LacRobot()
        self.syn = Synthesizer(cfg, self.lac)
        self.frames_path = frames_path
        self.library: list[ContactFrame] | None = load_contact_frames(frames_path, self.lac) if frames_path else None

    def frame_for(self, rng: np.random.Generator) -> ContactFrame:
        if self.library is not None:
            return self.library[int(rng.integers(len(self.library)))]
        return sample_synthetic_frame(self.lac, rng)


def run_shard(
    job: ShardJob,
    out_dir: Path,
    shard: int,
    start: int,
    stop: int,
    seed: int,
    tick: Callable[[int], None] | None = None,
) -> dict:
    """Synthesise slots ``[start, stop)`` and write ``shard-{shard:05d}.parquet``.

    Returns:
        the shard's metadata (slot range, seed, config hash, counts, wall time).
    """
    stats = SynthesisStats()
    rows = []
    t0 = time.perf_counter()
    for i in range(start, stop):
        rng = slot_rng(seed, i)
        frame = job.frame_for(rng)
        ep = job.syn.synthesize(frame, rng, stats)
        if ep is not None:
            rows.append((i, seed, ep))
        if tick is not None:
            tick(1)
    table = episodes_to_table(rows, job.cfg.profile.frames, job.lac.link_names)
    meta = {
        "shard": shard,
        "slots": [start, stop],
        "seed": seed,
        "config_hash": _config_hash(job.cfg, job.frames_path),
        "stats": stats.as_dict(),
    }
    write_shard(out_dir / f"shard-{shard:05d}.parquet", table, meta)
    meta["wall_s"] = time.perf_counter() - t0
    return meta


# ---------------------------------------------------------------------- worker plumbing
_JOB: ShardJob | None = None
_QUEUE = None


def _init_worker(cfg: LacConfig, frames_path: str | None, queue) -> None:
    global _JOB, _QUEUE
    _JOB = ShardJob(cfg, frames_path)
    _QUEUE = queue


def _worker(args) -> dict:
    out_dir, shard, start, stop, seed = args
    return run_shard(_JOB, Path(out_dir), shard, start, stop, seed, tick=lambda n: _QUEUE.put(n))


def episodes_per_min_per_core(n_episodes: int, wall_s: float, cores: int) -> float | None:
    """Throughput of a run: ``n_episodes / (wall_s / 60) / cores`` [episodes / min / core].

    ``n_episodes`` is what the run wrote (accepted at full scale + decayed, i.e. every episode that
    passed the gates of LAC Algorithm 1); 0 episodes give 0.0. None when ``wall_s <= 0`` (nothing timed).

    Raises:
        ValueError: ``n_episodes < 0`` or ``cores < 1``.
    """
    if n_episodes < 0 or cores < 1:
        raise ValueError(f"episodes_per_min_per_core: expected n_episodes >= 0 and cores >= 1, got {n_episodes}, {cores}")
    if wall_s <= 0:
        return None
    return n_episodes / (wall_s / 60.0) / cores


def augment(
    out_dir: str | Path,
    episodes: int,
    *,
    seed: int = 0,
    workers: int = 1,
    shard_size: int = 64,
    config: LacConfig | str | Path | None = None,
    frames_path: str | Path | None = None,
    progress: bool = True,
) -> dict:
    """Generate (or resume) a dataset of ``episodes`` slots into ``out_dir``.

    Args:
        out_dir: output directory (created).
        episodes: number of slots (contact frames) to process.
        seed: dataset seed.
        workers: processes.
        shard_size: slots per shard.
        config: LacConfig, a YAML path, or None for ``robots/g1/lac.yaml``.
        frames_path: contact-frame library (``.npz``/``.yaml``); synthetic frames when None.
        progress: show a tqdm progress bar (per slot).

    Returns:
        summary dict: counts summed over all shards, shards written now / skipped, wall time,
        ``episodes_per_min_per_core``: episodes written (accepted at full scale + decayed) per minute
        per core for the shards written now (None when no shard was written now).

    Raises:
        ConfigError: bad arguments, or ``out_dir`` holds a dataset made with other parameters.
    """
    if episodes <= 0 or workers <= 0 or shard_size <= 0:
        raise ConfigError(f"augment: episodes, workers and shard_size must be > 0 (got {episodes}, {workers}, {shard_size})")
    cfg = config if isinstance(config, LacConfig) else load_lac_config(config)
    frames_path = str(frames_path) if frames_path else None
    if frames_path:
        load_contact_frames(frames_path, LacRobot())  # validate early, in the parent
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    chash = _config_hash(cfg, frames_path)
    manifest = {"seed": int(seed), "shard_size": int(shard_size), "config_hash": chash, "frames": frames_path or "synthetic"}
    mpath = out / "manifest.json"
    if mpath.exists():
        old = json.loads(mpath.read_text())
        diff = {k: (old.get(k), v) for k, v in manifest.items() if old.get(k) != v}
        if diff:
            raise ConfigError(f"{out}: holds a dataset made with other parameters {diff}; use a new directory")
    else:
        write_text_atomic(mpath, json.dumps({**manifest, "config": to_dict(cfg)}, indent=1, sort_keys=True, default=list))

    jobs, done_meta = [], []
    for k, start in enumerate(range(0, episodes, shard_size)):
        stop = min(start + shard_size, episodes)
        path = out / f"shard-{k:05d}.parquet"
        if path.exists():
            try:
                m = read_shard_meta(path)
                if m.get("slots") == [start, stop] and m.get("seed") == seed and m.get("config_hash") == chash:
                    done_meta.append(m)
                    continue
            except ConfigError:
                pass
            log.info("rewriting incomplete or mismatched shard %s", path.name)
        jobs.append((str(out), k, start, stop, int(seed)))

    bar = None
    if progress:
        from tqdm import tqdm

        skipped = sum(m["slots"][1] - m["slots"][0] for m in done_meta)
        bar = tqdm(total=episodes, initial=skipped, unit="ep", desc="lac augment", dynamic_ncols=True)
    t0 = time.perf_counter()
    new_meta = []
    if jobs and workers == 1:
        job = ShardJob(cfg, frames_path)
        for a in jobs:
            new_meta.append(run_shard(job, Path(a[0]), a[1], a[2], a[3], a[4], tick=bar.update if bar else None))
    elif jobs:
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        with ctx.Pool(min(workers, len(jobs)), initializer=_init_worker, initargs=(cfg, frames_path, queue)) as pool:
            pending = pool.map_async(_worker, jobs, chunksize=1)
            while not pending.ready():
                try:
                    n = queue.get(timeout=0.2)
                    if bar:
                        bar.update(n)
                except Exception:  # noqa: BLE001 - queue.Empty: just poll again
                    pass
            new_meta = pending.get()
            while not queue.empty() and bar:
                bar.update(queue.get())
    wall = time.perf_counter() - t0
    if bar:
        bar.close()
    total = SynthesisStats()
    for m in done_meta + new_meta:
        s = SynthesisStats(**{k: v for k, v in m["stats"].items() if k != "decays_by_gate"})
        s.decays_by_gate = dict(m["stats"]["decays_by_gate"])
        total.add(s)
    new_eps = sum(m["stats"]["accepted"] + m["stats"]["decayed"] for m in new_meta)
    summary = {
        **total.as_dict(),
        "episodes_written": total.accepted + total.decayed,
        "shards_written": len(new_meta),
        "shards_skipped": len(done_meta),
        "wall_s": wall,
        "episodes_per_min_per_core": (episodes_per_min_per_core(new_eps, wall, min(workers, max(1, len(jobs))))
                                      if new_meta else None),
    }
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=1, sort_keys=True))
    return summary
