"""Port contracts of the ``prime_estimator`` node (same flat-float64 convention as
:mod:`contactflow.contracts.messages`; the input is the robot's ``sensors`` contract)."""

from __future__ import annotations

from typing import Sequence

from contactflow.contracts.messages import Field, PortSpec, port_specs
from contactflow.prime.model import PrimeRobot

__all__ = ["prime_port_specs"]


def prime_port_specs(pr: PrimeRobot, bodies: Sequence[str], rate_hz: float = 100.0) -> dict[str, PortSpec]:
    """Contracts of the estimator's ports.

    Args:
        pr: the robot.
        bodies: identified bodies (joint names), which set the ``parameters`` layout.
        rate_hz: measurement rate.

    Returns:
        port name -> PortSpec: ``sensors`` (input), ``ack``, ``state``, ``forces``, ``torque``,
        ``parameters`` (outputs).
    """
    nq, nv = pr.model.nq, pr.model.nv
    n = nv - 6
    par = []
    for b in bodies:
        par += [
            Field(f"mass.{b}", 1, "kg", description=f"identified mass of the body of {b}"),
            Field(f"com.{b}", 3, "m", "body frame", "centre of mass"),
            Field(f"inertia.{b}", 6, "kg m^2", "COM, body axes", "xx, xy, yy, xz, yz, zz"),
            Field(f"theta.{b}", 10, "-", description="log-Cholesky parameters"),
        ]
    par.append(Field("cost", 1, "-", description="final MAP cost"))
    return {
        "sensors": port_specs(pr.robot, rate_hz)["sensors"],
        "ack": PortSpec("prime_ack", (Field("seq", 1, "-", description="seq of the measurement received"),), rate_hz,
                        "one per received measurement (lockstep replay)"),
        "state": PortSpec("prime_state", (Field("q", nq, "m, rad", "world / free-flyer"),
                                          Field("v", nv, "m/s, rad/s", "base frame")), rate_hz,
                          "refined trajectory, seq = measurement seq"),
        "forces": PortSpec("prime_contact_forces",
                           tuple(Field(f"force.{c}", 3, "N", "world", "mean contact force on the robot over (t_{k-1}, t_k]")
                                 for c in pr.contact_names), rate_hz, "estimated contact forces"),
        "torque": PortSpec("prime_torque", (Field("tau", n, "N m", description="refined torque over (t_{k-1}, t_k]"),),
                           rate_hz, "refined joint torques"),
        "parameters": PortSpec("prime_parameters", tuple(par), 0.0, "identified inertial parameters, one message"),
    }
