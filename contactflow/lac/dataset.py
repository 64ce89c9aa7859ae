"""Parquet shards of augmented LAC episodes (schema: ``docs/lac_dataset.md``).

One row per accepted episode. Per-frame arrays are stored flattened, row-major, as
``fixed_size_list<float32>``; each field's Arrow metadata carries ``shape``, ``unit`` and ``frame``.
:func:`read_episodes` reshapes them back.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from contactflow.errors import ConfigError
from contactflow.lac.synthesis import Episode
from contactflow.paths import replaced_atomically

__all__ = ["SCHEMA_VERSION", "episode_schema", "episodes_to_table", "write_shard", "read_shard_meta", "read_episodes"]

SCHEMA_VERSION = "lac-episodes/1"


def _f(name, typ, shape=None, unit="", frame="", doc=""):
    md = {"unit": unit, "frame": frame, "doc": doc}
    if shape is not None:
        md["shape"] = json.dumps(list(shape))
    return pa.field(name, typ, nullable=False, metadata={k: v for k, v in md.items() if v})


def episode_schema(T: int) -> pa.Schema:
    """Arrow schema of an episode row for ``T`` frames (see docs/lac_dataset.md)."""
    f32 = pa.float32()

    def arr(n):
        return pa.list_(f32, n)

    return pa.schema(
        [
            _f("episode_index", pa.int64(), doc="slot index i; the episode's RNG is SeedSequence([seed, i])"),
            _f("seed", pa.int64(), doc="dataset seed"),
            _f("source", pa.string(), doc="contact-frame provenance"),
            _f("event_type", pa.string(), doc="'force' or 'couple'"),
            _f("links", pa.list_(pa.string()), doc="loaded upper-body links"),
            _f("mask", pa.list_(pa.bool_(), 11), shape=[11], doc="contact-frame mask m_j"),
            _f("contact_point", arr(33), shape=[11, 3], unit="m", frame="link", doc="p_j"),
            _f("contact_normal", arr(33), shape=[11, 3], frame="link", doc="inward normal n_j"),
            _f("q_ref", arr(11), shape=[11], unit="rad", doc="upper-body reference"),
            _f("base_height_cmd", f32, unit="m", doc="h_cmd"),
            _f("stiffness", arr(5), shape=[5], unit="N/m x3, N m/rad x2",
               doc="[K_L, K_R, K_T, K_L_theta, K_R_theta]"),
            _f("profile_s", arr(4), shape=[4], unit="s", doc="rest, ramp, hold, release"),
            _f("force_peak", arr(33), shape=[11, 3], unit="N", frame="world", doc="F_j^peak after decay"),
            _f("couple_peak", arr(33), shape=[11, 3], unit="N m", frame="world", doc="tau_j^peak c_j after decay"),
            _f("k_env", arr(11), shape=[11], unit="N/m", doc="K_j^env (force events)"),
            _f("peak_sum", f32, unit="N or N m", doc="sum_j m_j |peak| after decay"),
            _f("curriculum_bin", pa.int8(), doc="force 0..10 (5 N bins on [15, 70]), couple 0..7 (on [0.5, 10])"),
            _f("scale", f32, doc="accepted wrench scale (product of decay factors)"),
            _f("decays", pa.int16(), doc="decay retries before acceptance"),
            _f("restart", pa.int16(), doc="accepted restart (0-based)"),
            _f("q_aug", arr(T * 11), shape=[T, 11], unit="rad", doc="upper-body joint angles"),
            _f("base_vel", arr(T * 3), shape=[T, 3], unit="m/s, m/s, rad/s", frame="base",
               doc="(v_x, v_y, yaw rate)"),
            _f("base_height", arr(T), shape=[T], unit="m", doc="h_aug"),
            _f("f_ext", arr(T * 33), shape=[T, 11, 3], unit="N", frame="base", doc="external force per link"),
            _f("tau_ext", arr(T * 33), shape=[T, 11, 3], unit="N m", frame="base", doc="external couple per link"),
        ],
        metadata={"schema": SCHEMA_VERSION, "frames": str(T)},
    )


def episodes_to_table(rows: list[tuple[int, int, Episode]], T: int, lac_link_names) -> pa.Table:
    """Build the Arrow table of ``(episode_index, seed, Episode)`` rows."""
    schema = episode_schema(T)
    cols: dict[str, list] = {f.name: [] for f in schema}
    f32 = np.float32
    for idx, seed, ep in rows:
        s, ro = ep.sample, ep.rollout
        fr = s.frame
        p = s.profile
        cols["episode_index"].append(idx)
        cols["seed"].append(seed)
        cols["source"].append(fr.source)
        cols["event_type"].append(s.event_type)
        cols["links"].append([lac_link_names[i] for i in s.links])
        cols["mask"].append([bool(m) for m in fr.mask])
        cols["contact_point"].append(fr.points.astype(f32).ravel())
        cols["contact_normal"].append(fr.normals.astype(f32).ravel())
        cols["q_ref"].append(fr.q_ref.astype(f32))
        cols["base_height_cmd"].append(f32(s.base_height))
        cols["stiffness"].append(s.stiffness.astype(f32))
        cols["profile_s"].append(np.array([p.rest_s, p.ramp_s, p.hold_s, p.release_s], f32))
        cols["force_peak"].append((s.force_peak_W * ep.scale).astype(f32).ravel())
        cols["couple_peak"].append((s.couple_peak_W * ep.scale).astype(f32).ravel())
        cols["k_env"].append(s.k_env.astype(f32))
        cols["peak_sum"].append(f32(ep.peak_sum))
        cols["curriculum_bin"].append(ep.curriculum_bin)
        cols["scale"].append(f32(ep.scale))
        cols["decays"].append(ep.decays)
        cols["restart"].append(ep.restart)
        cols["q_aug"].append(ro.q_upper.astype(f32).ravel())
        cols["base_vel"].append(ro.base_vel_B.astype(f32).ravel())
        cols["base_height"].append(ro.base_height.astype(f32))
        cols["f_ext"].append(ro.f_ext_B.astype(f32).ravel())
        cols["tau_ext"].append(ro.tau_ext_B.astype(f32).ravel())
    arrays = []
    for f in schema:
        if pa.types.is_fixed_size_list(f.type) and pa.types.is_floating(f.type.value_type):
            n = f.type.list_size
            flat = np.concatenate(cols[f.name]).astype(np.float32) if cols[f.name] else np.zeros(0, np.float32)
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), n))
        else:
            arrays.append(pa.array(cols[f.name], f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def write_shard(path: Path, table: pa.Table, meta: dict) -> None:
    """Write ``table`` to ``path`` atomically (temporary file + rename), with ``meta`` (JSON) in
    the file's key-value metadata under ``lac``. The bytes depend only on the content."""
    path = Path(path)
    md = dict(table.schema.metadata or {})
    md[b"lac"] = json.dumps(meta, sort_keys=True).encode()
    table = table.replace_schema_metadata(md)
    with replaced_atomically(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=64, write_statistics=False)


