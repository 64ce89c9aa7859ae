"""Configuration of ``contactflow lac train`` (``robots/g1/lac_train.yaml``): one dataclass per part.

Every hyper-parameter of the training lives here and in the shipped YAML; the loader rejects an
unknown key or an out-of-range value with the file and the key path (:class:`ConfigError`).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Mapping

from contactflow.config import load_config, merge, read_layered, to_dict
from contactflow.errors import ConfigError

__all__ = ["EnvCfg", "ProbeCfg", "RandomizationCfg", "StudentCfg", "OptimCfg", "DaggerCfg", "ValidationCfg", "TrainConfig", "load_train_config",
           "default_train_config_path"]


def _range(name: str, r, lo: float = float("-inf")) -> None:
    if len(r) != 2 or not lo <= r[0] <= r[1]:
        raise ConfigError(f"{name}: expected [low, high] with {lo:g} <= low <= high, got {list(r)}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RandomizationCfg:
    """Domain randomisation of one training episode (drawn at reset from the episode's RNG).

    Attributes:
        friction_scale: U(low, high) factor on the sliding friction of the soles and the floor [-].
        mass_scale: U(low, high) factor on the mass (and inertia) of each body of ``mass_bodies`` [-].
        mass_bodies: MuJoCo bodies whose mass is randomised.
        start_at_reference_prob: probability that the episode starts with the upper body at the
            commanded posture ``q_ref`` (else at the default posture, so the arms move to ``q_ref``).
        joint_noise_rad: std of the Gaussian noise added to the initial joint angles [rad]
            (clipped to the joint limits; the base is lowered onto the floor).
        force_direction_jitter_deg: each event's force and couple direction is rotated by an angle
            U(0, this) about a random axis [deg].
    """

    friction_scale: tuple[float, float] = (0.7, 1.3)
    mass_scale: tuple[float, float] = (0.95, 1.05)
    mass_bodies: tuple[str, ...] = ("pelvis", "torso_link")
    start_at_reference_prob: float = 0.5
    joint_noise_rad: float = 0.02
    force_direction_jitter_deg: float = 10.0

    def __post_init__(self):
        _range("friction_scale", self.friction_scale, 0.0)
        _range("mass_scale", self.mass_scale, 0.0)
        if not 0 <= self.start_at_reference_prob <= 1:
            raise ConfigError(f"start_at_reference_prob: must be in [0, 1], got {self.start_at_reference_prob!r}")
        for n in ("joint_noise_rad", "force_direction_jitter_deg"):
            if not getattr(self, n) >= 0:
                raise ConfigError(f"{n}: must be >= 0, got {getattr(self, n)!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProbeCfg:
    """Compliance-probe episodes (``EnvCfg.probe_prob``): the robot stands still, one held load.

    LAC's evaluation (Figs. 3, 4, 6) holds one load on one link while the commanded posture is still
    and one stiffness channel is swept, the others at the teleop's default; the dataset's episodes
    mix several loads on a moving reference at the row's 5-D stiffness. A probe episode replaces the
    row by that kind of experiment, drawn at random (not the evaluation's grid): the command is the
    teleop's default (base height, waist, arms) with the loaded arm's shoulder pitch and roll drawn
    anew with probability ``posture_prob`` and both elbows with probability ``elbow_prob``; the
    stiffness is the teleop's default with the loaded link's channels (its group's K_lin; for a hand
    also its K_theta) drawn log-uniform over LAC's ranges, and with probability ``all_stiffness_prob``
    every channel drawn; one load whose kind is
    drawn with ``load_weights``: a force on a hand, a couple about a hand's own joint axis (body axes,
    held in world from the event start, as the evaluation's Fig. 4 couple), a force on an elbow, a
    force on the torso; a force's direction is uniform on the sphere (world); the trapezoid's parts
    are drawn from the ranges below. The initial posture is the commanded one (plus the episode's
    joint noise). Friction and mass are randomised as in every episode.

    Attributes:
        load_weights: relative weights of [hand force, hand couple, elbow force, torso force] [-].
        hand_force_n, elbow_force_n, torso_force_n: [low, high] force magnitude [N].
        couple_nm: [low, high] couple magnitude [N m].
        posture_prob: probability that the loaded arm's shoulder pitch and roll are drawn from
            ``shoulder_pitch_rad`` / ``shoulder_roll_out_rad`` (else the default posture).
        shoulder_pitch_rad: [low, high] shoulder pitch [rad] (negative: the arm raised forward).
        shoulder_roll_out_rad: [low, high] shoulder roll [rad], positive away from the body (left: +,
            right: -); an absolute angle (the default posture's is 0.2 outward, so 0 is a little inward).
        elbow_prob: probability that both elbows' angles are drawn from ``elbow_rad`` (each its own
            draw), in a probe of any kind: the forearms raised or lowered, as the teleop graph's
            default scenario (``robots/g1/scenarios/hand_push.yaml``: 0.9 rad) and the evaluation's
            ``fig3_teleop`` command them; 0: no draw (the random draws of an episode are then those
            of a configuration without the key).
        elbow_rad: [low, high] elbow angle [rad] (the default posture's is 0.6; larger: the forearm
            raised).
        all_stiffness_prob: probability that every channel, not only the loaded link's, is drawn.
        rest_s, ramp_s, hold_s, release_s: [low, high] of the trapezoid's parts [s] (the rest
            after ``EnvCfg.settle_s``).
    """

    load_weights: tuple[float, float, float, float] = (0.5, 0.2, 0.15, 0.15)
    hand_force_n: tuple[float, float] = (2.0, 8.0)
    couple_nm: tuple[float, float] = (0.5, 1.5)
    elbow_force_n: tuple[float, float] = (2.0, 5.0)
    torso_force_n: tuple[float, float] = (1.0, 3.0)
    posture_prob: float = 0.5
    shoulder_pitch_rad: tuple[float, float] = (-0.7, 0.3)
    shoulder_roll_out_rad: tuple[float, float] = (0.0, 0.9)
    elbow_prob: float = 0.0
    elbow_rad: tuple[float, float] = (0.4, 1.3)
    all_stiffness_prob: float = 0.3
    rest_s: tuple[float, float] = (0.5, 1.5)
    ramp_s: tuple[float, float] = (0.5, 1.5)
    hold_s: tuple[float, float] = (1.0, 3.0)
    release_s: tuple[float, float] = (1.0, 2.0)

    def __post_init__(self):
        if len(self.load_weights) != 4 or min(self.load_weights) < 0 or not sum(self.load_weights) > 0:
            raise ConfigError(f"load_weights: expected 4 weights >= 0 with a positive sum, got {list(self.load_weights)}")
        for n in ("hand_force_n", "couple_nm", "elbow_force_n", "torso_force_n", "rest_s", "ramp_s", "hold_s", "release_s"):
            _range(n, getattr(self, n), 0.0)
        _range("shoulder_pitch_rad", self.shoulder_pitch_rad)
        _range("shoulder_roll_out_rad", self.shoulder_roll_out_rad)
        _range("elbow_rad", self.elbow_rad)
        for n in ("posture_prob", "elbow_prob", "all_stiffness_prob"):
            if not 0 <= getattr(self, n) <= 1:
                raise ConfigError(f"{n}: must be in [0, 1], got {getattr(self, n)!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EnvCfg:
    """One training episode built from one augmentation-dataset row (``contactflow lac augment``).

    The row gives the commanded upper-body posture ``q_ref`` (waist yaw + 10 arm joints), the
    commanded base height, the 5-D stiffness, the trapezoid profile (rest, ramp, hold, release) and
    the peak force / couple per LAC link (world axes). The dataset's wrenches (15-70 N, 0.5-10 N m
    summed) exceed what the model-based teacher survives (docs/lac_teleop.md "Measured": a 20 N hand
    push at K = 100 N/m falls, 10 N on the torso saturates), so each peak is multiplied by
    ``force_scale`` / ``couple_scale`` and then, per link, capped at the group's maximum: the
    direction and the relative magnitudes of the dataset's events are kept, their size is the
    teacher's envelope.

    Attributes:
        force_scale: factor on the dataset's peak forces [-] (0.4: the accepted peaks, mostly
            15-30 N after the augmentation's decays, become 6-12 N, then capped).
        couple_scale: factor on the dataset's peak couples [-] (0.3: 2-5 N m -> 0.6-1.5 N m).
        max_hand_force_n: cap of the peak force on a wrist-roll (hand) link [N].
        max_arm_force_n: cap on the other arm links (shoulders, elbows) [N].
        max_torso_force_n: cap on the torso link [N].
        max_couple_nm: cap of the peak couple on any link [N m].
        settle_s: standing time before the dataset's rest period [s].
        after_s: time after the release ramp [s].
        max_episode_s: episode length cap [s] (the event is cut there).
        base_height_m: the dataset's commanded base height is clamped to [low, high] [m].
        default_command_prob: probability that the episode commands the teleop's default posture
            and base height (``stand_command``: arms at the default posture, 0.74 m) instead of the
            row's ``q_ref`` and height (stiffness and events are the row's): the dataset's synthetic
            contact frames rarely command the default posture, which deployment and the
            evaluation start from. 0 keeps the row's command (the PPO teacher's residual targets
            assume it).
        hand_push_prob: probability that the episode's events are replaced by one horizontal push
            on a hand (left or right), magnitude U(``hand_push_n``), direction uniform in the
            horizontal plane, with the row's profile and stiffness: the evaluation's kind of load
            (LAC Fig. 3), rare among the dataset's scaled events. 0: the row's events only.
        hand_push_n: [low, high] magnitude of those pushes [N].
        hand_push_direction: ``"horizontal"``: the push's direction is uniform in the horizontal
            plane (world); ``"sphere"``: uniform on the sphere (world), so that vertical loads (LAC
            Fig. 3's downward force) are trained as often as horizontal ones of the same size.
        hand_couple_prob: probability that the episode's events are replaced by one couple on a hand
            (left or right) about a direction uniform on the sphere, magnitude U(``hand_couple_nm``),
            with the row's profile and stiffness: the load of LAC Fig. 4, whose attitude follows
            K_theta; the dataset's couples are scaled by ``couple_scale`` and mixed with forces.
            Drawn after ``hand_push_prob`` (the two sum to <= 1). 0: none (the random draws of an
            episode are then those of a configuration without the key).
        hand_couple_nm: [low, high] magnitude of those couples [N m].
        hand_couple_axis: ``"sphere"``: the couple's axis is uniform on the sphere (world axes);
            ``"joint"``: about the hand's own joint axis (the wrist roll, either sign), turned into
            world axes with the hand's orientation at the event start and held there: the
            evaluation's Fig. 4 couple (``contactflow lac eval``, ``fig4_couple``).
        stiffness_sample_prob: probability that the episode's 5-D stiffness command is drawn anew,
            each value log-uniform over LAC's command range (K_lin [10, 500] N/m x 3, K_theta
            [10, 100] N m/rad x 2: the robot's ``teleop.yaml``, which the teleop and the teacher enforce), instead of the row's: the dataset
            holds one stiffness per row (96 rows: 96 values of each channel), too few to learn a
            response that follows K over its whole range. The teacher (``lac_expert``) computes
            its compliance from the command, so any K is labelled consistently. Drawn after every
            other draw of the episode (0: the episodes of a configuration without the key).
        probe_prob: probability that the episode is a compliance probe instead of the row's
            (:class:`ProbeCfg`: standing still, one held load at a drawn stiffness, the evaluation's
            kind of experiment). Drawn after every other draw of the episode (0: the episodes of a
            configuration without the key).
        probe: the probe episodes' distribution.
        fall_tilt_rad: the episode ends (a fall) when the pelvis tilts more than this from upright
            [rad] (the states of a fall in progress are not worth labelling).
        fall_height_m: ... or when the pelvis is below this height [m] (the simulator's own fall
            height, 0.35 m for the G1, is reached only on the floor).
        randomization: domain randomisation.
    """

    force_scale: float = 0.4
    couple_scale: float = 0.3
    max_hand_force_n: float = 10.0
    max_arm_force_n: float = 5.0
    max_torso_force_n: float = 3.0
    max_couple_nm: float = 1.5
    settle_s: float = 1.0
    after_s: float = 1.0
    max_episode_s: float = 12.0
    base_height_m: tuple[float, float] = (0.56, 0.78)
    default_command_prob: float = 0.0
    hand_push_prob: float = 0.0
    hand_push_n: tuple[float, float] = (4.0, 10.0)
    hand_push_direction: str = "horizontal"
    hand_couple_prob: float = 0.0
    hand_couple_nm: tuple[float, float] = (0.5, 1.5)
    hand_couple_axis: str = "sphere"
    stiffness_sample_prob: float = 0.0
    probe_prob: float = 0.0
    probe: ProbeCfg = dataclasses.field(default_factory=ProbeCfg)
    fall_tilt_rad: float = 0.5
    fall_height_m: float = 0.45
    randomization: RandomizationCfg = dataclasses.field(default_factory=RandomizationCfg)

    def __post_init__(self):
        for n in ("force_scale", "couple_scale", "max_hand_force_n", "max_arm_force_n", "max_torso_force_n",
                  "max_couple_nm", "settle_s", "after_s"):
            if not getattr(self, n) >= 0:
                raise ConfigError(f"{n}: must be >= 0, got {getattr(self, n)!r}")
        if not 0 <= self.hand_push_prob <= 1:
            raise ConfigError(f"hand_push_prob: must be in [0, 1], got {self.hand_push_prob!r}")
        _range("hand_push_n", self.hand_push_n, 0.0)
        if not (0 <= self.hand_couple_prob <= 1 and self.hand_push_prob + self.hand_couple_prob <= 1):
            raise ConfigError(f"hand_couple_prob: must be in [0, 1 - hand_push_prob], got {self.hand_couple_prob!r} "
                              f"(hand_push_prob {self.hand_push_prob!r})")
        _range("hand_couple_nm", self.hand_couple_nm, 0.0)
        if not 0 <= self.probe_prob <= 1:
            raise ConfigError(f"probe_prob: must be in [0, 1], got {self.probe_prob!r}")
        if not 0 <= self.stiffness_sample_prob <= 1:
            raise ConfigError(f"stiffness_sample_prob: must be in [0, 1], got {self.stiffness_sample_prob!r}")
        if self.hand_push_direction not in ("horizontal", "sphere"):
            raise ConfigError(f"hand_push_direction: expected 'horizontal' or 'sphere', got {self.hand_push_direction!r}")
        if self.hand_couple_axis not in ("sphere", "joint"):
            raise ConfigError(f"hand_couple_axis: expected 'sphere' or 'joint', got {self.hand_couple_axis!r}")
        if not 0 <= self.default_command_prob <= 1:
            raise ConfigError(f"default_command_prob: must be in [0, 1], got {self.default_command_prob!r}")
        if not (self.fall_tilt_rad > 0 and self.fall_height_m >= 0):
            raise ConfigError("fall_tilt_rad must be > 0 and fall_height_m >= 0")
        if not self.max_episode_s > 0:
            raise ConfigError(f"max_episode_s: must be > 0, got {self.max_episode_s!r}")
        _range("base_height_m", self.base_height_m, 0.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class StudentCfg:
    """The student network (:class:`contactflow.lac.train.student.Student`).

    Attributes:
        conv_channels: channels of the 1-D temporal convolutions of the history encoder.
        conv_kernel: kernel size of each convolution (stride 2).
        latent_dim: history latent size.
        actor_hidden: hidden widths of the actor MLP (input: the newest frame + the latent).
        std_floor: a feature whose training std is below this keeps std 1 in the normaliser [-].
        stiffness_film: condition every hidden layer of the actor on the newest frame's normalised
            log stiffness (FiLM, Perez et al., 2018: ``h * (1 + gamma(k)) + beta(k)``, gamma and beta
            linear in the 5 values, initialised to zero), so the actions can scale with the commanded
            stiffness multiplicatively instead of through 5 of the MLP's 127 inputs.
        tracking_features: append to every frame, inside the graph, what the external load shows
            as: the PD tracking error ``scale * last_action - joint_pos_rel`` of the 23 joints
            (policy order) [rad] and the arm reference error ``ref_upper_dof_pos - q_arm`` of
            the 10 arm joints [rad] (:func:`contactflow.lac.train.student.tracking_feature_map`).
            Both are linear in the frame, but as differences of two large signals (joint angles
            that move with the reference) they are small (a load of a few N moves them by
            0.01-0.05 rad); given explicitly, the normaliser scales them by their own spread.
        residual_action: ``"none"``, ``"arms"`` (the 10 arm joints of the spec's ``arms`` order),
            ``"wrists"`` (the joints of that order named ``*wrist*``, LAC's two wrist rolls: the
            shoulders and elbows absolute, whose residual drifts on under a held load, the wrist rolls
            residual, which lets the wrist follow K_theta; docs/lac_policy_runs.md; refused with
            ``arm_feedforward``) or ``"all"``: those actions are the newest frame's ``last_action``
            plus the network's output (its output layer starts at zero: the initial student holds
            its last action there). The teacher holds a stiff link still by keeping the PD offset that
            carries the load, which is its own last action: a network that has to reproduce that identity through its
            layers reproduces it with a gain slightly below one, a leaky integrator whose
            steady-state error grows with the commanded stiffness. Here the identity is exact and
            the network learns the change of the action per tick. The deploy input and output are
            unchanged (the sum is inside the graph). With ``"all"`` the legs' actions integrate the
            network's errors too (one run: the student alone fell while standing; docs/lac_policy_runs.md).
        actor_dropout: dropout probability on every hidden layer of the actor (after FiLM) while
            training (Srivastava et al., 2014); the exported graph has none. 0: off. The student
            over-fits its episodes: trained from scratch on the shipped run's aggregate with 10 % of
            the episodes held out, the training loss fell to 0.059 while the held-out loss stayed at
            0.112-0.121; with 0.1 the held-out loss was 0.106 (docs/lac_policy_runs.md).
        wrench_input: ``"none"``, ``"force"`` or ``"wrench"``: the actor also takes an estimate of the
            external load made from the history latent by a head of its own (``force_head_hidden``):
            ``force`` the forces on the two hands and the torso (9 values, world axes, in units of
            10 N), ``wrench`` those and the couples on the two hands (6 more, world axes, in units of
            1 N m). LAC's and RMA's split (Kumar et al., RSS 2021) of the student into an adaptation
            module that estimates what the teacher knows and an actor that acts on it. In training the
            actor is given the target values (``optim.aux_target``: the TRUE load by default, or the teacher's
            own estimate of it) in a fraction ``optim.force_teacher_prob`` of the samples (teacher forcing: it
            learns the load -> action map the teacher follows) and the estimate in the rest, and the estimate is
            regressed on the target values (``optim.aux_force_weight``,
            which must be > 0); in the other samples the action loss trains the estimate's head too
            (end to end, where RMA regresses its adaptation module alone). The exported graph uses the
            estimate. The rounds record the true forces (runs since 2026-12-03) and couples (moments
            about the link's CoM, since 2026-12-05 08:00 UTC); a value a round did not record is
            neither given nor a target there. A configuration written before 2026-12-05 08:45 UTC
            (a run's ``config.yaml``) has no such key and takes the shipped file's (``wrench``): add
            ``wrench_input: none`` to reproduce it.
        force_head_hidden: hidden widths (ELU) of the load estimate's head on the latent (``[]``: a
            linear head); used with ``wrench_input`` only (``optim.aux_force_weight`` alone keeps its
            linear head).
        force_head_frame: the load estimate's head also takes the newest frame: its normalised
            features (the actor's own first input) and its tracking errors (the 33 values of
            :func:`contactflow.lac.train.student.tracking_feature_map`, normalised by their own
            training mean and std, inside the graph); the encoder and the actor do not take the
            tracking errors (that is ``tracking_features``). A held load shows in the steady state as
            the PD offset that carries it, a small difference of two large signals in the normalised
            frame. Trained on the estimate alone (8000 steps on one run's rounds, another run's held
            out; docs/lac_policy_runs.md) the left hand's force estimate erred by 0.278 (units of 10 N) on
            the latent alone and by 0.233 with both beside it (0.241 with the frame alone, 0.253 with
            the tracking errors alone). Needs ``wrench_input``.
        force_head_stiffness: with ``force_head_frame``, whether the newest frame the head takes
            keeps its 5 (normalised log) stiffness values; false: they enter as 0 (their training
            mean), so the estimate of the load cannot lean on the command (one run with them: the
            student's response at K = 10 fell below that at K = 20 in 4 of 10 scenarios). False without
            ``force_head_frame`` is refused (it would act on nothing).
        compliance_input: the actor also takes the steady admittance displacement the load it is given
            (the estimate, or the true load where teacher forcing gives it) would command at the newest
            frame's stiffness: per block of the load, ``d = F / K`` of its channel (the hands' and the
            torso's forces over ``K_lin`` [m]: the rest value of LAC eqs. (7)-(8); the hands' couples over
            ``K_ang`` [rad]: the teacher's, which drives eq. (9) by the estimated couple), bounded by a
            tanh at the teacher's ``d_max`` and divided by it, ``s = d / d_max``, ``s tanh(|s|) / |s|`` (3
            values per block, in (-1, 1)); ``d_max`` the teacher's ``arm_max_displacement_m`` for a hand,
            ``torso_max_displacement_m`` for the torso (``expert_config``) and
            ``compliance_rotation_bound_rad`` for a couple (the teacher bounds no rotation). An
            approximation of the teacher's bound: it bounds its admittance target every tick (its rest
            value can lie below this one at the soft end), and clips the torso's displacement at its bound
            and within a CoP bound (the torso's force: ``compliance_torso`` below). The teacher's
            arm targets move by about this displacement, a map through the arm's Jacobian; without it the
            actor has to form the product of the estimate and ``exp(-log K)`` itself, over a 50x range of
            K, and its responses came out narrower than the teacher's (mostly too stiff at K = 10, too
            soft at K = 500; docs/lac_policy.md). Inside the graph (the deploy input is unchanged). Needs
            ``wrench_input``.
        compliance_rotation_bound_rad: ``d_max`` of the couples' rotation in ``compliance_input`` [rad].
        compliance_torso: the torso's block in ``compliance_input``: ``horizontal`` (its force's x and y, the
            vertical value 0: the teacher's torso channel, which displaces the pelvis horizontally under the
            estimated horizontal force, ``lac_expert``) or ``force`` (the whole force; docs/lac_policy_runs.md,
            "The runs of 2026-12-06 02:45 - 04:33 UTC").
        arm_estimate: where the hands' forces and couples of the load estimate come from: ``learned`` (the
            estimate's head, as the torso's force) or ``analytic`` (the teacher's estimator without its inertial
            terms, computed from the newest 16 frames inside the graph, :mod:`contactflow.lac.train.arm_statics`; the
            torso's force stays learned: it needs the sole forces, which the frame lacks) or ``analytic_forces``
            (the hands' forces from that estimator, their couples learned). Needs ``wrench_input: wrench``.
        arm_feedforward: ``none``, ``analytic`` or ``admittance``: the arm joints' actions also take the teacher's
            static feed-forward ``tau_ff = g_arm(q) - J_arm^T w_est`` over ``Kp`` (in action units: over ``Kp`` times the action scale),
            computed inside the graph from the frames as ``arm_estimate``'s estimator (its estimate, the hands' forces
            and couples, rotated back into the base frame; :meth:`~contactflow.lac.train.arm_statics.ArmStatics.feedforward`):
            the part of the teacher's label ``q_target + tau_ff / Kp`` that compensates the load and gravity, which an
            MLP otherwise forms as a product of the Jacobian and the estimate. With ``residual_action`` the arms' action
            is the last action plus the feed-forward's change since the frame before plus the network's output (the
            last action holds the feed-forward in force), without it the feed-forward plus the network's output.
            Needs ``arm_estimate`` not ``learned``; refused with ``residual_action: wrists``. ``admittance``: that
            feed-forward and the arm joints' offset at the rest of the teacher's hand admittances and IK under the
            estimate and the frame's stiffness command (linearised at the frame's angles, with its soft bound:
            :meth:`~contactflow.lac.train.arm_statics.ArmStatics.admittance_step`), the part of the label that makes a
            hand yield with ``1 / K``; the network learns the rest (a residual policy on a model-based part, as Johannink
            et al., "Residual reinforcement learning for robot control", ICRA 2019). ``admittance_lag``: the same offset
            made of the estimate through the hand admittances' dynamics over the history (their impulse response,
            :meth:`~contactflow.lac.train.arm_statics.ArmStatics.lagged`), the way the teacher reaches
            that rest: the static offset of ``admittance`` is read back by the estimate at once as a load, and its
            students fell from standing (docs/lac_policy_runs.md, "The runs of 2026-12-07 11:58 - 13:39 UTC").
    """

    conv_channels: tuple[int, ...] = (16, 16, 16)
    conv_kernel: int = 4
    latent_dim: int = 32
    actor_hidden: tuple[int, ...] = (256, 128)
    std_floor: float = 1e-2
    stiffness_film: bool = False
    tracking_features: bool = False
    residual_action: str = "none"
    actor_dropout: float = 0.0
    wrench_input: str = "none"
    force_head_hidden: tuple[int, ...] = (64,)
    force_head_frame: bool = False
    force_head_stiffness: bool = True
    compliance_input: bool = False
    compliance_rotation_bound_rad: float = 0.5
    compliance_torso: str = "horizontal"
    arm_estimate: str = "learned"
    arm_feedforward: str = "none"

    def __post_init__(self):
        if self.residual_action not in ("none", "arms", "wrists", "all"):
            raise ConfigError(f"residual_action: expected 'none', 'arms', 'wrists' or 'all', got {self.residual_action!r}")
        if not 0.0 <= self.actor_dropout < 1.0:
            raise ConfigError(f"actor_dropout: must be in [0, 1), got {self.actor_dropout!r}")
        if not self.conv_channels or min(self.conv_channels) < 1 or self.conv_kernel < 1:
            raise ConfigError("conv_channels and conv_kernel: must be >= 1")
        if self.latent_dim < 1 or not self.actor_hidden or min(self.actor_hidden) < 1:
            raise ConfigError("latent_dim and actor_hidden: must be >= 1")
        if not self.std_floor > 0:
            raise ConfigError(f"std_floor: must be > 0, got {self.std_floor!r}")
        if self.wrench_input not in ("none", "force", "wrench"):
            raise ConfigError(f"wrench_input: expected 'none', 'force' or 'wrench', got {self.wrench_input!r}")
        if self.force_head_hidden and min(self.force_head_hidden) < 1:
            raise ConfigError(f"force_head_hidden: widths must be >= 1, got {list(self.force_head_hidden)}")
        if self.force_head_frame and self.wrench_input == "none":
            raise ConfigError("force_head_frame: the load estimate's head exists with wrench_input 'force' or "
                              "'wrench' only, got wrench_input 'none'")
        if not self.force_head_stiffness and not self.force_head_frame:
            raise ConfigError("force_head_stiffness: false acts on the newest frame the load estimate's head takes, "
                              "which it takes with force_head_frame: true only, got force_head_frame: false")
        if self.compliance_input and self.wrench_input == "none":
            raise ConfigError("compliance_input: the displacement is made of the load estimate, which exists with "
                              "wrench_input 'force' or 'wrench' only, got wrench_input 'none'")
        if self.compliance_torso not in ("horizontal", "force"):
            raise ConfigError(f"compliance_torso: expected 'horizontal' or 'force', got {self.compliance_torso!r}")
        if self.arm_estimate not in ("learned", "analytic", "analytic_forces"):
            raise ConfigError(f"arm_estimate: expected 'learned', 'analytic' or 'analytic_forces', got {self.arm_estimate!r}")
        if self.arm_estimate != "learned" and self.wrench_input != "wrench":
            raise ConfigError(f"arm_estimate: {self.arm_estimate!r} fills the hands' loads of the load estimate with "
                              f"wrench_input 'wrench' (15 values), got wrench_input {self.wrench_input!r}")
        if self.arm_feedforward not in ("none", "analytic", "admittance", "admittance_lag"):
            raise ConfigError(f"arm_feedforward: expected 'none', 'analytic', 'admittance' or 'admittance_lag', got "
                              f"{self.arm_feedforward!r}")
        if self.arm_feedforward != "none" and self.arm_estimate == "learned":
            raise ConfigError(f"arm_feedforward: {self.arm_feedforward!r} is made of the graph's arm estimator, which "
                              f"exists with arm_estimate 'analytic' or 'analytic_forces' only, got arm_estimate 'learned'")
        if self.arm_feedforward != "none" and self.residual_action == "wrists":
            raise ConfigError(f"arm_feedforward: {self.arm_feedforward!r} adds to every arm joint's action, its change "
                              f"since the frame before where the last action is added: residual_action 'none', 'arms' "
                              f"or 'all', got 'wrists'")
        if not self.compliance_rotation_bound_rad > 0:
            raise ConfigError(f"compliance_rotation_bound_rad: must be > 0, got {self.compliance_rotation_bound_rad!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class OptimCfg:
    """Supervised regression of the teacher's actions (mean squared error, Adam).

    Attributes:
        loss: ``action`` (mean squared action error) or ``torque`` (the squared error of the PD
            torque the actions command at a fixed state, ``(Kp scale (a - a*))^2``, divided by the
            mean of ``(Kp scale)^2``: legs, whose balance torques matter most, weigh more) or
            ``torque_floor`` (the torque weights raised to at least 1: the arms, whose positions
            carry the commanded compliance, weigh as in the action loss).
        lr: Adam learning rate. weight_decay: Adam weight decay.
        lr_schedule: ``constant`` (``lr`` throughout, the runs before 2026-12-06 09:50 UTC) or ``cosine``: within
            each round from ``lr`` down to ``lr_final_ratio * lr`` at its last step (half a cosine, Loshchilov &
            Hutter, 2017, without restarts but each round's start), so a round ends on small steps.
        lr_final_ratio: ``cosine``'s last learning rate over ``lr``, in [0, 1].
        batch_size: samples per gradient step.
        epochs_per_round: passes over the aggregated dataset after each round.
        max_steps_per_round: cap of gradient steps per round (0: no cap).
        max_steps_first_round: round 0's cap instead (0: ``max_steps_per_round``); with
            ``dagger.prior_runs`` round 0 trains a fresh student on an aggregate many rounds large.
        torch_threads: torch intra-op threads of the training (1: deterministic and one core).
        aux_force_weight: weight of an auxiliary loss: a linear head on the history latent predicts
            the external force on the two hands and the torso (``aux_target``: the TRUE one by default;
            privileged, 9 values, in units of 10 N), LAC's adaptation module trained on privileged information; the head is not
            exported (with ``student.wrench_input`` the head is the load estimate the actor uses, 9 or 15
            values, and exported, and this weighs its loss). 0: no head.
        force_teacher_prob: with ``student.wrench_input``, the probability that a training sample's
            actor is given the ``aux_target`` load (else the estimate) [-], drawn per sample from the batch
            generator (so it changes the later batches' order); values a round did not record are
            never given. Ignored with ``wrench_input: none``.
        estimate_action_grad: with ``student.wrench_input``, whether the action loss of the samples given
            the estimate also trains the estimate's head (true: the head serves the actions and the regression
            together); false: the actor takes the estimate detached, so the head is the regression on the
            ``aux_target`` load alone (RMA's adaptation module; false in the shipped recipe's pooled stage: the same run
            with true decreased in 6 of 10 evaluation scenarios, with false in 9, and with another seed 7 and 7;
            docs/lac_policy.md).
        aux_target: what the load estimate (or the auxiliary head) regresses, and what the actor is given in the
            ``force_teacher_prob`` samples: ``load``, the TRUE external forces and couples (privileged), or
            ``teacher``, the teacher's own estimate of them (``lac_expert``'s ``f_est`` / ``c_est``, from the
            measured joint torques and the base state), the load its labels act on (under Fig. 4's pure 1.5 N m
            couple it also reads a ~2.6 N force; docs/lac_policy_runs.md). Rounds recorded by the code before this
            key (no ``force_est`` / ``couple_est`` in their file, e.g. a ``dagger.prior_runs`` run's) hold no
            teacher estimate: with ``teacher`` their samples train the actions only, and a run with no teacher
            estimate at all is refused.
        joint_loss_scale: policy joint name -> factor multiplying that joint's weight of ``loss``
            (after the floor of ``torque_floor``; {}: none). A joint whose labels carry a small but
            evaluated response weighs more: the wrist rolls, whose resistance to a couple is a
            ~0.2 action-unit difference between K_theta = 10 and 100 in the teacher's labels (LAC
            Fig. 4), against an arm loss of ~0.08 per joint. Unknown names are refused when the
            run starts (the joint names of the deploy spec are listed).
    """

    loss: str = "torque_floor"
    lr: float = 1e-3
    lr_schedule: str = "constant"
    lr_final_ratio: float = 0.1
    weight_decay: float = 0.0
    batch_size: int = 256
    epochs_per_round: int = 4
    max_steps_per_round: int = 0
    max_steps_first_round: int = 0
    torch_threads: int = 1
    aux_force_weight: float = 0.0
    force_teacher_prob: float = 0.5
    estimate_action_grad: bool = True
    aux_target: str = "load"
    joint_loss_scale: dict[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        bad = {k: v for k, v in self.joint_loss_scale.items() if not v > 0}
        if bad:
            raise ConfigError(f"joint_loss_scale: factors must be > 0, got {bad}")
        if not self.aux_force_weight >= 0:
            raise ConfigError(f"aux_force_weight: must be >= 0, got {self.aux_force_weight!r}")
        if not 0.0 <= self.force_teacher_prob <= 1.0:
            raise ConfigError(f"force_teacher_prob: must be in [0, 1], got {self.force_teacher_prob!r}")
        if self.aux_target not in ("load", "teacher"):
            raise ConfigError(f"aux_target: expected 'load' or 'teacher', got {self.aux_target!r}")
        if self.loss not in ("action", "torque", "torque_floor"):
            raise ConfigError(f"loss: expected 'action', 'torque' or 'torque_floor', got {self.loss!r}")
        if not self.lr > 0 or self.weight_decay < 0:
            raise ConfigError("lr must be > 0 and weight_decay >= 0")
        if self.lr_schedule not in ("constant", "cosine"):
            raise ConfigError(f"lr_schedule: expected 'constant' or 'cosine', got {self.lr_schedule!r}")
        if not 0.0 <= self.lr_final_ratio <= 1.0:
            raise ConfigError(f"lr_final_ratio: must be in [0, 1], got {self.lr_final_ratio!r}")
        if (self.batch_size < 1 or self.epochs_per_round < 1 or self.max_steps_per_round < 0
                or self.max_steps_first_round < 0 or self.torch_threads < 1):
            raise ConfigError("batch_size, epochs_per_round, torch_threads must be >= 1; "
                              "max_steps_per_round and max_steps_first_round >= 0")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DaggerCfg:
    """DAgger (Ross et al., AISTATS 2011) from the model-based teacher.

    Round 0 rolls out the teacher (behaviour cloning data); in round ``r >= 1`` each tick executes
    the teacher's action with probability ``beta_r = beta_1 * beta_decay^(r - 1)``, else the
    student's, and the teacher labels every visited state. The data of all rounds are aggregated.

    Attributes:
        rounds: DAgger rounds including round 0.
        episodes_per_round: training episodes rolled out per round.
        beta_1: teacher probability in round 1. beta_decay: factor per later round.
        label_limit_margin_rad: the teacher's label target is clipped this far inside the joint
            limits (the deploy runner refuses a target outside them; ``ExpertTeacher``) [rad].
        dataset_seed: seed of the augmentation dataset generated when ``--dataset`` is not given.
        dataset_episodes: contact frames (slots) of that generated dataset.
        stiffness_relabel: per episode, this many more teachers each commanded another 5-D stiffness (drawn
            log-uniform over the teleop's ranges) label the same visited states: each gives a copy of the
            episode whose frames carry its stiffness and whose labels are its actions (the same history under
            another command, told apart only by the stiffness). 0: none.
        prior_runs: folders of earlier ``contactflow lac train`` runs whose recorded rounds
            (``data/round_*.npz``, every one) join this run's aggregate from round 0 on: DAgger's data
            aggregation carried across runs (each run's students visited other states, all labelled
            by the same teacher). A path is taken as written (relative: to the working directory);
            each run must have the same robot, spec, teacher configuration and label margin, its
            ``student.onnx`` this run's deploy metadata and its data the spec's sizes, and no run may
            be given twice (checked before any rollout by
            :func:`~contactflow.lac.train.dagger.prior_aggregate`; ``ConfigError`` naming the run and
            the key); one SHA-256 per run over its round files goes into ``run.json`` (a resumed run
            refuses changed files). []: none.
        student_acts: ``all`` (DAgger as above) or ``probes``: in rounds ``r >= 1`` the student's action is
            executed (with probability ``1 - beta_r`` each tick) in the compliance-probe episodes only
            (``env.probe_prob``), the teacher's in all the others: the student's own states under a held load at
            the drawn stiffness, where its closed loop leaves the teacher's (the stiff end yields more than the
            teacher's targets say on the teacher's own states), without the falls of its rollouts in the
            dataset's episodes. Needs ``env.probe_prob > 0``.
        arm_action_noise: standard deviation of a Gaussian noise added, each tick, to the arm joints' actions
            where the teacher's action is executed (action units: times the action scale in rad), its label
            unchanged: the teacher's answer to the arm's state pushed off its own path, including the restoring
            action at a stiff command, which its undisturbed rollouts never show (DART, Laskey et al., CoRL 2017).
            Drawn from a generator of its own (the episode's draws unchanged). 0: none.
        arm_action_noise_tau_s: correlation time of that noise [s]: 0 draws it afresh each tick (white); ``tau > 0``
            makes it an Ornstein-Uhlenbeck process of the same std, ``eps_k = rho eps_(k-1) + sqrt(1 - rho^2) xi_k``,
            ``xi_k`` independent, N(0, ``arm_action_noise``^2), ``rho = exp(-dt / tau)`` (``dt`` the control tick,
            ``LacTrainEnv.dt``); ``eps`` starts stationary (``xi_0``) at the episode's first teacher tick and
            advances on the ticks where the teacher's action is executed. The arm is then held off the teacher's
            path for about ``tau``: with std 0.30, the hands 1.7-2.6 cm RMS off the noise-free teacher rollout white,
            4.4-5.9 cm with tau 0.2 s (six probe episodes; docs/lac_policy_runs.md, "The runs of 2026-12-07 21:35 -
            23:40 UTC"). Needs ``arm_action_noise > 0`` when not 0.
    """

    rounds: int = 6
    episodes_per_round: int = 40
    beta_1: float = 0.5
    beta_decay: float = 0.5
    label_limit_margin_rad: float = 0.02
    dataset_seed: int = 0
    dataset_episodes: int = 64
    stiffness_relabel: int = 0
    prior_runs: tuple[str, ...] = ()
    student_acts: str = "all"
    arm_action_noise: float = 0.0
    arm_action_noise_tau_s: float = 0.0

    def __post_init__(self):
        if not self.arm_action_noise >= 0:
            raise ConfigError(f"arm_action_noise: must be >= 0, got {self.arm_action_noise!r}")
        if not 0 <= self.arm_action_noise_tau_s < float("inf"):
            raise ConfigError(f"arm_action_noise_tau_s: must be a finite number >= 0 [s], "
                              f"got {self.arm_action_noise_tau_s!r}")
        if self.arm_action_noise_tau_s > 0 and self.arm_action_noise == 0:
            raise ConfigError(f"arm_action_noise_tau_s: {self.arm_action_noise_tau_s!r} s is the correlation time of "
                              f"dagger.arm_action_noise, which is 0 (no noise): set both, or the time to 0")
        if self.student_acts not in ("all", "probes"):
            raise ConfigError(f"student_acts: expected 'all' or 'probes', got {self.student_acts!r}")
        if self.rounds < 1 or self.episodes_per_round < 1 or self.dataset_episodes < 1:
            raise ConfigError("rounds, episodes_per_round and dataset_episodes: must be >= 1")
        if not (isinstance(self.stiffness_relabel, int) and 0 <= self.stiffness_relabel <= 8):
            raise ConfigError(f"stiffness_relabel: must be an integer in [0, 8], got {self.stiffness_relabel!r}")
        if not (0 <= self.beta_1 <= 1 and 0 <= self.beta_decay <= 1):
            raise ConfigError("beta_1 and beta_decay: must be in [0, 1]")
        if not self.label_limit_margin_rad >= 0:
            raise ConfigError(f"label_limit_margin_rad: must be >= 0, got {self.label_limit_margin_rad!r}")

    def beta(self, r: int) -> float:
        """Teacher probability of round ``r`` (1 in round 0)."""
        return 1.0 if r == 0 else self.beta_1 * self.beta_decay ** (r - 1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ValidationCfg:
    """Student-only check after each round (logged; it does not change the training).

    The exported student runs alone in the deploy ``PolicyRunner`` on the G1 PD simulator
    (:func:`contactflow.lac.compliance.run_wrench_event`, no randomisation): one standing run and,
    for each ``stiffness``, a push on ``body`` along world +x, ramp 0.5 s at 2 s, hold 3 s; the
    steady displacement is LAC Fig. 3's metric (lac.md §4). ``enabled: false`` skips it.

    Attributes:
        enabled: run the check.
        stand_s: duration of the standing run [s].
        body: the pushed MuJoCo body. force_n: the push [N].
        stiffness: the commanded K of the pushed channel, one run each [N/m].
        suite: a suite of ``robots/g1/lac_eval.yaml`` (``contactflow lac eval``) also run on each round's student,
            against the teacher (``lac_expert``, run once per run into ``validation_teacher.json``), to choose a
            round: its score is (scenarios decreasing in K, fewer falls, points within 25 % of the teacher), in that
            order (:func:`~contactflow.lac.train.dagger.best_round`, ``contactflow lac export RUN --best``). ``envelope``
            with ``suite_seed`` 1: the evaluation's scenarios and loads on other episodes (a suite at 80 % of the
            loads did not see the falls at their margin, docs/lac_policy.md); ``None``: not run.
        suite_trials: trials per (scenario, K) of that suite (the evaluation's ``trials``; 10: with 3 a pooled run's
            rule chose a round that falls in the evaluation with 10, docs/lac_policy.md).
        suite_seed: seed of its initial perturbations (the evaluation's ``seed``); the ``seed`` of
            ``robots/g1/lac_eval.yaml`` (0) is refused when ``lac train`` starts with a suite set.
    """

    enabled: bool = True
    stand_s: float = 10.0
    body: str = "left_wrist_roll_link"
    force_n: float = 8.0
    stiffness: tuple[float, ...] = (30.0, 100.0, 300.0)
    suite: str | None = None
    suite_trials: int = 10
    suite_seed: int = 1

    def __post_init__(self):
        if not (self.stand_s > 0 and self.force_n >= 0) or not self.stiffness or min(self.stiffness) <= 0:
            raise ConfigError("stand_s > 0, force_n >= 0 and positive stiffness values expected")
        if self.suite_trials < 1:
            raise ConfigError(f"suite_trials: must be >= 1, got {self.suite_trials}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything ``contactflow lac train`` needs (``robots/g1/lac_train.yaml``).

    Attributes:
        robot: robot name. spec: the deploy policy spec the student is trained for (name or file).
        expert_config: the teacher's configuration (``None``: ``robots/<robot>/lac_expert.yaml``).
        seed: training seed (episodes, randomisation, weights, batches).
        env, student, optim, dagger: the parts.
        validation: the student-only check after each round (does not change the result).
    """

    robot: str = "g1"
    spec: str = "lac"
    expert_config: str | None = None
    seed: int = 0
    env: EnvCfg = dataclasses.field(default_factory=EnvCfg)
    student: StudentCfg = dataclasses.field(default_factory=StudentCfg)
    optim: OptimCfg = dataclasses.field(default_factory=OptimCfg)
    dagger: DaggerCfg = dataclasses.field(default_factory=DaggerCfg)
    validation: ValidationCfg = dataclasses.field(default_factory=ValidationCfg)

    def __post_init__(self):
        if self.student.wrench_input != "none" and not self.optim.aux_force_weight > 0:
            raise ConfigError("student.wrench_input: needs optim.aux_force_weight > 0 (the load estimate's own loss), "
                              f"got {self.optim.aux_force_weight!r} (a configuration written before 2026-12-05 08:45 UTC "
                              "has no student.wrench_input and takes the shipped file's: add `wrench_input: none` to "
                              "its student section to reproduce it)")
        if self.dagger.student_acts == "probes" and not self.env.probe_prob > 0:
            raise ConfigError("dagger.student_acts: 'probes' executes the student's actions in the compliance-probe "
                              f"episodes only, and env.probe_prob is {self.env.probe_prob!r}: no episode would be its")


def default_train_config_path() -> Path:
    """The shipped file ``robots/g1/lac_train.yaml``."""
    from contactflow.robot import robots_dir

    return robots_dir() / "g1" / "lac_train.yaml"


def load_train_config(path: str | Path | None = None, override: Mapping | None = None) -> TrainConfig:
    """Load a :class:`TrainConfig` (strict keys): the shipped file (``robots/g1/lac_train.yaml``, the
    shipped student's recipe), ``path``'s keys layered over it, then ``override``.

    A file that sets a few keys therefore changes those keys of the shipped recipe and nothing else
    (a run's own ``config.yaml``, which holds every key of its revision, reproduces that run whatever the shipped file
    says, except for keys added after it: those take the shipped file's value, e.g. ``student.wrench_input`` for runs
    made before 2026-12-05 08:45 UTC, whose refusal says to add ``wrench_input: none``).

    Args:
        path: YAML file (None: the shipped file alone). override: mapping merged last (tests, ``--seed``).

    Raises:
        ConfigError: unreadable file, unknown key, wrong type or out-of-range value (file and key named).
    """
    raw, source = read_layered(default_train_config_path(), path, "TrainConfig keys")
    return load_config(TrainConfig, merge(raw, override), source=source)


def round_lr(optim: OptimCfg, step: int, total: int) -> float:
    """The learning rate of gradient step ``step`` (0-based) of a round of ``total`` steps (``optim.lr_schedule``)."""
    if optim.lr_schedule == "constant" or total <= 1:
        return optim.lr
    frac = min(step, total - 1) / (total - 1)
    return optim.lr * (optim.lr_final_ratio + (1.0 - optim.lr_final_ratio) * 0.5 * (1.0 + math.cos(math.pi * frac)))


def config_yaml(cfg: TrainConfig) -> str:
    """``cfg`` as the YAML of a run's ``config.yaml`` (every key; loads back to ``cfg`` with :func:`load_train_config`),
    as written by ``contactflow lac train`` and printed by its ``--print-config``."""
    import yaml

    header = "# resolved configuration (contactflow lac train: every key; --config this file reproduces it)\n"
    return header + yaml.safe_dump(to_dict(cfg), sort_keys=False)
