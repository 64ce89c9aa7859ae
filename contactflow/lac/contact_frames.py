"""Contact frames for LAC augmentation: the library L of LAC §III-B.

A contact frame ``e = (q_ref, m_j, p_j, n_j)``: the 11 upper-body reference angles, a contact mask
per upper-body link and, for each contacted link, the contact point and the inward unit surface
normal, both in that link's frame.

Sources:

* :func:`sample_synthetic_frame` — the seeded synthetic generator of lac.md §5 (OMOMO and Inter-X
  are not redistributable): reference postures perturbed within the joint ranges, links weighted
  towards the hands and the torso, contact points on the link's capsule surface.
* :func:`load_contact_frames` — a library file (``.npz`` or ``.yaml``), see ``docs/lac_dataset.md``.
* :func:`frames_from_clip` / :func:`load_clip` — a retargeted human-interaction clip (per-frame
  joint angles and per-link contact labels, points and normals); frames without contact are dropped.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from contactflow.config import read_yaml
from contactflow.errors import ConfigError
from contactflow.lac.model import LacRobot

__all__ = [
    "ContactFrame",
    "REFERENCE_POSTURES",
    "sample_synthetic_frame",
    "load_contact_frames",
    "save_contact_frames",
    "frames_from_clip",
    "load_clip",
]

#: Reference upper-body postures (11,) [rad], order waist yaw, left arm (shoulder pitch, roll,
#: yaw, elbow, wrist roll), right arm. ``default`` is LAC's default; the others are this project's
#: own interaction-like postures (LAC's presets.json values are not reproduced).
REFERENCE_POSTURES = {
    "default": [0.0, 0.2, 0.2, 0.0, 0.6, 0.0, 0.2, -0.2, 0.0, 0.6, 0.0],
    "carry": [0.0, -0.6, 0.15, 0.0, 0.9, 0.0, -0.6, -0.15, 0.0, 0.9, 0.0],
    "push": [0.0, -0.9, 0.2, 0.0, 0.3, 0.0, -0.9, -0.2, 0.0, 0.3, 0.0],
    "raise_left": [0.0, -1.4, 0.3, 0.0, 0.5, 0.0, 0.2, -0.2, 0.0, 0.6, 0.0],
    "raise_right": [0.0, 0.2, 0.2, 0.0, 0.6, 0.0, -1.4, -0.3, 0.0, 0.5, 0.0],
    "wide": [0.0, 0.0, 0.8, 0.0, 0.8, 0.0, 0.0, -0.8, 0.0, 0.8, 0.0],
}


@dataclasses.dataclass(frozen=True)
class ContactFrame:
    """One contact frame of the library.

    Attributes:
        q_ref: (11,) upper-body reference angles [rad] (waist yaw, left arm 5, right arm 5).
        mask: (11,) bool contact activation m_j per upper-body link.
        points: (11, 3) contact point p_j in link j's frame [m] (rows of inactive links are 0).
        normals: (11, 3) inward unit surface normal n_j in link j's frame (rows of inactive links are 0).
        source: provenance label (``"synthetic"``, a file name...).
    """

    q_ref: np.ndarray
    mask: np.ndarray
    points: np.ndarray
    normals: np.ndarray
    source: str = ""

    @property
    def links(self) -> np.ndarray:
        """Indices of the contacted links."""
        return np.flatnonzero(self.mask)


def _validate(lac: LacRobot, q_ref, mask, points, normals, where: str) -> ContactFrame:
    q_ref = np.asarray(q_ref, dtype=float)
    mask = np.asarray(mask, dtype=bool)
    points = np.asarray(points, dtype=float)
    normals = np.asarray(normals, dtype=float)
    if q_ref.shape != (11,):
        raise ConfigError(f"{where}: q_ref must have 11 values (waist yaw + 2 x 5 arm joints), got shape {q_ref.shape}")
    if mask.shape != (11,) or points.shape != (11, 3) or normals.shape != (11, 3):
        raise ConfigError(f"{where}: mask/points/normals must have shapes (11,), (11, 3), (11, 3)")
    if not (np.all(np.isfinite(q_ref)) and np.all(np.isfinite(points)) and np.all(np.isfinite(normals))):
        raise ConfigError(f"{where}: non-finite value")
    if not mask.any():
        raise ConfigError(f"{where}: no contacted link")
    lo = lac.q_lo[lac.upper_v - 6]
    hi = lac.q_hi[lac.upper_v - 6]
    bad = np.flatnonzero((q_ref < lo) | (q_ref > hi))
    if len(bad):
        j = lac.robot.joint_names[lac.upper_v[bad[0]] - 6]
        raise ConfigError(f"{where}: q_ref of {j} = {q_ref[bad[0]]:g} rad is outside [{lo[bad[0]]:g}, {hi[bad[0]]:g}]")
    for i in np.flatnonzero(mask):
        nn = np.linalg.norm(normals[i])
        if abs(nn - 1.0) > 1e-3:
            raise ConfigError(f"{where}: normal of {lac.link_names[i]} is not a unit vector (norm {nn:g})")
    points = np.where(mask[:, None], points, 0.0)
    normals = np.where(mask[:, None], normals, 0.0)
    return ContactFrame(q_ref, mask, points, normals)


def sample_synthetic_frame(lac: LacRobot, rng: np.random.Generator, *, max_tries: int = 20) -> ContactFrame:
    """Draw one synthetic contact frame (lac.md §5).

    A reference posture from :data:`REFERENCE_POSTURES` is perturbed (waist yaw U(-0.5, 0.5) rad,
    arm joints N(0, 0.15^2) rad), clipped to 0.9 of the joint ranges and rejected if the
    self-collision capsules intersect. 1, 2 or 3 links (p = 0.7, 0.25, 0.05) are drawn without
    replacement with the ``lac_links`` weights; each gets a uniform point on its capsule surface
    and the inward normal there.

    Args:
        lac: the robot.
        rng: random generator (the only source of randomness).

    Returns:
        ContactFrame with ``source="synthetic"``.
    """
    names = list(REFERENCE_POSTURES)
    lo = lac.q_lo[lac.upper_v - 6]
    hi = lac.q_hi[lac.upper_v - 6]
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    for _ in range(max_tries):
        q = np.array(REFERENCE_POSTURES[names[rng.integers(len(names))]], float)
        q = q + rng.normal(0.0, 0.15, size=11)
        q[0] = rng.uniform(-0.5, 0.5)
        q = np.clip(q, mid - 0.9 * half, mid + 0.9 * half)
        if lac.min_collision_distance(lac.reference_configuration(q, 0.75))[0] > 0.02:
            break
    n = 1 + int(rng.choice(3, p=[0.7, 0.25, 0.05]))
    links = rng.choice(11, size=n, replace=False, p=lac.link_weights)
    mask = np.zeros(11, bool)
    points = np.zeros((11, 3))
    normals = np.zeros((11, 3))
    for i in sorted(links):
        mask[i] = True
        points[i], normals[i] = lac.surface_point(int(i), rng)
    return ContactFrame(q, mask, points, normals, "synthetic")


def save_contact_frames(path: str | Path, frames: list[ContactFrame], lac: LacRobot) -> None:
    """Write a library as ``.npz`` (arrays ``q_ref``, ``mask``, ``points``, ``normals``, ``link_names``)."""
    np.savez(
        path,
        q_ref=np.array([f.q_ref for f in frames]),
        mask=np.array([f.mask for f in frames]),
        points=np.array([f.points for f in frames]),
        normals=np.array([f.normals for f in frames]),
        link_names=np.array(lac.link_names),
    )


def load_contact_frames(path: str | Path, lac: LacRobot) -> list[ContactFrame]:
    """Load a contact-frame library.

    Formats:
        ``.npz``: ``q_ref`` (N, 11), ``mask`` (N, 11) bool, ``points`` (N, 11, 3) [m],
        ``normals`` (N, 11, 3), optional ``link_names`` (11,) which must equal the robot's order.
        ``.yaml``: ``frames: [{q_ref: [11 values], contacts: {<link>: {point: [x, y, z],
        normal: [x, y, z]}}}]``.

    Args:
        path: the file.
        lac: the robot (link names, joint ranges).

    Returns:
        list of ContactFrame.

    Raises:
        ConfigError: unreadable or malformed file, unknown link, bad shape or range (names the file,
            the frame index and the key).
    """
    path = Path(path)
    src = str(path)
    if path.suffix == ".npz":
        try:
            z = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{src}: not a readable .npz contact-frame library: {exc}") from None
        with z:
            missing = [k for k in ("q_ref", "mask", "points", "normals") if k not in z.files]
            if missing:
                raise ConfigError(f"{src}: missing array(s) {missing}; expected q_ref, mask, points, normals")
            if "link_names" in z.files:
                names = [str(s) for s in z["link_names"]]
                for s in names:
                    lac.link_index(s) if s in lac.link_names else _unknown_link(src, s, lac)
                if tuple(names) != lac.link_names:
                    raise ConfigError(f"{src}: link_names order {names} differs from the robot's {list(lac.link_names)}")
            arrs = [z[k] for k in ("q_ref", "mask", "points", "normals")]
        n = len(arrs[0])
        if any(len(a) != n for a in arrs):
            raise ConfigError(f"{src}: q_ref, mask, points and normals must have the same length")
        out = []
        for i in range(n):
            f = _validate(lac, arrs[0][i], arrs[1][i], arrs[2][i], arrs[3][i], f"{src}: frame {i}")
            out.append(dataclasses.replace(f, source=path.name))
        return out
    if path.suffix in (".yaml", ".yml"):
        raw = read_yaml(path)
        if not isinstance(raw, dict) or not isinstance(raw.get("frames"), list):
            raise ConfigError(f"{src}: expected a mapping with a 'frames' list")
        unknown = set(raw) - {"frames", "description"}
        if unknown:
            raise ConfigError(f"{src}: unknown key(s) {sorted(unknown)}; expected 'frames'")
        out = []
        for i, fr in enumerate(raw["frames"]):
            where = f"{src}: frames[{i}]"
            if not isinstance(fr, dict) or "q_ref" not in fr or not isinstance(fr.get("contacts"), dict):
                raise ConfigError(f"{where}: expected keys 'q_ref' (11 angles) and 'contacts' (mapping link -> point, normal)")
            bad = set(fr) - {"q_ref", "contacts"}
            if bad:
                raise ConfigError(f"{where}: unknown key(s) {sorted(bad)}")
            mask = np.zeros(11, bool)
            pts = np.zeros((11, 3))
            nrm = np.zeros((11, 3))
            for link, c in fr["contacts"].items():
                if link not in lac.link_names:
                    _unknown_link(f"{where}.contacts", link, lac)
                j = lac.link_index(link)
                if not isinstance(c, dict) or set(c) != {"point", "normal"}:
                    raise ConfigError(f"{where}.contacts.{link}: expected exactly 'point' and 'normal'")
                try:
                    pts[j] = np.asarray(c["point"], float)
                    nrm[j] = np.asarray(c["normal"], float)
                except (ValueError, TypeError):
                    raise ConfigError(f"{where}.contacts.{link}: point and normal need 3 numbers each") from None
                mask[j] = True
            try:
                q_ref = np.asarray(fr["q_ref"], float)
            except (ValueError, TypeError):
                raise ConfigError(f"{where}.q_ref: expected 11 numbers") from None
            f = _validate(lac, q_ref, mask, pts, nrm, where)
            out.append(dataclasses.replace(f, source=path.name))
        return out
    raise ConfigError(f"{src}: unknown contact-frame file type {path.suffix!r}; expected .npz or .yaml")


def _unknown_link(where: str, name: str, lac: LacRobot):
    raise ConfigError(f"{where}: unknown LAC contact link {name!r}; expected one of {', '.join(lac.link_names)}")


def frames_from_clip(
    lac: LacRobot,
    joint_names,
    joint_pos: np.ndarray,
    contact: np.ndarray,
    contact_point: np.ndarray,
    contact_normal: np.ndarray,
    *,
    link_names=None,
    source: str = "clip",
    stride: int = 1,
) -> list[ContactFrame]:
    """Turn a retargeted interaction clip into contact frames (frames with >= 1 contact only).

    Args:
        lac: the robot.
        joint_names: (n,) names of the clip's joint columns (23- or 29-DoF; the 11 LAC upper-body
            joints must be among them).
        joint_pos: (T, n) joint angles [rad].
        contact: (T, 11) bool contact label per upper-body link.
        contact_point: (T, 11, 3) contact points in the link frames [m].
        contact_normal: (T, 11, 3) inward normals in the link frames.
        link_names: (11,) link order of the contact arrays (the robot's order when None).
        source: provenance label. stride: keep every ``stride``-th contact frame.

    Returns:
        list of ContactFrame; angles outside the model ranges are clipped to them.

    Raises:
        ConfigError: missing joint, unknown link, inconsistent shapes.
    """
    joint_names = [str(j) for j in joint_names]
    cols = []
    for v in lac.upper_v:
        j = lac.robot.joint_names[v - 6]
        if j not in joint_names:
            raise ConfigError(f"{source}: clip lacks joint {j!r}")
        cols.append(joint_names.index(j))
    joint_pos = np.asarray(joint_pos, float)
    contact = np.asarray(contact, bool)
    T = len(joint_pos)
    if contact.shape != (T, 11) or np.shape(contact_point) != (T, 11, 3) or np.shape(contact_normal) != (T, 11, 3):
        raise ConfigError(f"{source}: contact arrays must be (T, 11), (T, 11, 3), (T, 11, 3) with T = {T}")
    perm = np.arange(11)
    if link_names is not None:
        names = [str(s) for s in link_names]
        for s in names:
            if s not in lac.link_names:
                _unknown_link(source, s, lac)
        perm = np.array([names.index(n) for n in lac.link_names])
    lo = lac.q_lo[lac.upper_v - 6]
    hi = lac.q_hi[lac.upper_v - 6]
    out = []
    keep = np.flatnonzero(contact.any(axis=1))[:: max(1, stride)]
    for t in keep:
        nrm = np.asarray(contact_normal[t], float)[perm]
        norms = np.linalg.norm(nrm, axis=1, keepdims=True)
        nrm = np.where(norms > 1e-9, nrm / np.maximum(norms, 1e-9), 0.0)
        q = np.clip(joint_pos[t, cols], lo, hi)
        f = _validate(lac, q, contact[t][perm], np.asarray(contact_point[t], float)[perm], nrm, f"{source}: frame {t}")
        out.append(dataclasses.replace(f, source=source))
    return out


def load_clip(path: str | Path, lac: LacRobot, *, stride: int = 1) -> list[ContactFrame]:
    """Load a retargeted clip ``.npz`` with arrays ``joint_names``, ``joint_pos``, ``contact``,
    ``contact_point``, ``contact_normal`` and optional ``link_names`` (see :func:`frames_from_clip`).

    Raises:
        ConfigError: unreadable file or missing array (names it).
    """
    path = Path(path)
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable .npz clip: {exc}") from None
    with z:
        need = ("joint_names", "joint_pos", "contact", "contact_point", "contact_normal")
        missing = [k for k in need if k not in z.files]
        if missing:
            raise ConfigError(f"{path}: missing array(s) {missing}")
        return frames_from_clip(
            lac,
            z["joint_names"],
            z["joint_pos"],
            z["contact"],
            z["contact_point"],
            z["contact_normal"],
            link_names=z["link_names"] if "link_names" in z.files else None,
            source=path.name,
            stride=stride,
        )
