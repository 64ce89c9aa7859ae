"""World-fixed surface frames R_c of the point contacts (SEIKO RA-L 2024 Supp. D; seiko.md §5.4,
``TaskSEIKO.cpp`` l.296-307): the one source of the Talos defaults used by the Retargeting
(:attr:`~contactflow.seiko.retargeting_config.RetargetingConfig.surface_rpy_rad`) and the
Controller (:data:`DEFAULT_SURFACE_ROTATIONS`).

A point contact's force (3,) is expressed in R_c (its z axis is the surface normal, pointing from
the surface into the robot's hand), so both stages must use the same frame for the same effector.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["DEFAULT_SURFACE_RPY", "DEFAULT_SURFACE_ROTATIONS", "rpy_rotation"]

#: Effector -> roll, pitch, yaw [rad] of its default surface frame R_c = R_z(yaw) R_y(pitch) R_x(roll):
#: left hand R_y(-pi/2) (normal along world -x, a wall in front), right hand R_x(-pi/2) (normal
#: along world +y, a support on the robot's right).
DEFAULT_SURFACE_RPY: dict[str, tuple[float, float, float]] = {
    "left_hand": (0.0, -math.pi / 2, 0.0),
    "right_hand": (-math.pi / 2, 0.0, 0.0),
}


def rpy_rotation(rpy) -> np.ndarray:
    """``R_z(yaw) R_y(pitch) R_x(roll)`` (3, 3) of ``rpy`` = (roll, pitch, yaw) [rad], the convention
    of ``pin.rpy.rpyToMatrix``; the factor of a zero angle is left out (exactly the identity), so a
    single-axis rotation is that axis's elementary matrix, bit for bit. Agrees with
    ``pin.rpy.rpyToMatrix`` to round-off (1.6e-16 on the defaults).

    Raises:
        ValueError: ``rpy`` does not hold 3 finite numbers.
    """
    r, p, y = (float(a) for a in rpy)
    if not all(math.isfinite(a) for a in (r, p, y)):
        raise ValueError(f"rpy_rotation: expected 3 finite angles [rad], got {rpy!r}")
    R = None
    for a, axis in ((y, 2), (p, 1), (r, 0)):
        if a != 0.0:
            E = _elementary(axis, a)
            R = E if R is None else R @ E
    return np.eye(3) if R is None else R


def _elementary(axis: int, a: float) -> np.ndarray:
    """Rotation by ``a`` [rad] about axis 0 (x), 1 (y) or 2 (z)."""
    c, s = math.cos(a), math.sin(a)
    if axis == 0:
        return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    if axis == 1:
        return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


#: Effector -> its default surface frame R_c (3, 3), from :data:`DEFAULT_SURFACE_RPY`.
DEFAULT_SURFACE_ROTATIONS: dict[str, np.ndarray] = {k: rpy_rotation(v) for k, v in DEFAULT_SURFACE_RPY.items()}
