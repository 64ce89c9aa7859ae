"""The teacher's quasi-static arm wrench estimate, computed from the deploy frame inside the student's graph.

``lac_expert`` estimates the wrench on each hand from the joint rows of the floating-base equation of motion
restricted to the arm's five joints (:mod:`contactflow.lac.estimation`): at rest ``J_e,arm^T w = g_arm(q) -
tau_arm``, the force as the damped least-squares solution ``F = (A^T A + l^2 I)^-1 A^T r`` with ``A = Jp_arm^T``
and ``r = g_arm - tau_arm``, then the couple from the residual, ``C = (B^T B + mu I)^-1 B^T (r - A F)`` with
``B = Jr_arm^T``; each estimate low-passed (first order) and soft-thresholded. Every quantity it needs but the
base yaw is in LAC's 95-D frame: the arm angles and rates (``joint_pos_rel``, ``joint_vel``), the PD torque
``tau = Kp (scale a_last - q_rel) - Kd qdot`` (``last_action``: the target in force; the PD law of LAC's deploy,
lac.md section 1.1), and the gravity direction in the base frame (``projected_gravity``). :class:`ArmStatics` does
that computation with torch operations (so it exports to ONNX with the student): forward kinematics of the waist
and the two five-joint arms from the pinocchio model's joint placements, axes, masses and centres of mass; the
arm rows of the generalized gravity; the Jacobians at the point where the simulator applies a hand force; the two
damped solves; the low-pass over the newest frames; the soft threshold.

What it leaves out against the teacher (stated, not hidden): the inertial terms (the teacher's inverse dynamics
with finite-difference accelerations; here the estimate is quasi-static, so arm motions read as loads until the
low-pass averages them, and an action change reads as a load until the arm settles where its PD torque balances
again; the frames' joint rates would give the joint accelerations, not the base's linear one), the base yaw (the
frame has none: the world axes are the yaw-free ones of the base, ``R = Ry(pitch) Rx(roll)``; the standing robot's
yaw stays within a few degrees) and the effort clamp. The teacher's warm-up after a reset is kept (the history's
fill weighs nothing, :class:`ArmStatics`): the runs of 2026-12-06 23:01 - 12-07 01:00 UTC were made before it
(revision 2c61a1b), when an episode's first frames read the arms' posture as loads of up to ~50 N for ~0.3 s;
those of 2026-12-07 02:45 - 04:10 UTC with it (neither adopted: docs/lac_policy_runs.md). On
the round-0 episodes of the shipped student's run it reads a hand force as the teacher does
(along the true load over its magnitude: 0.87 and 0.90 of the left hand's 2-6 N and 6-12 N, the teacher's 0.87 and
0.89; the shipped student's learned head 0.56 and 0.66: ``benchmarks/bench_lac_load_estimate.py``, docs/lac_policy_runs.md,
"The runs of 2026-12-06 23:01 - 12-07 01:00 UTC").
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from torch import nn

__all__ = ["ArmStaticsParams", "arm_statics_params", "ArmStatics"]

#: gravity's acceleration [m/s^2], as pinocchio's default model gravity
GRAVITY = 9.81


@dataclasses.dataclass(frozen=True)
class ArmStaticsParams:
    """Everything :class:`ArmStatics` needs, float64 numpy (the buffers it exports as constants).

    Attributes:
        q_W, q_b: (frame_dim, 2, 6), (2, 6): each chain's joint angles (waist yaw, then the arm's five) from a frame,
            ``q = frame @ q_W + q_b`` [rad] (``joint_pos_rel`` plus the default).
        v_W: (frame_dim, 2, 5): the arm joints' rates, ``frame @ v_W`` [rad/s].
        d_W: (frame_dim, 2, 5): the arm joints' PD target minus angle, ``frame @ d_W`` [rad]
            (:func:`~contactflow.lac.train.student.pd_error_map`).
        kp, kd: (2, 5) the arm joints' PD gains [N m/rad], [N m s/rad].
        g_W: (frame_dim, 3): the gravity direction in the base frame (``projected_gravity``), ``frame @ g_W``.
        rot, trans: (2, 6, 3, 3), (2, 6, 3): each chain joint's placement in its parent joint's frame (the
            waist's in the base frame).
        axis: (2, 6, 3) each joint's axis in its own frame (unit).
        mass: (2, 6) [kg], com: (2, 6, 3) [m]: each joint's body (fixed children merged) mass and centre of mass
            in its frame.
        point: (2, 3) where a hand force acts, in the hand joint's frame [m] (the estimator's ``arm_point_local_m``,
            or where it is None the URDF hand link's CoM, where the simulator applies it).
        lever_damping_sq: ``l^2`` of the force solve [m^2]; couple_damping: ``mu`` of the couple solve.
        filter_w: (n_frames,) low-pass weights of the newest frames, oldest first (sum 1).
        deadband_force_n, max_force_n, deadband_couple_nm, max_couple_nm: the soft threshold and clamp.
        ramp_frames: the estimator's warm-up after a reset, in frames (``warmup_s`` at ``rate_hz``): the reading
            ``j`` frames after it weighs ``min(1, j / ramp_frames)``.
        act_col: (2, 5) int: each arm joint's column in the policy's action.
        act_scale: (2, 5): each arm joint's action scale [rad per action unit] (the target is ``default + scale a``).
        k_W: (frame_dim, 2, 2): each hand's commanded stiffness ``[K, K_theta]`` [N/m, N m/rad], ``frame @ k_W`` (the
            frame's raw ``stiffness`` channels of the hand's group, ``contactflow.lac.config.GROUP_CHANNELS``).
        a_pos, a_ori: the gains of a hand's admittance in the teacher's IK at rest, per kilogram of the hand: the IK's
            target weights times the control period over the admittance's damping, ``ik.w_contact_pos dt / D`` and
            ``ik.w_contact_ori dt / D_omega`` [m/N and rad/(N m) times the IK's cost per kg] (the target's weight is the
            hand body's ``mass[:, 5]``; :meth:`ArmStatics.admittance_step`).
        w_posture: the IK's posture weight on each upper-body joint (``ik.w_posture``).
        max_displacement_m: the soft bound ``d_max`` of a hand's admittance displacement (``arm_max_displacement_m``).
        bound_damping: ``D / dt`` [N/m], the admittance's damping over the control period (the bound's rest equation).
        adm_mass, adm_inertia: the admittance's virtual mass ``M`` [kg] and inertia ``I`` [kg m^2] (LAC eqs. (8), (9)).
        adm_zeta: the damping ratio ``zeta`` of its impedance damping ``K_d = 2 zeta sqrt(M K)`` (eq. (7)).
        adm_damping_lin, adm_damping_ang: its damping ``D`` [N s/m] and ``D_omega`` [N m s/rad] (eqs. (8), (9)).
        dt: the control period [s] (``1 / rate_hz``).
    """

    q_W: np.ndarray
    q_b: np.ndarray
    v_W: np.ndarray
    d_W: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    g_W: np.ndarray
    rot: np.ndarray
    trans: np.ndarray
    axis: np.ndarray
    mass: np.ndarray
    com: np.ndarray
    point: np.ndarray
    lever_damping_sq: float
    couple_damping: float
    filter_w: np.ndarray
    deadband_force_n: float
    max_force_n: float
    deadband_couple_nm: float
    max_couple_nm: float
    ramp_frames: float
    act_col: np.ndarray
    act_scale: np.ndarray
    k_W: np.ndarray
    a_pos: float
    a_ori: float
    w_posture: float
    max_displacement_m: float
    bound_damping: float
    adm_mass: float = 1.0
    adm_inertia: float = 1.0
    adm_zeta: float = 1.0
    adm_damping_lin: float = 2.0
    adm_damping_ang: float = 2.0
    dt: float = 0.02


def arm_statics_params(robot, spec, expert_cfg, *, n_frames: int = 16) -> ArmStaticsParams:
    """:class:`ArmStaticsParams` of ``lac_expert``'s estimator on ``robot`` read through the deploy ``spec``.

    Args:
        robot: the G1 (``load_robot("g1")``). spec: the deploy spec bound to it (``lac``).
        expert_cfg: :class:`~contactflow.lac.expert.ExpertConfig` (its ``arm_links``, ``estimator``, ``rate_hz``).
        n_frames: newest frames the low-pass runs over (its first-order response, ``estimator.cutoff_hz`` at
            ``rate_hz``, truncated there and renormalised; 16 frames at 3 Hz and 50 Hz keep 99.4 % of it).

    Raises:
        ConfigError: an arm link's chain from the base is not a waist joint and five revolute joints about
            a principal axis; the spec lacks ``joint_pos_rel``, ``joint_vel``, ``last_action``,
            ``projected_gravity`` or ``stiffness``, or does not hold an arm joint in them.
    """
    from contactflow.errors import ConfigError
    from contactflow.lac.model import UPPER_GROUPS, LacRobot
    from contactflow.lac.train.student import _term_position, pd_error_map

    m = robot.model
    lac = LacRobot(robot)
    terms = {t: spec.term(t) for t in ("joint_pos_rel", "joint_vel", "last_action", "projected_gravity", "stiffness")}
    missing = [t for t, b in terms.items() if b is None]
    if missing:
        raise ConfigError(f"{spec.file}: student.arm_estimate needs the observation terms {missing}")
    jpr, jv, _, pg, stiff = terms.values()
    robot_to_policy = np.empty(len(spec.policy_to_robot), int)
    robot_to_policy[spec.policy_to_robot] = np.arange(len(spec.policy_to_robot))
    try:
        pd_err = pd_error_map(spec)
    except IndexError:
        raise ConfigError(f"{spec.file}: last_action or joint_pos_rel does not hold every action's joint") from None
    est = expert_cfg.estimator
    D = spec.frame_dim
    q_W, q_b = np.zeros((D, 2, 6)), np.zeros((2, 6))
    v_W, d_W = np.zeros((D, 2, 5)), np.zeros((D, 2, 5))
    kp, kd = np.zeros((2, 5)), np.zeros((2, 5))
    rot, trans, axis = np.zeros((2, 6, 3, 3)), np.zeros((2, 6, 3)), np.zeros((2, 6, 3))
    mass, com, point = np.zeros((2, 6)), np.zeros((2, 6, 3)), np.zeros((2, 3))
    act_col, act_scale = np.zeros((2, 5), int), np.zeros((2, 5))
    k_W = np.zeros((D, 2, 2))
    for a, link in enumerate(expert_cfg.arm_links):
        i = lac.link_index(link)
        jid = lac.link_joint_ids[i]
        for c, channel in enumerate(UPPER_GROUPS[lac.link_groups[i]]):  # the hand group's K, K_theta
            k_W[stiff.sl.start + channel, a, c] = 1.0 / stiff.cfg.scale
        chain = [int(j) for j in m.supports[jid] if j > 1]  # the base's free flyer is joint 1
        if len(chain) != 6:
            raise ConfigError(f"student.arm_estimate: {link}'s chain from the base has {len(chain)} joints "
                              f"{[m.names[j] for j in chain]}, expected the waist and five arm joints")
        for k, j in enumerate(chain):
            short = m.joints[j].shortname()
            if short not in ("JointModelRX", "JointModelRY", "JointModelRZ"):
                raise ConfigError(f"student.arm_estimate: {m.names[j]} is a {short}, expected a revolute joint "
                                  f"about a principal axis")
            axis[a, k, "XYZ".index(short[-1])] = 1.0
            M = m.jointPlacements[j]
            rot[a, k], trans[a, k] = M.rotation, M.translation
            mass[a, k], com[a, k] = m.inertias[j].mass, m.inertias[j].lever
            r = m.joints[j].idx_q - 7  # robot joint order
            try:
                q_W[jpr.sl.start + _term_position(jpr, r), a, k] = 1.0 / jpr.cfg.scale
            except IndexError:
                raise ConfigError(f"{spec.file}: joint_pos_rel does not hold {m.names[j]}") from None
            q_b[a, k] = spec.default_robot[r]
            if k == 0:
                continue
            try:
                v_W[jv.sl.start + _term_position(jv, r), a, k - 1] = 1.0 / jv.cfg.scale
            except IndexError:
                raise ConfigError(f"{spec.file}: joint_vel does not hold {m.names[j]}") from None
            d_W[:, a, k - 1] = pd_err[:, robot_to_policy[r]]
            kp[a, k - 1], kd[a, k - 1] = spec.kp[r], spec.kd[r]
            act_col[a, k - 1] = robot_to_policy[r]
            act_scale[a, k - 1] = spec.scale[robot_to_policy[r]]
        point[a] = lac.applied_point_local(i) if est.arm_point_local_m is None else np.asarray(est.arm_point_local_m, float)
    g_W = np.zeros((D, 3))
    for c in range(3):
        g_W[pg.sl.start + c, c] = 1.0 / pg.cfg.scale
    dt = 1.0 / expert_cfg.rate_hz
    adm = expert_cfg.admittance
    alpha = dt / (dt + 1.0 / (2.0 * np.pi * est.cutoff_hz))
    w = alpha * (1.0 - alpha) ** np.arange(n_frames)[::-1]  # oldest first
    return ArmStaticsParams(q_W=q_W, q_b=q_b, v_W=v_W, d_W=d_W, kp=kp, kd=kd, g_W=g_W, rot=rot,
                            trans=trans, axis=axis, mass=mass, com=com, point=point,
                            lever_damping_sq=float(est.lever_damping_m) ** 2, couple_damping=float(est.couple_damping),
                            filter_w=w / w.sum(), deadband_force_n=float(est.deadband_force_n),
                            max_force_n=float(est.max_force_n), deadband_couple_nm=float(est.deadband_couple_nm),
                            max_couple_nm=float(est.max_couple_nm), ramp_frames=float(est.warmup_s * expert_cfg.rate_hz),
                            act_col=act_col, act_scale=act_scale, k_W=k_W,
                            a_pos=float(expert_cfg.ik.w_contact_pos * dt / adm.damping_lin_ns_per_m),
                            a_ori=float(expert_cfg.ik.w_contact_ori * dt / adm.damping_ang_nms_per_rad),
                            w_posture=float(expert_cfg.ik.w_posture),
                            max_displacement_m=float(expert_cfg.arm_max_displacement_m),
                            bound_damping=float(adm.damping_lin_ns_per_m / dt),
                            adm_mass=float(adm.mass_kg), adm_inertia=float(adm.inertia_kgm2),
                            adm_zeta=float(adm.damping_ratio), adm_damping_lin=float(adm.damping_lin_ns_per_m),
                            adm_damping_ang=float(adm.damping_ang_nms_per_rad), dt=float(dt))


def _cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a x b over the last axis (3); written out (``torch.linalg.cross`` has no ONNX export)."""
    ax, ay, az = a.unbind(-1)
    bx, by, bz = b.unbind(-1)
    return torch.stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], dim=-1)


