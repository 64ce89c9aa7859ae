"""LAC compliant response synthesis (LAC §III-B, Algorithm 1).

``Synthesizer(cfg, lac)`` turns a contact frame into an augmented episode:

* :meth:`Synthesizer.rollout` runs the T-frame loop for one sampled restart at a given wrench
  scale: external wrench (eqs. (2)-(3)), passive-chain virtual torque (eqs. (4)-(6)), virtual
  admittance (eqs. (7)-(10)) and whole-body IK (eq. (11)); it records the trajectory and the gate
  signals.
* :meth:`Synthesizer.gate` applies the feasibility check: weak floor, sum caps, self-collision,
  impedance/external balance.
* :meth:`Synthesizer.synthesize` is Algorithm 1: up to N_iter restarts, each with up to N_decay
  decay retries; a failed gate scales every active wrench by its decay factor (rho_1 balance,
  rho_2 self-collision, rho_3 sum caps); a restart is abandoned when the summed peak wrench falls
  below the weak floor (or the retries run out).

Which decay factor applies when several gates fail is not specified by the paper; here: the weak
floor and the sum caps (which depend on the wrench only) are checked before the T-frame loop; in
the loop, the gate that is known to fail first in time decides (a self-collision at frame t, or
the running balance residual exceeding the whole-event budget, i.e. tolerance x event frames),
and the loop stops there.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pinocchio as pin

from contactflow.lac.config import LacConfig
from contactflow.lac.contact_frames import ContactFrame
from contactflow.lac.events import EpisodeSample, couple_bin, force_bin, sample_episode
from contactflow.lac.ik import LinkTarget, WholeBodyIK
from contactflow.lac.model import UPPER_GROUPS, LacRobot
from contactflow.sim.state import base_rotation

__all__ = [
    "Rollout",
    "GateResult",
    "Episode",
    "SynthesisStats",
    "Synthesizer",
    "VirtualAdmittance",
]

log = logging.getLogger(__name__)


class VirtualAdmittance:
    """Second-order virtual system at one link's CoM (LAC eqs. (7)-(10)).

    f_imp = K e_x - K_d xdot, tau_imp = K_th e_R - K_dth omega (eq. (7)), with
    K_d = 2 zeta sqrt(M K), K_dth = 2 zeta sqrt(I K_th);
    M xdd_vir = f_imp + f_ext - D xd_vir (8); I wd_vir = tau_imp + tau_vir - D_w w_vir (9);
    one explicit Euler step, then x_vir = x + xd_vir dt, R_vir = Exp(w_vir dt) R (10).
    Everything in world axes.

    Args:
        cfg: LacConfig (admittance parameters). k_lin: K [N/m]. k_ang: K_theta [N m/rad] (None:
            no angular channel, the orientation target stays at the reference).
        dt: step [s].
    """

    def __init__(self, cfg: LacConfig, k_lin: float, k_ang: float | None, dt: float):
        a = cfg.admittance
        self.M, self.I = a.mass_kg, a.inertia_kgm2
        self.D, self.Dw = a.damping_lin_ns_per_m, a.damping_ang_nms_per_rad
        self.K = k_lin
        self.Kth = k_ang
        self.Kd = 2 * a.damping_ratio * np.sqrt(self.M * k_lin)
        self.Kdth = 2 * a.damping_ratio * np.sqrt(self.I * k_ang) if k_ang is not None else 0.0
        self.dt = dt
        self.xd_vir = np.zeros(3)
        self.w_vir = np.zeros(3)

    def step(self, x, R, xd, w, x_ref, R_ref, f_ext, tau_vir):
        """Advance one frame.

        Args:
            x: (3,) solved CoM [m]. R: (3, 3) solved orientation. xd: (3,) CoM velocity [m/s].
            w: (3,) angular velocity [rad/s]. x_ref, R_ref: reference pose (eq. (1)).
            f_ext: (3,) external force [N]. tau_vir: (3,) virtual torque [N m].

        Returns:
            (x_vir (3,), R_vir (3, 3), f_imp (3,), tau_imp (3,)); R_vir = R_ref without angular channel.
        """
        dt = self.dt
        f_imp = self.K * (x_ref - x) - self.Kd * xd
        self.xd_vir = self.xd_vir + dt * (f_imp + f_ext - self.D * self.xd_vir) / self.M
        x_vir = x + self.xd_vir * dt
        if self.Kth is None:
            return x_vir, R_ref, f_imp, np.zeros(3)
        e_R = pin.log3(R_ref @ R.T)
        tau_imp = self.Kth * e_R - self.Kdth * w
        self.w_vir = self.w_vir + dt * (tau_imp + tau_vir - self.Dw * self.w_vir) / self.I
        R_vir = pin.exp3(self.w_vir * dt) @ R
        return x_vir, R_vir, f_imp, tau_imp


@dataclasses.dataclass
class Rollout:
    """Trajectory and gate signals of one T-frame loop (arrays float64; T frames).

    Attributes:
        scale: wrench scale of this rollout (product of the decay factors applied).
        q: (T, 30) solved configurations (after the IK step of each frame).
        q_upper: (T, 11) q_aug [rad].
        base_vel_B: (T, 3) base (v_x, v_y) [m/s] and yaw rate [rad/s], base frame.
        base_height: (T,) h_aug [m].
        f_ext_B: (T, 11, 3) external force per link, base frame [N].
        tau_ext_B: (T, 11, 3) external couple per link, base frame [N m].
        f_imp_W, tau_imp_W, tau_vir_W, f_ext_W: (T, 11, 3) world-frame admittance signals.
        x_W: (T, 11, 3) link CoM positions [m]. R_W: (T, 11, 3, 3) link orientations.
        x_ref_W: (11, 3), R_ref_W: (11, 3, 3) reference link poses (eq. (1)).
        dtheta_W: (T, 11, 3) passive rotation Delta theta_j (eq. (5)) [rad].
        profile: (T,) Pi(t).
        min_distance: (T,) smallest capsule distance [m] (NaN after an early stop).
        collided: True when a self-collision occurred. frames_run: frames computed.
        balance_exceeded: True when the running balance residual exceeded the event budget
            (the loop stopped there).
        qp_failures: IK QP failures. ik_time_s: (T,) IK time per frame [s].
    """

    scale: float
    q: np.ndarray
    q_upper: np.ndarray
    base_vel_B: np.ndarray
    base_height: np.ndarray
    f_ext_B: np.ndarray
    tau_ext_B: np.ndarray
    f_imp_W: np.ndarray
    tau_imp_W: np.ndarray
    tau_vir_W: np.ndarray
    f_ext_W: np.ndarray
    x_W: np.ndarray
    R_W: np.ndarray
    x_ref_W: np.ndarray
    R_ref_W: np.ndarray
    dtheta_W: np.ndarray
    profile: np.ndarray
    min_distance: np.ndarray
    collided: bool
    frames_run: int
    balance_exceeded: bool
    qp_failures: int
    ik_time_s: np.ndarray


@dataclasses.dataclass(frozen=True)
class GateResult:
    """Feasibility verdict.

    Attributes:
        passed: all gates passed.
        weak: the summed peak wrench is below the weak floor (abandon the restart).
        failed: name of the first failing gate (``"sum_cap"``, ``"self_collision"``, ``"balance"``) or "".
        decay: decay factor to apply (1 when passed or weak).
        balance_force_n: worst link's mean | |f_imp| - |f_ext| | [N].
        balance_torque_nm: worst link's mean | |tau_imp| - |tau_vir| | [N m].
        peak_sum: summed peak wrench after scaling [N] or [N m].
    """

    passed: bool
    weak: bool
    failed: str
    decay: float
    balance_force_n: float = 0.0
    balance_torque_nm: float = 0.0
    peak_sum: float = 0.0


@dataclasses.dataclass(frozen=True)
class Episode:
    """An accepted augmented episode (Algorithm 1 output).

    Attributes:
        sample: what was sampled for the accepted restart.
        rollout: its trajectory at the accepted scale.
        scale: accepted wrench scale (1 = not decayed).
        decays: number of decay retries before acceptance.
        restart: restart index (0-based) that was accepted.
        peak_sum: summed peak magnitude after scaling [N] or [N m].
        curriculum_bin: Fig. 2 bin (force 0..10, couple 0..7).
    """

    sample: EpisodeSample
    rollout: Rollout
    scale: float
    decays: int
    restart: int
    peak_sum: float
    curriculum_bin: int


@dataclasses.dataclass
class SynthesisStats:
    """Counts of one or many :meth:`Synthesizer.synthesize` calls.

    Attributes:
        frames: contact frames processed. accepted: accepted at full scale. decayed: accepted after
        >= 1 decay. failed: contact frames for which all restarts failed (Algorithm 1 returns None).
        restarts_weak: restarts abandoned below the weak floor. restarts_exhausted: restarts that
        used all N_decay retries. rollouts: T-frame loops run. decays_by_gate: decays per gate name.
    """

    frames: int = 0
    accepted: int = 0
    decayed: int = 0
    failed: int = 0
    restarts_weak: int = 0
    restarts_exhausted: int = 0
    rollouts: int = 0
    decays_by_gate: dict = dataclasses.field(default_factory=lambda: {"sum_cap": 0, "self_collision": 0, "balance": 0})

    def add(self, other: "SynthesisStats") -> None:
        for f in ("frames", "accepted", "decayed", "failed", "restarts_weak", "restarts_exhausted", "rollouts"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        for k, v in other.decays_by_gate.items():
            self.decays_by_gate[k] = self.decays_by_gate.get(k, 0) + v

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class Synthesizer:
    """LAC Algorithm 1 on the G1.

    Args:
        cfg: LacConfig.
        lac: the robot (``LacRobot()`` when None).
    """

    def __init__(self, cfg: LacConfig, lac: LacRobot | None = None):
        self.cfg = cfg
        self.lac = lac if lac is not None else LacRobot()
        self.dt = cfg.profile.dt_s
        self.ik = WholeBodyIK(cfg.ik, self.lac, self.dt, cfg.events.base_height_m)
        a = cfg.admittance
        lam = np.full(11, a.joint_stiffness_arm_nm_per_rad)
        lam[[i for i, g in enumerate(self.lac.link_groups) if g == "torso"]] = a.joint_stiffness_waist_nm_per_rad
        # Lambda_q per upper-body joint, in upper_v order (joint i moves link i)
        self.lambda_q = lam

    # ------------------------------------------------------------------ passive chain
    def passive_rotation(self, q_ref: np.ndarray, links, f_W, p_app_W, tau_W) -> np.ndarray:
        """Passive rotation Delta theta_j of LAC eqs. (4)-(5).

        tau_u = sum_j (Jp_j^T f_j + Jr_j^T tau_j) on the upper-body joints with the Jacobians of
        the working data (the previous frame's solved configuration, ``lac.update`` called),
        Delta q_u = Lambda_q^-1 tau_u, and Delta theta_j = Log(R_j^Delta R_j^ref^T) with R^Delta the
        link orientation at the reference base and posture deflected by Delta q_u.

        Args:
            q_ref: (30,) reference configuration (eq. (1)).
            links: loaded link indices.
            f_W: (k, 3) forces [N]; p_app_W: (k, 3) application points [m]; tau_W: (k, 3) couples [N m].

        Returns:
            (k, 3) Delta theta per link, world frame [rad].
        """
        lac = self.lac
        tau_u = np.zeros(11)
        for n, i in enumerate(links):
            Jp, Jr = lac.link_jacobians(i, p_app_W[n])
            tau_u += Jp[:, lac.upper_v].T @ f_W[n] + Jr[:, lac.upper_v].T @ tau_W[n]
        if not np.any(tau_u):
            return np.zeros((len(links), 3))
        dq_u = tau_u / self.lambda_q
        q_def = q_ref.copy()
        q_def[lac.upper_q] += dq_u
        R_def = lac.link_orientations_at(q_def, links)
        R_ref = lac.link_orientations_at(q_ref, links)
        return np.array([pin.log3(Rd @ Rr.T) for Rd, Rr in zip(R_def, R_ref)])

    # ------------------------------------------------------------------ the T-frame loop
    def rollout(self, sample: EpisodeSample, scale: float = 1.0, *, stop_early: bool = True) -> Rollout:
        """Run the T-frame loop of Algorithm 1 for ``sample`` with every wrench scaled by ``scale``.

        Args:
            sample: the sampled restart.
            scale: wrench scale (decay product).
            stop_early: stop at the first frame where a gate is known to fail: a self-collision,
                or a running balance residual already above the whole-event budget (tolerance x
                number of event frames). The gate that trips first in time decides the decay.

        Returns:
            Rollout.
        """
        cfg, lac, dt = self.cfg, self.lac, self.dt
        T = sample.profile.frames
        links = list(sample.links)
        frame = sample.frame
        k5 = sample.stiffness
        prof = sample.profile.values()
        q_ref = lac.reference_configuration(frame.q_ref, sample.base_height)
        p_b_ref = q_ref[0:3].copy()
        R_b_ref = np.eye(3)
        ref_poses = lac.link_poses_at(q_ref, range(11))
        x_ref = np.array([p for p, _ in ref_poses])
        R_ref = np.array([R for _, R in ref_poses])
        adm = {}
        for i in links:
            gl, ga = UPPER_GROUPS[lac.link_groups[i]]
            adm[i] = VirtualAdmittance(cfg, float(k5[gl]), None if ga is None else float(k5[ga]), dt)
        kappa = cfg.admittance.kappa_nm_per_rad
        F = sample.force_peak_W * scale
        C = sample.couple_peak_W * scale

        z3 = lambda: np.zeros((T, 11, 3))  # noqa: E731
        out = Rollout(
            scale=scale,
            q=np.zeros((T, lac.model.nq)),
            q_upper=np.zeros((T, 11)),
            base_vel_B=np.zeros((T, 3)),
            base_height=np.zeros(T),
            f_ext_B=z3(),
            tau_ext_B=z3(),
            f_imp_W=z3(),
            tau_imp_W=z3(),
            tau_vir_W=z3(),
            f_ext_W=z3(),
            x_W=z3(),
            R_W=np.zeros((T, 11, 3, 3)),
            x_ref_W=x_ref,
            R_ref_W=R_ref,
            dtheta_W=z3(),
            profile=prof,
            min_distance=np.full(T, np.nan),
            collided=False,
            frames_run=0,
            balance_exceeded=False,
            qp_failures=0,
            ik_time_s=np.zeros(T),
        )
        q = q_ref.copy()
        lac.update(q)
        prev = {i: lac.link_pose(i) for i in links}
        margin = cfg.gates.self_collision_margin_m
        n_on = int(np.count_nonzero(prof > 0.0))
        budget_f = cfg.gates.balance_force_tol_n * n_on
        budget_t = cfg.gates.balance_torque_tol_nm * n_on
        acc_f = dict.fromkeys(links, 0.0)
        acc_t = dict.fromkeys(links, 0.0)
        t_start = int(np.argmax(prof > 0.0)) if n_on else T
        d0 = lac.min_collision_distance()[0]
        for t in range(T):
            pi = prof[t]
            if t < t_start:
                # before the event nothing drives the robot: the IK at the reference returns
                # dq = 0 exactly, so the frame is the reference state.
                out.q[t] = q
                out.q_upper[t] = q[lac.upper_q]
                out.base_height[t] = q[2]
                for i in links:
                    out.x_W[t, i], out.R_W[t, i] = prev[i]
                out.min_distance[t] = d0
                out.frames_run = t + 1
                continue
            # current solved poses and velocities (lac.data is at q)
            cur = {i: lac.link_pose(i) for i in links}
            f_now = np.array([pi * F[i] for i in links])
            c_now = np.array([pi * C[i] for i in links])
            p_app = np.array([lac.point_world(i, frame.points[i]) for i in links])
            dtheta = self.passive_rotation(q_ref, links, f_now, p_app, c_now)
            targets = []
            for n, i in enumerate(links):
                x, R = cur[i]
                xd = (x - prev[i][0]) / dt
                w = pin.log3(R @ prev[i][1].T) / dt
                tau_vir = kappa * dtheta[n]
                x_vir, R_vir, f_imp, tau_imp = adm[i].step(x, R, xd, w, x_ref[i], R_ref[i], f_now[n], tau_vir)
                targets.append(LinkTarget(i, x_vir, R_vir, float(frame.mask[i]) * pi))
                out.f_imp_W[t, i] = f_imp
                out.tau_imp_W[t, i] = tau_imp
                out.tau_vir_W[t, i] = tau_vir if adm[i].Kth is not None else 0.0
                out.f_ext_W[t, i] = f_now[n]
                out.dtheta_W[t, i] = dtheta[n]
            prev = cur
            res = self.ik.step(q, targets, frame.q_ref, p_b_ref, R_b_ref, updated=True)
            for _ in range(cfg.ik.iterations - 1):
                res = self.ik.step(res.q, targets, frame.q_ref, p_b_ref, R_b_ref)
            out.ik_time_s[t] = res.solve_time_s
            if not res.qp.found:
                out.qp_failures += 1
            q_new = res.q
            R_b = base_rotation(q_new)
            # base twist over the frame: world displacement rotated into the new base frame
            v_W = (q_new[0:3] - q[0:3]) / dt
            v_B = R_b.T @ v_W
            yaw_rate = pin.log3(R_b @ base_rotation(q).T)[2] / dt
            q = q_new
            lac.update(q)
            out.q[t] = q
            out.q_upper[t] = q[lac.upper_q]
            out.base_vel_B[t] = (v_B[0], v_B[1], yaw_rate)
            out.base_height[t] = q[2]
            for n, i in enumerate(links):
                out.f_ext_B[t, i] = R_b.T @ f_now[n]
                out.tau_ext_B[t, i] = R_b.T @ c_now[n]
            for i in links:
                out.x_W[t, i], out.R_W[t, i] = lac.link_pose(i)
            d, _ = lac.min_collision_distance()
            out.min_distance[t] = d
            out.frames_run = t + 1
            if d < margin:
                out.collided = True
                if stop_early:
                    break
            if stop_early and pi > 0.0:
                # balance budget: the mean over the n_on event frames exceeds the tolerance as
                # soon as the running sum does, so the gate's verdict is known now.
                for i in links:
                    acc_f[i] += abs(np.linalg.norm(out.f_imp_W[t, i]) - np.linalg.norm(out.f_ext_W[t, i]))
                    acc_t[i] += abs(np.linalg.norm(out.tau_imp_W[t, i]) - np.linalg.norm(out.tau_vir_W[t, i]))
                    if acc_f[i] > budget_f or (lac.link_groups[i] != "torso" and acc_t[i] > budget_t):
                        out.balance_exceeded = True
                if out.balance_exceeded:
                    break
        return out

    # ------------------------------------------------------------------ gates
    def gate(self, sample: EpisodeSample, scale: float, rollout: Rollout | None) -> GateResult:
        """Feasibility check of LAC §III-B for ``sample`` at ``scale``.

        Args:
            sample: the restart. scale: wrench scale. rollout: its loop (may be None when the weak
                floor or a sum cap already decides).

        Returns:
            GateResult.
        """
        g = self.cfg.gates
        force = sample.event_type == "force"
        peak = sample.peak_sum(scale)
        floor = g.weak_floor_force_n if force else g.weak_floor_couple_nm
        if peak < floor:
            return GateResult(False, True, "", 1.0, peak_sum=peak)
        cap = g.sum_cap_force_n if force else g.sum_cap_couple_nm
        if peak > cap:
            return GateResult(False, False, "sum_cap", g.decay_sum_cap, peak_sum=peak)
        if rollout is None:
            raise ValueError("gate: a rollout is needed beyond the weak floor and sum caps")
        if rollout.collided:
            return GateResult(False, False, "self_collision", g.decay_self_collision, peak_sum=peak)
        if rollout.balance_exceeded:
            return GateResult(False, False, "balance", g.decay_balance, float("nan"), float("nan"), peak)
        on = rollout.profile > 0.0
        bf = bt = 0.0
        for i in sample.links:
            fi = np.abs(np.linalg.norm(rollout.f_imp_W[on, i], axis=1) - np.linalg.norm(rollout.f_ext_W[on, i], axis=1))
            bf = max(bf, float(fi.mean()) if fi.size else 0.0)
            if self.lac.link_groups[i] != "torso":
                ti = np.abs(
                    np.linalg.norm(rollout.tau_imp_W[on, i], axis=1) - np.linalg.norm(rollout.tau_vir_W[on, i], axis=1)
                )
                bt = max(bt, float(ti.mean()) if ti.size else 0.0)
        if bf > g.balance_force_tol_n or bt > g.balance_torque_tol_nm:
            return GateResult(False, False, "balance", g.decay_balance, bf, bt, peak)
        return GateResult(True, False, "", 1.0, bf, bt, peak)

    # ------------------------------------------------------------------ Algorithm 1
    def synthesize(
        self,
        frame: ContactFrame,
        rng: np.random.Generator,
        stats: SynthesisStats | None = None,
        *,
        event_type: str | None = None,
        stiffness: np.ndarray | None = None,
    ) -> Episode | None:
        """Algorithm 1 for one contact frame.

        Args:
            frame: contact frame e.
            rng: random generator (the only source of randomness).
            stats: counts to update (optional).
            event_type, stiffness: fix the event type / 5-D stiffness instead of sampling (tests).

        Returns:
            the accepted Episode, or None when every restart failed.
        """
        g = self.cfg.gates
        st = stats if stats is not None else SynthesisStats()
        st.frames += 1
        for it in range(g.n_iter):
            sample = sample_episode(self.lac, self.cfg, frame, rng, event_type=event_type, stiffness=stiffness)
            ep = self.decay_loop(sample, it, st)
            if ep is not None:
                return ep
        st.failed += 1
        return None

    def decay_loop(
        self, sample: EpisodeSample, restart: int = 0, stats: SynthesisStats | None = None, trace: list | None = None
    ) -> Episode | None:
        """The inner loop of Algorithm 1 for one sampled restart.

        Args:
            sample: the restart's sample. restart: its index (recorded in the Episode).
            stats: counts to update. trace: if a list, ``(scale, GateResult)`` of every try is appended.

        Returns:
            the accepted Episode, or None when abandoned (weak floor or N_decay retries used).
        """
        g = self.cfg.gates
        st = stats if stats is not None else SynthesisStats()
        scale = 1.0
        for dec in range(g.n_decay):
            ro = None
            if self._decided_early(sample, scale):
                res = self.gate(sample, scale, None)
            else:
                ro = self.rollout(sample, scale)
                st.rollouts += 1
                res = self.gate(sample, scale, ro)
            if trace is not None:
                trace.append((scale, res))
            if res.weak:
                st.restarts_weak += 1
                return None
            if res.passed:
                if dec == 0:
                    st.accepted += 1
                else:
                    st.decayed += 1
                peak = sample.peak_sum(scale)
                b = force_bin(peak) if sample.event_type == "force" else couple_bin(peak)
                return Episode(sample, ro, scale, dec, restart, peak, b)
            st.decays_by_gate[res.failed] = st.decays_by_gate.get(res.failed, 0) + 1
            scale *= res.decay
        st.restarts_exhausted += 1
        return None

    def _decided_early(self, sample: EpisodeSample, scale: float) -> bool:
        g = self.cfg.gates
        force = sample.event_type == "force"
        peak = sample.peak_sum(scale)
        floor = g.weak_floor_force_n if force else g.weak_floor_couple_nm
        cap = g.sum_cap_force_n if force else g.sum_cap_couple_nm
        return peak < floor or peak > cap
