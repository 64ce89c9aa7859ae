"""LAC augmentation benchmark: accepted episodes / min / core, and the IK step against mink.

Run: ``python benchmarks/bench_lac.py [--episodes 6] [--seed 0] [--no-mink]`` (about 1-2 min on one
core). Everything is measured in one run:

1. Algorithm 1 on ``--episodes`` synthetic contact frames (Table II config, T = 500): accepted
   episodes per minute on one core, rollouts per accepted episode, counts.
2. IK step time: the recorded admittance targets of every accepted episode are replayed through
   (a) this project's eq. (11) QP (pinocchio + quadprog) and (b) the same IK written with mink 1.3
   on the G1 MuJoCo model (FrameTask on link-CoM sites with the same weights, pelvis FrameTask,
   PostureTask on the upper body, DofFreezingTask for legs and base roll/pitch, ConfigurationLimit
   at 0.95 of the range, FreeJointVelocityLimit for the base rate caps, quadprog), each starting
   from the same state and closing its own loop on the same targets. Reported: mean / p95 step
   time and the ratio mink / ours, and the mean link-CoM difference between the two one-step
   solutions from the same state (mink's FrameTask error is the SE(3) log in the frame, ours the
   world position and SO(3) log, so they differ slightly).
   mink has no base-height bound here (the episodes stay inside [0.56, 0.78] m).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import pinocchio as pin

from contactflow.lac.config import LacConfig
from contactflow.lac.contact_frames import sample_synthetic_frame
from contactflow.lac.ik import LinkTarget
from contactflow.lac.model import LacRobot
from contactflow.lac.synthesis import SynthesisStats, Synthesizer


def replay_targets(syn: Synthesizer, ep):
    """Re-run the accepted rollout, recording per-frame (q, targets, weights) for the IK replays."""
    rec = []
    orig = syn.ik.step

    def spy(q, targets, q_upper_ref, p_base_ref, R_base_ref, *, updated=False):
        rec.append((q.copy(), [LinkTarget(t.link, t.x_W.copy(), t.R_W.copy(), t.weight) for t in targets],
                    q_upper_ref.copy(), p_base_ref.copy()))
        return orig(q, targets, q_upper_ref, p_base_ref, R_base_ref, updated=updated)

    syn.ik.step = spy
    try:
        syn.rollout(ep.sample, ep.scale, stop_early=False)
    finally:
        syn.ik.step = orig
    return rec


class MinkIK:
    """The eq. (11) IK written with mink on the G1 MuJoCo model."""

    def __init__(self, lac: LacRobot, cfg: LacConfig):
        import mink
        import mujoco

        from contactflow.sim.g1_mujoco import build_g1_model

        self.mink = mink
        def hook(spec):
            # link-CoM sites and 0.95 of the joint ranges
            for i, name in enumerate(lac.link_names):
                spec.body(name).add_site(name=f"com_{name}", pos=lac.link_com_local[i])
            for j in spec.joints:
                if j.type == mujoco.mjtJoint.mjJNT_HINGE:
                    mid = 0.5 * (j.range[0] + j.range[1])
                    half = 0.5 * (j.range[1] - j.range[0]) * cfg.ik.joint_range_scale
                    j.range = [mid - half, mid + half]

        self.model = build_g1_model(lac.robot, spec_hook=hook).model
        self.cfg = cfg
        self.lac = lac
        self.conf = mink.Configuration(self.model)
        ik = cfg.ik
        # mink's costs multiply the residual (the QP weight is cost^2): cost = sqrt(w) gives eq. (11)
        self.link_tasks = [mink.FrameTask(f"com_{n}", "site", position_cost=1.0, orientation_cost=1.0)
                           for n in lac.link_names]
        self.base_task = mink.FrameTask("pelvis", "body", position_cost=np.sqrt(ik.w_base_pos),
                                        orientation_cost=np.sqrt(ik.w_base_ori))
        post = np.zeros(self.model.nv)
        post[lac.upper_v] = np.sqrt(ik.w_posture)
        self.posture = mink.PostureTask(self.model, cost=post)
        self.freeze = mink.DofFreezingTask(self.model, dof_indices=[3, 4] + list(lac.leg_v))
        self.limits = [
            mink.ConfigurationLimit(self.model, gain=1.0),
            mink.FreeJointVelocityLimit(self.model, max_linear_velocity=[ik.base_vel_xy_max_m_s, ik.base_vel_xy_max_m_s,
                                                                        ik.base_vel_z_max_m_s],
                                        max_angular_velocity=[1e3, 1e3, ik.base_yaw_rate_max_rad_s]),
        ]

    def step(self, q_pin, targets, q_upper_ref, p_base_ref, dt):
        mink = self.mink
        from contactflow.sim.state import pin_to_mj_qpos

        t0 = time.perf_counter()
        self.conf.update(pin_to_mj_qpos(q_pin))
        tasks = [self.base_task, self.posture]
        self.base_task.set_target(mink.SE3.from_rotation_and_translation(mink.SO3.identity(), p_base_ref))
        qp = self.conf.q.copy()
        qp[7:][self.lac.upper_v - 6] = q_upper_ref
        self.posture.set_target(qp)
        for t in targets:
            if t.weight <= 0:
                continue
            task = self.link_tasks[t.link]
            task.set_position_cost(np.sqrt(self.cfg.ik.w_contact_pos * t.weight))
            task.set_orientation_cost(np.sqrt(self.cfg.ik.w_contact_ori * t.weight))
            quat = pin.Quaternion(t.R_W)
            task.set_target(mink.SE3(np.array([quat.w, quat.x, quat.y, quat.z, *t.x_W])))
            tasks.append(task)
        v = mink.solve_ik(self.conf, tasks, dt, "quadprog", damping=self.cfg.ik.damping, limits=self.limits,
                          constraints=[self.freeze])
        self.conf.integrate_inplace(v, dt)
        el = time.perf_counter() - t0
        qm = self.conf.q
        q_new = np.concatenate([qm[0:3], qm[4:7], qm[3:4], qm[7:]])
        return q_new, el


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-mink", action="store_true")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    cfg = LacConfig()
    lac = LacRobot()
    syn = Synthesizer(cfg, lac)
    st = SynthesisStats()
    eps = []
    t0 = time.perf_counter()
    c0 = time.process_time()
    for k in range(args.episodes):
        rng = np.random.default_rng(np.random.SeedSequence([args.seed, k]))
        ep = syn.synthesize(sample_synthetic_frame(lac, rng), rng, st)
        if ep is not None:
            eps.append(ep)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    acc = st.accepted + st.decayed
    res = {
        "contact_frames": args.episodes,
        "counts": st.as_dict(),
        "wall_s": wall,
        "cpu_s": cpu,
        "accepted_per_min_per_core_wall": acc / (wall / 60.0),
        "accepted_per_min_per_core_cpu": acc / (cpu / 60.0),
        "rollouts_per_accepted": st.rollouts / max(acc, 1),
    }
    # IK replays on the same targets
    ours, theirs, diff = [], [], []
    mk = None
    if not args.no_mink:
        try:
            mk = MinkIK(lac, cfg)
        except ImportError:
            print("mink not installed: skipping the mink comparison", file=sys.stderr)
    for ep in eps:
        rec = replay_targets(syn, ep)
        for q, targets, q_u, p_b in rec:
            r = syn.ik.step(q, targets, q_u, p_b, np.eye(3))
            ours.append(r.solve_time_s)
            if mk is not None:
                q_m, el = mk.step(q, targets, q_u, p_b, cfg.profile.dt_s)
                theirs.append(el)
                if targets and any(t.weight > 0 for t in targets):
                    i = targets[0].link
                    lac.update(r.q)
                    xa = lac.link_pose(i)[0]
                    lac.update(q_m)
                    xb = lac.link_pose(i)[0]
                    diff.append(np.linalg.norm(xa - xb))
    ours = np.array(ours)
    res["ik_steps"] = int(len(ours))
    res["ik_ours_mean_ms"] = 1e3 * float(ours.mean()) if len(ours) else None
    res["ik_ours_p95_ms"] = 1e3 * float(np.percentile(ours, 95)) if len(ours) else None
    if theirs:
        theirs = np.array(theirs)
        res["ik_mink_mean_ms"] = 1e3 * float(theirs.mean())
        res["ik_mink_p95_ms"] = 1e3 * float(np.percentile(theirs, 95))
        res["ik_ratio_mink_over_ours"] = float(theirs.mean() / ours.mean())
        res["link_com_diff_mean_mm"] = 1e3 * float(np.mean(diff)) if diff else None
        res["link_com_diff_max_mm"] = 1e3 * float(np.max(diff)) if diff else None
    print(json.dumps(res, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