def _solve_spd(S: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``S^-1 y`` for (..., n, n) symmetric positive definite ``S`` and (..., n) ``y``: Cholesky, written out for a
    small ``n`` (no ONNX export of ``torch.linalg``; the solves' damping and the posture weight keep ``S`` positive
    definite)."""
    n = S.shape[-1]
    L = [[None] * n for _ in range(n)]
    for j in range(n):
        L[j][j] = torch.sqrt(S[..., j, j] - sum(L[j][k] * L[j][k] for k in range(j)))
        for i in range(j + 1, n):
            L[i][j] = (S[..., i, j] - sum(L[i][k] * L[j][k] for k in range(j))) / L[j][j]
    z = []
    for i in range(n):  # L z = y
        z.append((y[..., i] - sum(L[i][k] * z[k] for k in range(i))) / L[i][i])
    x = [None] * n
    for i in reversed(range(n)):  # L^T x = z
        x[i] = (z[i] - sum(L[k][i] * x[k] for k in range(i + 1, n))) / L[i][i]
    return torch.stack(x, dim=-1)


def _soft(x: torch.Tensor, band: float, cap: float) -> torch.Tensor:
    """The estimator's soft threshold per 3-vector: 0 below ``band``, the magnitude less ``band`` above it,
    clamped at ``cap`` (:func:`contactflow.lac.estimation._soft`)."""
    n = torch.sqrt((x * x).sum(dim=-1, keepdim=True) + 1e-12)
    return x * (torch.clamp(n - band, min=0.0, max=cap) / n)


class ArmStatics(nn.Module):
    """The teacher's arm wrench estimate from deploy frames (module docstring).

    Args:
        p: :func:`arm_statics_params` (the estimator's arrays and scalars are buffers: a checkpoint keeps what it was
            trained with; the admittance's, ``k_W``, ``chain_sel`` and the gains, are rebuilt from the spec and the
            expert's configuration, so checkpoints made before them load).

    Shapes: ``forward(frames (B, H, frame_dim))`` with ``H >= len(p.filter_w)`` -> (B, 12): the force on the left
    and the right hand [N], then the couple on each [N m], world axes without the base yaw; ``raw(frames (N,
    frame_dim))`` -> (N, 12) the same of one frame, before the low-pass, the warm-up and the threshold.

    The history's fill (the deploy runner replicates the first frame into every slot, then shifts; ``history.fill:
    first_frame``) holds no reading: the leading frames equal to the oldest, all but the newest of them, weigh 0, and
    the readings after it are ramped in as the teacher's after a reset (``ramp_frames``), so an episode's first
    frame, whose last action (0) was never the PD target in force, does not read the arms' posture as a load; a
    history without fill (the reset a history's length ago or more, past ``ramp_frames``) weighs its readings fully. A
    robot whose consecutive frames were bit-identical would be taken for a fresh start there (a simulated or
    measured frame never is).
    """

    _SCALARS = ("lever_damping_sq", "couple_damping", "deadband_force_n", "max_force_n", "deadband_couple_nm",
                "max_couple_nm", "ramp_frames")

    def __init__(self, p: ArmStaticsParams):
        super().__init__()
        for name in ("q_W", "q_b", "v_W", "d_W", "kp", "kd", "g_W", "rot", "trans", "axis", "mass", "com",
                     "point", "filter_w"):
            self.register_buffer(name, torch.as_tensor(np.asarray(getattr(p, name)), dtype=torch.float32))
        self.register_buffer("scalars", torch.tensor([float(getattr(p, k)) for k in self._SCALARS], dtype=torch.float64))
        # the admittance's (feedforward(admittance=True)): not in the state dict (from the spec and the expert's
        # configuration), so checkpoints made before it load
        self.register_buffer("k_W", torch.as_tensor(np.asarray(p.k_W), dtype=torch.float32), persistent=False)
        self.adm = (float(p.a_pos), float(p.a_ori), float(p.w_posture), float(p.max_displacement_m),
                    float(p.bound_damping))
        self.lag = (float(p.adm_mass), float(p.adm_inertia), float(p.adm_zeta), float(p.adm_damping_lin),
                    float(p.adm_damping_ang), float(p.dt))
        sel = np.zeros((2, 11, 6), np.float32)  # each hand's chain (waist, five arm joints) in [waist, left, right]
        sel[0, 0, 0] = sel[1, 0, 0] = 1.0
        sel[0, 1:6, 1:] = sel[1, 6:11, 1:] = np.eye(5)
        self.register_buffer("chain_sel", torch.from_numpy(sel), persistent=False)
        self.n_frames = len(p.filter_w)

    def _scalar(self, name: str) -> float:
        return float(self.scalars[self._SCALARS.index(name)])

    def raw(self, x: torch.Tensor) -> torch.Tensor:
        return self._statics(x)[0]

    def _statics(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(N, frame_dim) frames -> (the hands' wrench readings (N, 12) as :meth:`raw`, the arm rows of the gravity
        torque ``g_arm`` (N, 2, 5) [N m], ``Jp^T`` and ``Jr^T`` (N, 2, 5, 3) at the hands' points, base frame,
        ``Rw`` (N, 1, 3, 3) the base's rotation into the yaw-free world axes, and the waist's rows ``[Jp^T, Jr^T]``
        of each hand's Jacobian (N, 2, 2, 3))."""
        n, dev = x.shape[0], x.device
        q = torch.einsum("nd,dak->nak", x, self.q_W) + self.q_b  # (n, 2, 6)
        qd = torch.einsum("nd,dak->nak", x, self.v_W)  # (n, 2, 5)
        tau = self.kp * torch.einsum("nd,dak->nak", x, self.d_W) - self.kd * qd
        g = torch.einsum("nd,dc->nc", x, self.g_W)  # gravity direction, base frame
        # forward kinematics in the base frame: each joint's origin p, axis a and body CoM c
        c_q, s_q = torch.cos(q), torch.sin(q)
        eye = torch.eye(3, device=dev, dtype=x.dtype)
        zero2 = torch.zeros(2, device=dev, dtype=x.dtype)
        R = eye.expand(n, 2, 3, 3)
        t = torch.zeros(n, 2, 3, device=dev, dtype=x.dtype)
        P, A, Cm = [], [], []
        for k in range(6):
            t = t + (R @ self.trans[:, k].unsqueeze(-1)).squeeze(-1)
            R = R @ self.rot[:, k]
            u = self.axis[:, k]  # (2, 3) unit principal axis: Rodrigues with it
            ux = torch.stack([torch.stack([zero2, -u[:, 2], u[:, 1]], -1),
                              torch.stack([u[:, 2], zero2, -u[:, 0]], -1),
                              torch.stack([-u[:, 1], u[:, 0], zero2], -1)], -2)
            ck, sk = c_q[:, :, k, None, None], s_q[:, :, k, None, None]
            R = R @ (eye + sk * ux + (1.0 - ck) * (ux @ ux))
            P.append(t)
            A.append((R @ u.unsqueeze(-1)).squeeze(-1))
            Cm.append(t + (R @ self.com[:, k].unsqueeze(-1)).squeeze(-1))
        hand = P[-1] + (R @ self.point.unsqueeze(-1)).squeeze(-1)  # (n, 2, 3)
        gamma = GRAVITY * g[:, None, :]  # (n, 1, 3)
        # arm joint i (chain index 1..5): g_i = -a_i . ((S_i - M_i p_i) x gamma), S_i, M_i the moments of the bodies
        # from i to the hand
        rows_g, rows_Jp, rows_Jr = [], [], []
        S = torch.zeros(n, 2, 3, device=dev, dtype=x.dtype)
        Msum = zero2
        for k in range(5, 0, -1):
            S = S + self.mass[:, k, None] * Cm[k]
            Msum = Msum + self.mass[:, k]
            lever = S - Msum[:, None] * P[k]
            rows_g.append(-(A[k] * _cross(lever, gamma)).sum(-1))
            rows_Jp.append(_cross(A[k], hand - P[k]))
            rows_Jr.append(A[k])
        g_arm = torch.stack(rows_g[::-1], -1)  # (n, 2, 5)
        Jp_T = torch.stack(rows_Jp[::-1], -2)  # (n, 2, 5, 3): A = Jp^T
        Jr_T = torch.stack(rows_Jr[::-1], -2)
        # the waist's rows of each hand's Jacobian (the admittance's IK moves it; the estimate's solves leave it out)
        Jw_T = torch.stack([_cross(A[0], hand - P[0]), A[0]], -2)  # (n, 2, 2, 3): [Jp^T, Jr^T] of the waist
        r = g_arm - tau
        F = _solve_spd(Jp_T.transpose(-1, -2) @ Jp_T + self._scalar("lever_damping_sq") * eye,
                        (Jp_T.transpose(-1, -2) @ r.unsqueeze(-1)).squeeze(-1))
        res = r - (Jp_T @ F.unsqueeze(-1)).squeeze(-1)
        C = _solve_spd(Jr_T.transpose(-1, -2) @ Jr_T + self._scalar("couple_damping") * eye,
                        (Jr_T.transpose(-1, -2) @ res.unsqueeze(-1)).squeeze(-1))
        # base -> yaw-free world: R = Ry(pitch) Rx(roll) with R^T e_z = -g
        gx, gy, gz = g.unbind(-1)
        cth = torch.sqrt(torch.clamp(1.0 - gx * gx, min=1e-6))
        sph, cph = -gy / cth, -gz / cth
        zero = torch.zeros_like(gx)
        Rw = torch.stack([torch.stack([cth, gx * sph, gx * cph], -1), torch.stack([zero, cph, -sph], -1),
                          torch.stack([-gx, cth * sph, cth * cph], -1)], -2)[:, None]  # (n, 1, 3, 3)
        F = (Rw @ F.unsqueeze(-1)).squeeze(-1)
        C = (Rw @ C.unsqueeze(-1)).squeeze(-1)
        return torch.cat([F.reshape(n, 6), C.reshape(n, 6)], dim=-1), g_arm, Jp_T, Jr_T, Rw, Jw_T

    def weights(self, frames: torch.Tensor, n_ends: int = 1) -> torch.Tensor:
        """The low-pass times the warm-up ramp, 0 on the history's fill (class docstring), of the estimate at each of
        the ``n_ends`` newest frames of ``frames`` (B, H, frame_dim): (B, n_frames) for one (the newest), else (B,
        n_ends, n_frames), oldest end first; the estimate at end ``e`` weighs the readings of frames ``e - n_frames +
        1 .. e`` and is the one this method gives for ``frames[:, :e + 1]``."""
        b, h, _ = frames.shape
        n, dev, dt = self.n_frames, frames.device, frames.dtype
        self._check_history(h, n + n_ends - 1)
        same = (frames == frames[:, :1]).all(dim=-1).to(dt)  # (B, H)
        fill = (torch.cumsum(1.0 - same, dim=1) == 0).to(dt).sum(dim=1, keepdim=True)  # leading copies
        ends = torch.arange(h - n_ends, h, device=dev, dtype=dt)  # (E,)
        fill = torch.minimum(fill, ends[None] + 1.0)[:, :, None]  # (B, E, 1): the copies within frames[:, :e + 1]
        slot = ends[:, None] - (n - 1) + torch.arange(n, device=dev, dtype=dt)[None]  # (E, n)
        j = slot[None] - fill + 2.0  # the reading's count since the reset (1: the first frame); <= 0: fill
        ramp_frames = self._scalar("ramp_frames")
        ramp = torch.clamp(j / ramp_frames, 0.0, 1.0) if ramp_frames > 0 else (j >= 1).to(dt)
        # no fill left (the oldest frame alone is "leading"): the reset is at the oldest slot or before it, a history's
        # length ago: ramped in (the count from the oldest slot would drop by one with each frame the history sheds)
        w = self.filter_w[None, None] * torch.where(fill > 1.5, ramp, torch.ones_like(ramp))
        return w[:, 0] if n_ends == 1 else w

    def _estimate(self, readings: torch.Tensor, frames: torch.Tensor, n_ends: int = 1) -> torch.Tensor:
        """The estimate at each of the ``n_ends`` newest frames of ``frames`` (B, H, frame_dim) from the readings of
        its newest ``n_frames + n_ends - 1`` frames (B, that, 12): the low-pass with the warm-up (:meth:`weights`),
        then the soft threshold; (B, 12) for one end, else (B, n_ends, 12), oldest first."""
        b, n = len(frames), self.n_frames
        w = self.weights(frames, n_ends)
        if n_ends == 1:
            y = (readings * w[:, :, None]).sum(dim=1)
        else:  # each end's window of readings: (B, E, 12, n)
            win = torch.stack([readings[:, k:k + n_ends] for k in range(n)], dim=-1)
            y = (win * w[:, :, None, :]).sum(dim=-1)
        lead = y.shape[:-1]
        f = _soft(y[..., :6].reshape(*lead, 2, 3), self._scalar("deadband_force_n"), self._scalar("max_force_n"))
        c = _soft(y[..., 6:].reshape(*lead, 2, 3), self._scalar("deadband_couple_nm"), self._scalar("max_couple_nm"))
        return torch.cat([f.reshape(*lead, 6), c.reshape(*lead, 6)], dim=-1)

    def _check_history(self, h: int, need: int) -> None:
        if h < need:
            raise ValueError(f"ArmStatics: needs the newest {need} frames, got a history of {h}")

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        b, h, d = frames.shape
        self._check_history(h, self.n_frames)
        x = frames[:, h - self.n_frames:].reshape(b * self.n_frames, d)
        return self._estimate(self.raw(x).reshape(b, self.n_frames, 12), frames)

    def admittance_step(self, F: torch.Tensor, C: torch.Tensor, k: torch.Tensor, Jp_T: torch.Tensor,
                        Jr_T: torch.Tensor, Jw_T: torch.Tensor) -> torch.Tensor:
        """The arm joints' offset from the reference posture at the rest state of the teacher's hand admittances.

        ``lac_expert`` steps each hand's virtual admittance (LAC eqs. (7)-(10)) from the pose its IK solved, ``x_vir =
        x + xd_vir dt`` with ``D xd_vir -> K (x_ref - x) + F`` at rest, and its whole-body IK (LAC eq. (11)) reaches for
        it against the posture term. At rest the IK's step is zero (its damping drops out); linearised at the frame's
        angles that is, over the waist and both arms (11 joints; base and legs held),
        ``sum_h (a_p K_h Jp_h^T Jp_h + a_o K_theta,h Jr_h^T Jr_h) dq + w_post dq = sum_h a_p Jp_h^T F_h + a_o Jr_h^T
        C_h``, ``a_p = m_h w_p dt / D``, ``a_o = m_h w_o dt / D_omega``: the hand yields by ``F / K`` where the
        posture and the orientation weigh little, less where they hold it. The teacher's soft bound of the target
        (``d_max tanh(|d| / d_max)``, each tick) makes its rest displacement ``u`` solve ``K u + (D / dt) (d_max
        atanh(u / d_max) - u) = |F|`` for a free hand: the force enters as ``F K u / |F|`` (the force whose linear rest
        is that ``u``; 30 bisections). The waist's own offset is left to the network (it is not an arm joint).

        The rest only, not the way there: in a closed loop the estimate reads the PD torque of the offset in force
        back as a load (a static loop gain of about ``Kp / (K |J|^2)``, ~16 at K = 10 N/m, ~1.6 at 100), and the
        students trained with it fell from standing, their estimate and offset growing together
        (docs/lac_policy_runs.md, "The runs of 2026-12-07 11:58 - 13:39 UTC"); the teacher reaches its rest through
        the admittance's virtual mass and damping.

        Args:
            F, C: (B, 2, 3) the estimate of :meth:`forward`, each hand's force [N] and couple [N m], rotated into the
                base frame. k: (B, 2, 2) each hand's ``[K, K_theta]`` [N/m, N m/rad] (clamped at 1). Jp_T, Jr_T: (B,
                2, 5, 3) the hands' Jacobians, transposed, base frame; Jw_T: (B, 2, 2, 3) their waist rows ``[Jp^T,
                Jr^T]``.

        Returns:
            (B, 2, 5) ``dq`` [rad], the arm joints in chain order.
        """
        a_pos, a_ori, w_post, d_max, c = self.adm
        k = torch.clamp(k, min=1.0)
        K, K_th = k[..., 0], k[..., 1]  # (B, 2)
        # the soft bound's rest: bisect K u + c (d_max atanh(u / d_max) - u) = |F| on [0, min(|F| / K, d_max)]
        f = torch.sqrt((F * F).sum(dim=-1) + 1e-12)
        lo = torch.zeros_like(f)
        hi = torch.clamp(f / K, max=d_max * (1.0 - 1e-6))
        for _ in range(30):
            u = 0.5 * (lo + hi)
            r = u / d_max  # atanh written out (no ONNX export of aten::atanh at opset 17)
            below = K * u + c * (0.5 * d_max * torch.log((1.0 + r) / (1.0 - r)) - u) < f
            lo, hi = torch.where(below, u, lo), torch.where(below, hi, u)
        F = F * (K * 0.5 * (lo + hi) / f).unsqueeze(-1)
        m = self.mass[:, 5]  # (2,) the hands
        Jp6 = torch.cat([Jw_T[:, :, :1], Jp_T], dim=-2)  # (B, 2, 6, 3): waist, then the arm
        Jr6 = torch.cat([Jw_T[:, :, 1:], Jr_T], dim=-2)
        wp = (m * a_pos * K)[..., None, None]  # (B, 2, 1, 1)
        wo = (m * a_ori * K_th)[..., None, None]
        M6 = wp * (Jp6 @ Jp6.transpose(-1, -2)) + wo * (Jr6 @ Jr6.transpose(-1, -2))  # (B, 2, 6, 6)
        y6 = (m * a_pos)[:, None] * (Jp6 @ F.unsqueeze(-1)).squeeze(-1) \
            + (m * a_ori)[:, None] * (Jr6 @ C.unsqueeze(-1)).squeeze(-1)  # (B, 2, 6)
        E = self.chain_sel  # (2, 11, 6)
        S = (E @ M6 @ E.transpose(-1, -2)).sum(dim=1) + w_post * torch.eye(11, device=F.device, dtype=F.dtype)
        y = (E @ y6.unsqueeze(-1)).squeeze(-1).sum(dim=1)  # (B, 11)
        x = _solve_spd(S, y)
        return torch.stack([x[:, 1:6], x[:, 6:11]], dim=1)

    def lagged(self, est: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The hands' estimate through the dynamics of their admittances: ``est`` (B, W, 12) the estimates of the
        newest ``W`` frames, oldest first, world axes; ``k`` (B, 2, 2) each hand's ``[K, K_theta]`` at the newest.

        ``lac_expert``'s hand admittance (LAC eqs. (7)-(10): ``xd_vir += dt (K (x_ref - x) - K_d xd + F - D xd_vir) /
        M``, ``x_vir = x + xd_vir dt``, ``K_d = 2 zeta sqrt(M K)``, ``xd`` the finite difference of ``x``), its IK
        reaching the virtual pose (the contact weight far above the posture's, ``robots/g1/lac_expert.yaml``: the
        posture's pull shapes the rest, :meth:`admittance_step`, not the way there), moves a hand as ``x_{t+1} = (2 -
        c - kappa) x_t - (1 - c) x_{t-1} + dt^2 / M F_t``, ``c = (K_d + D) dt / M``, ``kappa = K dt^2 / M``: an
        impulse of the force moves it by ``z1^(a+1) - z2^(a+1)`` (over ``z1 - z2``, ``z1, z2`` the recursion's roots,
        real for ``zeta >= 1``) ``a`` frames later. Each hand's force (couple: ``I``, ``K_theta``, ``D_omega``) is the
        estimates weighted by that response, renormalised over the window: a constant estimate passes unchanged, a
        step is followed as that model of the teacher follows it (within 0.01 of the step at K >= 100 N/m; its slow
        mode 0.70 s at 10, 0.18 s at 100) and reached ``W`` frames later at the latest (the window cuts the slow tail
        at the soft end). The model's limits: the teacher's IK reaches the virtual pose within a few per cent a tick
        in most directions, but along the arm's near-singular one (a lever of ~3 cm at the default posture) about a
        fifth a tick, so there the teacher is slower than this; the newest frame's stiffness is taken over the whole
        window (the teacher keeps its velocity state across a command change); the soft bound is applied to the
        result (:meth:`admittance_step`), where the teacher bounds the target each tick. Returns (B, 12) as
        ``est``'s rows.
        """
        b, n_w, _ = est.shape
        mass, inertia, zeta, d_lin, d_ang, dt = self.lag
        dev, typ = est.device, est.dtype
        k = torch.clamp(k, min=1.0)  # (B, 2 hands, 2 channels)
        m = torch.tensor([mass, inertia], device=dev, dtype=typ)
        c = (2.0 * zeta * torch.sqrt(m * k) + torch.tensor([d_lin, d_ang], device=dev, dtype=typ)) * dt / m
        tr = 2.0 - c - k * dt * dt / m  # z1 + z2
        det = 1.0 - c  # z1 z2
        root = torch.sqrt(torch.clamp(tr * tr - 4.0 * det, min=1e-8))  # over-damped: real roots
        z1, z2 = 0.5 * (tr + root), 0.5 * (tr - root)  # (B, 2, 2); z2 < 0 where c > 1 (the stiff end)
        n = torch.arange(n_w, 0, -1, device=dev, dtype=typ)  # a + 1, oldest first
        odd = torch.remainder(n, 2.0)

        def power(z: torch.Tensor) -> torch.Tensor:  # z^n for integer n, z of either sign (exportable)
            zz = z[..., None]
            return torch.exp(n * torch.log(torch.clamp(zz.abs(), min=1e-30))) * (1.0 - 2.0 * odd * (zz < 0).to(typ))

        w = power(z1) - power(z2)  # (B, 2, 2, W), a positive multiple of the response
        w = w / w.sum(dim=-1, keepdim=True)
        e = est.reshape(b, n_w, 2, 2, 3)  # (B, W, force | couple, hand, xyz)
        y = torch.einsum("bwchx,bhcw->bchx", e, w)
        return y.reshape(b, 12)

    def feedforward(self, frames: torch.Tensor, *, admittance: bool = False, lag: bool = False
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The teacher's static arm feed-forward at the newest frame and at the one before, with the estimate.

        ``lac_expert`` commands the arm joints the torque ``tau_ff = g_arm(q) - J_arm^T w_est`` (its step 4: the
        arm rows of ``g - J_e^T w_est``; the soles' Jacobians have no arm column), its label ``q_target + tau_ff /
        Kp``: here ``g_arm`` and the hands' Jacobians at the frame's arm angles, ``w_est`` the estimate of
        :meth:`forward` rotated back into the base frame. With ``admittance`` the returned torque also holds ``Kp dq``,
        ``dq`` the joint offset of the teacher's admittance displacement (:meth:`admittance_step`, with the frame's
        stiffness command): ``Kp`` times the label's whole offset from the reference, ``dq + tau_ff / Kp``. With
        ``lag`` too, ``dq`` is made of the estimate through the admittances' dynamics over the history (:meth:`lagged`)
        instead of the newest estimate: the teacher reaches its rest through that lag, and without it the offset's
        own PD torque is read back by the estimate at once (:meth:`admittance_step`).

        Args:
            frames: (B, H, frame_dim), ``H >= n_frames + 1`` (with ``lag``: the dynamics span the estimates of the
                newest ``H - n_frames`` frames).
            admittance: add ``Kp dq`` (above). lag: ``dq`` of the lagged estimate (needs ``admittance``).

        Returns:
            (the estimate of :meth:`forward` on ``frames`` (B, 12), ``tau_ff`` at the newest frame (B, 2, 5) [N m],
            ``tau_ff`` at the frame before, from the estimate over ``frames[:, :-1]`` (B, 2, 5) [N m]: what this
            method gave for the previous tick's history (but on the history's 64th frame, where the fill's last copy
            leaves and the warm-up's readings count as ramped in: within 0.1 % there; with ``lag`` the older frames'
            estimates too, whose readings may still be in the warm-up: up to a quarter of the offset at K = 10 N/m
            for a reading that did not change, 0.026 rad at most, median 0, over 60 training episodes of the
            pooled stage, 2026-12-07), 0 at an episode's first frame (every frame the fill: no action was in force
            before)); the arm joints in chain order (``act_col`` maps them to the action).

        Raises:
            ValueError: a history shorter than ``n_frames + 1`` (``n_frames + 2`` with ``lag``); ``lag`` without
                ``admittance``.
        """
        if lag and not admittance:
            raise ValueError("ArmStatics.feedforward: lag acts on the admittance's offset, give admittance=True")
        b, h, d = frames.shape
        n = h if lag else self.n_frames + 1  # frames whose readings are needed
        self._check_history(h, self.n_frames + (2 if lag else 1))
        wr, g_arm, Jp_T, Jr_T, Rw, Jw_T = (t.reshape(b, n, *t.shape[1:]) for t in
                                           self._statics(frames[:, h - n:].reshape(b * n, d)))
        if lag:
            seq = self._estimate(wr, frames, h - self.n_frames + 1)  # (B, E, 12): the estimate at each of E ends
            est, est_prev = seq[:, -1], seq[:, -2]
        else:
            est = self._estimate(wr[:, 1:], frames)
            est_prev = self._estimate(wr[:, :-1], frames[:, :-1])

        def stiffness(k: int) -> torch.Tensor:
            return torch.einsum("bd,dac->bac", frames[:, h - n + k], self.k_W)

        def in_base(e: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:  # (B, 12) world -> F, C (B, 2, 3)
            RT = Rw[:, k].transpose(-1, -2)  # (B, 1, 3, 3): world -> base
            return (RT @ e[:, :6].reshape(b, 2, 3, 1)).squeeze(-1), (RT @ e[:, 6:].reshape(b, 2, 3, 1)).squeeze(-1)

        def tau(e: torch.Tensor, e_adm: torch.Tensor, k: int) -> torch.Tensor:
            F, C = in_base(e, k)
            t = g_arm[:, k] - (Jp_T[:, k] @ F.unsqueeze(-1)).squeeze(-1) - (Jr_T[:, k] @ C.unsqueeze(-1)).squeeze(-1)
            if admittance:
                if e_adm is not e:
                    F, C = in_base(e_adm, k)
                t = t + self.kp * self.admittance_step(F, C, stiffness(k), Jp_T[:, k], Jr_T[:, k], Jw_T[:, k])
            return t

        if lag:
            adm, adm_prev = self.lagged(seq[:, 1:], stiffness(n - 1)), self.lagged(seq[:, :-1], stiffness(n - 2))
        else:
            adm, adm_prev = est, est_prev
        fresh = (frames == frames[:, -1:]).all(dim=-1).to(frames.dtype).amin(dim=1)  # (B,) 1: an episode's first frame
        return est, tau(est, adm, n - 1), tau(est_prev, adm_prev, n - 2) * (1.0 - fresh)[:, None, None]