def read_shard_meta(path: Path) -> dict:
    """The ``lac`` metadata of a shard; raises ConfigError when the file is not a complete shard."""
    try:
        md = pq.read_schema(path).metadata or {}
        return json.loads(md[b"lac"])
    except Exception as exc:  # noqa: BLE001 - any read failure means an incomplete shard
        raise ConfigError(f"{path}: not a complete LAC shard ({type(exc).__name__}: {exc})") from None


def read_episodes(path: str | Path, columns: list[str] | None = None) -> list[dict]:
    """Read a shard (or every ``shard-*.parquet`` of a directory) into dicts of numpy arrays
    reshaped per the ``shape`` metadata.

    Raises:
        ConfigError: no shard found or unreadable file.
    """
    path = Path(path)
    files = sorted(path.glob("shard-*.parquet")) if path.is_dir() else [path]
    if not files:
        raise ConfigError(f"{path}: no shard-*.parquet found")
    out = []
    for fpath in files:
        try:
            t = pq.read_table(fpath, columns=columns)
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(f"{fpath}: unreadable Parquet shard: {exc}") from None
        shapes = {}
        for f in t.schema:
            if f.metadata and b"shape" in f.metadata:
                shapes[f.name] = tuple(json.loads(f.metadata[b"shape"]))
        pyd = t.to_pydict()
        for r in range(t.num_rows):
            row = {}
            for k, v in pyd.items():
                val = v[r]
                if k in shapes:
                    val = np.asarray(val, dtype=np.float32 if k != "mask" else bool).reshape(shapes[k])
                row[k] = val
            out.append(row)
    return out
