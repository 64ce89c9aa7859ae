"""Log-Cholesky parameterisation of rigid-body inertia (PRIME §III-B, Rucker & Wensing 2022).

A body's ten inertial parameters ``pi = [m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]``
(pinocchio's ``Inertia.toDynamicParameters`` order, first moment and rotational inertia about the
body frame origin) are physically consistent iff the 4x4 pseudo-inertia ``J = [[Sigma, h], [h^T, m]]``
(``Sigma = tr(I)/2 * 1 - I``, ``h = m c``) is positive definite. The log-Cholesky vector

    theta = [alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3]            (10,)

maps onto every such ``J`` through ``J = U U^T`` with the upper-triangular

    U = e^alpha [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]],

so any ``theta`` in R^10 is a consistent body (mass ``m = e^(2 alpha)``), which is why PRIME can put
``theta`` in the state of an unconstrained estimator. pinocchio 4 provides theta -> inertia
(``pin.LogCholeskyParameters``) and d pi / d theta; the inverse map is :func:`theta_from_inertia`.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from contactflow.errors import ModelError

__all__ = [
    "theta_from_inertia",
    "inertia_from_theta",
    "dynamic_parameters_from_theta",
    "dpi_dtheta",
    "pseudo_inertia",
    "describe_inertia",
]

_FLIP = np.eye(4)[::-1]


def pseudo_inertia(inertia: pin.Inertia) -> np.ndarray:
    """(4, 4) pseudo-inertia ``[[Sigma, h], [h^T, m]]`` of ``inertia`` [kg m^2, kg m, kg]."""
    return np.asarray(pin.PseudoInertia.FromInertia(inertia).toMatrix())


def theta_from_inertia(inertia: pin.Inertia) -> np.ndarray:
    """Log-Cholesky parameters of a physically consistent body.

    Args:
        inertia: spatial inertia about the body frame (mass > 0, pseudo-inertia positive definite).

    Returns:
        theta: (10,) ``[alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3]`` (pinocchio's order).

    Raises:
        ModelError: the inertia is not physically consistent (pseudo-inertia not positive definite).
    """
    J = pseudo_inertia(inertia)
    try:
        L = np.linalg.cholesky(_FLIP @ J @ _FLIP)  # flip-permuted Cholesky gives the upper factor
    except np.linalg.LinAlgError:
        raise ModelError(
            f"inertia (mass {inertia.mass:.4g} kg) is not physically consistent: pseudo-inertia not positive definite"
        ) from None
    U = _FLIP @ L @ _FLIP
    ea = U[3, 3]
    U = U / ea
    return np.array(
        [np.log(ea), np.log(U[0, 0]), np.log(U[1, 1]), np.log(U[2, 2]), U[0, 1], U[1, 2], U[0, 2], U[0, 3], U[1, 3], U[2, 3]]
    )


def inertia_from_theta(theta: np.ndarray) -> pin.Inertia:
    """Spatial inertia of the log-Cholesky vector ``theta`` (10,) (always physically consistent)."""
    return pin.Inertia.FromLogCholeskyParameters(pin.LogCholeskyParameters(np.asarray(theta, dtype=float)))


def dynamic_parameters_from_theta(theta: np.ndarray) -> np.ndarray:
    """(10,) dynamic parameters ``pi`` (pinocchio order) of ``theta`` (10,)."""
    return np.asarray(pin.LogCholeskyParameters(np.asarray(theta, dtype=float)).toDynamicParameters())


def dpi_dtheta(theta: np.ndarray) -> np.ndarray:
    """(10, 10) Jacobian ``d pi / d theta`` of the dynamic parameters wrt the log-Cholesky vector."""
    return np.asarray(pin.LogCholeskyParameters(np.asarray(theta, dtype=float)).calculateJacobian())


def describe_inertia(inertia: pin.Inertia) -> dict:
    """Plain-data summary: mass [kg], COM (3,) in the body frame [m], inertia (3, 3) about the COM [kg m^2]."""
    return {
        "mass_kg": float(inertia.mass),
        "com_m": [float(x) for x in inertia.lever],
        "inertia_com_kgm2": np.asarray(inertia.inertia).tolist(),
    }
