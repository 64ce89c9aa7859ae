"""Inspection of an augmented dataset: Fig. 2-like composition plot and kinematic playback.

``plot_composition`` needs matplotlib (optional dependency ``contactflow[plot]``); ``playback``
writes the MuJoCo ``qpos`` trajectory of one episode on the G1 model and, when an offscreen GL
backend works (``MUJOCO_GL=egl`` or ``osmesa``), a PNG strip of a few frames.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pinocchio as pin

from contactflow.errors import ConfigError
from contactflow.lac.dataset import read_episodes
from contactflow.lac.events import COUPLE_BINS_NM, FORCE_BINS_N, couple_bin, force_bin
from contactflow.lac.model import LacRobot

__all__ = ["composition", "plot_composition", "episode_qpos", "playback"]

log = logging.getLogger(__name__)


def composition(dataset: str | Path) -> dict:
    """Events per link split by type, and curriculum-bin occupancy (LAC Fig. 2).

    Returns:
        ``{"links": [...], "force_events": [...], "couple_events": [...], "force_bins": [11],
        "couple_bins": [8], "episodes": n}``.
    """
    rows = read_episodes(dataset, columns=["event_type", "links", "peak_sum"])
    names = list(LacRobot().link_names)
    fe = np.zeros(len(names), int)
    ce = np.zeros(len(names), int)
    fb = np.zeros(11, int)
    cb = np.zeros(8, int)
    for r in rows:
        force = r["event_type"] == "force"
        for link in r["links"]:
            (fe if force else ce)[names.index(link)] += 1
        if force:
            fb[force_bin(r["peak_sum"])] += 1
        else:
            cb[couple_bin(r["peak_sum"])] += 1
    return {"links": names, "force_events": fe.tolist(), "couple_events": ce.tolist(), "force_bins": fb.tolist(),
            "couple_bins": cb.tolist(), "episodes": len(rows)}


def plot_composition(dataset: str | Path, out_png: str | Path) -> dict:
    """Write a Fig. 2-like figure (events per link; force- and couple-bin occupancy) to ``out_png``.

    Raises:
        ConfigError: matplotlib is not installed, or no shard found.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("lac plot needs matplotlib: pip install 'contactflow[plot]'") from None
    c = composition(dataset)
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    y = np.arange(len(c["links"]))
    ax[0].barh(y, c["force_events"], color="tab:red", label="force")
    ax[0].barh(y, c["couple_events"], left=c["force_events"], color="tab:green", label="couple")
    ax[0].set_yticks(y, [n.replace("_link", "") for n in c["links"]], fontsize=7)
    ax[0].set_xlabel("events")
    ax[0].legend()
    ax[0].set_title(f"events per link ({c['episodes']} episodes)")
    ax[1].bar([f"{a:.0f}" for a in FORCE_BINS_N[:-1]], c["force_bins"], color="tab:red")
    ax[1].set_xlabel("summed peak force bin start [N]")
    ax[1].set_title("force curriculum bins")
    ax[2].bar([f"{a:.1f}" for a in COUPLE_BINS_NM[:-1]], c["couple_bins"], color="tab:green")
    ax[2].set_xlabel("summed peak couple bin start [N m]")
    ax[2].set_title("couple curriculum bins")
    for a in ax[1:]:
        a.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return c


def episode_qpos(row: dict, lac: LacRobot) -> np.ndarray:
    """MuJoCo ``qpos`` (T, 30) of an episode row: base (x, y) integrated from the stored base-frame
    velocity, base height and yaw from the data, legs at stance, upper body = q_aug.

    Args:
        row: one element of :func:`read_episodes`.
        lac: the robot.

    Returns:
        (T, 30) [p (3) m, quaternion (w, x, y, z), 23 joint angles rad].
    """
    from contactflow.sim.state import pin_to_mj_qpos

    q_aug = row["q_aug"]
    vel = row["base_vel"].astype(float)
    h = row["base_height"].astype(float)
    T = len(h)
    dt = 0.02 if T <= 1 else 0.02  # the dataset's frame period (Table II)
    out = np.zeros((T, 30))
    p = np.zeros(2)
    yaw = 0.0
    for t in range(T):
        yaw += vel[t, 2] * dt
        R = pin.rpy.rpyToMatrix(0.0, 0.0, yaw)
        p = p + (R @ np.array([vel[t, 0], vel[t, 1], 0.0]))[:2] * dt
        q = lac.reference_configuration(q_aug[t].astype(float), float(h[t]), yaw)
        q[0:2] = p
        out[t] = pin_to_mj_qpos(q)
    return out


def playback(dataset: str | Path, episode: int, out_npz: str | Path, *, png: str | Path | None = None) -> dict:
    """Kinematic playback of row ``episode`` on the G1 MuJoCo model.

    Writes ``out_npz`` with ``qpos`` (T, 30), ``link_xpos`` (T, 11, 3) from ``mj_kinematics``, and
    the external force per link. With ``png``, renders 5 frames side by side (skipped with a warning
    when no offscreen GL context can be created).

    Returns:
        summary dict (frames, max hand/torso displacement [m], png written or why not).
    """
    import mujoco

    from contactflow.sim.g1_mujoco import build_g1_model

    rows = read_episodes(dataset)
    if not 0 <= episode < len(rows):
        raise ConfigError(f"{dataset}: episode {episode} out of range (0..{len(rows) - 1})")
    row = rows[episode]
    lac = LacRobot()
    g1 = build_g1_model(lac.robot, meshes=png is not None)
    qpos = episode_qpos(row, lac)
    d = mujoco.MjData(g1.model)
    ids = [g1.body_id(n) for n in lac.link_names]
    xpos = np.zeros((len(qpos), 11, 3))
    for t, q in enumerate(qpos):
        d.qpos[:] = q
        mujoco.mj_kinematics(g1.model, d)
        xpos[t] = d.xpos[ids]
    np.savez(out_npz, qpos=qpos, link_xpos=xpos, f_ext=row["f_ext"], tau_ext=row["tau_ext"],
             link_names=np.array(lac.link_names))
    disp = np.linalg.norm(xpos - xpos[:1], axis=2).max(axis=0)
    info = {"frames": len(qpos), "episode_index": int(row["episode_index"]), "event_type": row["event_type"],
            "links": list(row["links"]), "max_link_displacement_m": dict(zip(lac.link_names, np.round(disp, 4).tolist())),
            "png": None}
    if png is not None:
        try:
            info["png"] = _render_strip(g1.model, qpos, png)
        except Exception as exc:  # noqa: BLE001 - no GL backend: report and continue
            log.warning("rendering skipped: %s", exc)
            info["png"] = f"skipped: {type(exc).__name__}: {exc}"
    return info


def _render_strip(model, qpos: np.ndarray, png) -> str:
    import mujoco

    try:
        from PIL import Image
    except ImportError:
        raise ConfigError("rendering to PNG needs pillow (installed with matplotlib)") from None
    d = mujoco.MjData(model)
    w, h = 320, 400
    frames = []
    with mujoco.Renderer(model, height=h, width=w) as r:
        cam = mujoco.MjvCamera()
        cam.lookat[:] = (0.0, 0.0, 0.6)
        cam.distance, cam.azimuth, cam.elevation = 2.6, 150.0, -10.0
        for t in np.linspace(0, len(qpos) - 1, 5).astype(int):
            d.qpos[:] = qpos[t]
            mujoco.mj_forward(model, d)
            cam.lookat[:2] = qpos[t, :2]
            r.update_scene(d, camera=cam)
            frames.append(r.render())
    Image.fromarray(np.concatenate(frames, axis=1)).save(png)
    return str(png)
