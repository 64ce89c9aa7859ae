"""The LAC student network (torch) and its export to LAC's deploy format (ONNX).

:class:`Student` maps the deploy input ``frames`` (B, 64, 95), oldest frame first, stiffness RAW,
to the action (B, 23), with everything LAC puts inside its graph (lac.md §1.1):

1. the log of the 5 stiffness values of every frame; with ``tracking_features``, 33 values appended to
   every frame, linear in it (:func:`tracking_feature_map`): the PD tracking error of the 23 joints and
   the arm reference error of the 10 arm joints;
2. the normaliser ``(x - mean) / std`` per feature, statistics of the training data stored as
   buffers (exported as constants);
3. a history encoder: 1-D temporal convolutions (stride 2, ELU) over the 64 frames, then a linear
   layer to a latent vector (LAC's adaptation module, the "history estimator", scaled down for a
   CPU: lac.md §0 measured a 725 k-parameter conv encoder at 2.6 k samples/s);
4. the actor: an MLP (ELU) on the newest normalised frame and the latent; with ``residual_action``,
   its output added to the newest frame's raw ``last_action`` (:func:`last_action_map`); with
   ``wrench_input``, the load estimate (a head on the latent; with ``force_head_frame`` also on the
   newest normalised frame, its stiffness kept or not, and its tracking errors, normalised by their own
   statistics) as more inputs of the actor; with
   ``actor_dropout``, dropout on its hidden layers while training only; with
   ``stiffness_film`` every hidden layer is modulated by the newest frame's normalised log
   stiffness ``k``: ``h <- h * (1 + gamma_i(k)) + beta_i(k)`` (FiLM, Perez et al., 2018; gamma_i,
   beta_i linear, zero at initialisation); with ``arm_feedforward``, the teacher's static arm feed-forward
   over Kp (:meth:`~contactflow.lac.train.arm_statics.ArmStatics.feedforward`) added to the arm joints'
   actions (its change since the frame before where ``residual_action`` adds the last action).

:func:`export_onnx` writes the graph with input ``frames`` (1, 64, 95) float32 and output
``action`` (1, 23), opset 17, and the metadata the deploy side and a reader need (gains, action
scale, default posture, joint orders, spec version, training provenance).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from contactflow.lac.train.config import StudentCfg
from contactflow.paths import replaced_atomically
from contactflow.policy.spec import PolicySpec

__all__ = ["Student", "export_onnx", "ensemble_onnx", "ONNX_OPSET", "SPEC_VERSION", "deploy_metadata", "read_metadata", "tracking_feature_map",
           "DEPLOY_METADATA_KEYS", "metadata_strings", "deploy_contract_mismatch", "last_action_map",
           "action_columns"]

#: the normalised inputs are clipped to +- this many standard deviations inside the graph
CLIP_SIGMA = 10.0
#: opset of the exported graph (onnxruntime >= 1.14 runs it; checked with 1.32)
ONNX_OPSET = 17
#: version of the deploy interface the export follows (LAC demo db66486, lac.md §1.1)
SPEC_VERSION = "lac-deploy/1 (frames (1, 64, 95) oldest first, raw stiffness, action (1, 23) policy order)"


def _term_position(b, source_index: int) -> int:
    """Where observation term ``b`` of a spec holds element ``source_index`` of its source (IndexError: not held)."""
    return int(source_index) if b.index is None else int(np.flatnonzero(b.index == source_index)[0])


def tracking_feature_map(spec: PolicySpec) -> tuple[np.ndarray, np.ndarray]:
    """The linear map ``d = frame @ W + b`` from a deploy frame to what an external load shows as:

    - ``d[:n]`` (n = 23, policy order): the PD tracking error ``scale * last_action -
      joint_pos_rel`` [rad], the joint's target minus its angle (its PD torque over Kp, less the
      damping term);
    - ``d[n:]`` (one per joint of ``ref_upper_dof_pos``'s order, LAC: the 10 arm joints): the
      reference minus the joint angle ``ref_upper_dof_pos - (joint_pos_rel + default)`` [rad]
      (how far the arm has yielded from the commanded motion).

    Each term's spec ``scale`` is divided out (a clipped term gives its clipped value).

    Args:
        spec: the deploy spec (its frame layout, joint orders, action scale and default posture).

    Returns:
        (W (frame_dim, n + n_ref), b (n + n_ref,)) float32.

    Raises:
        ConfigError: the spec's frame lacks ``joint_pos_rel``, ``last_action`` or
            ``ref_upper_dof_pos``.
    """
    from contactflow.errors import ConfigError

    terms = {t: spec.term(t) for t in ("joint_pos_rel", "last_action", "ref_upper_dof_pos")}
    missing = [t for t, bound in terms.items() if bound is None]
    if missing:
        raise ConfigError(f"{spec.file}: student.tracking_features needs the observation terms {missing}")
    jpr, _, ref = terms.values()  # last_action: read by pd_error_map
    n = len(spec.joint_names)

    ref_names = spec.cfg.joint_orders[ref.cfg.joints]
    W = np.zeros((spec.frame_dim, n + len(ref_names)))
    b = np.zeros(n + len(ref_names))
    W[:, :n] = pd_error_map(spec)
    for k, name in enumerate(ref_names):
        i = spec.joint_names.index(name)
        W[ref.sl.start + k, n + k] = 1.0 / ref.cfg.scale
        W[jpr.sl.start + _term_position(jpr, spec.policy_to_robot[i]), n + k] = -1.0 / jpr.cfg.scale
        b[n + k] = -spec.default_policy[i]
    return W.astype(np.float32), b.astype(np.float32)


def pd_error_map(spec: PolicySpec) -> np.ndarray:
    """The linear map ``d = frame @ W`` from a deploy frame to each joint's PD target minus its angle, ``scale
    last_action - joint_pos_rel`` [rad], policy order (the target of :meth:`contactflow.policy.PolicyRunner.act`,
    ``default + scale a``, less ``default + joint_pos_rel``): its PD torque over Kp, less the damping term.

    Returns:
        W (frame_dim, n_act) float64; each term's spec ``scale`` divided out.

    Raises:
        IndexError: ``last_action`` or ``joint_pos_rel`` does not hold a joint (callers check the terms exist).
    """
    jpr, la = spec.term("joint_pos_rel"), spec.term("last_action")
    W = np.zeros((spec.frame_dim, len(spec.joint_names)))
    for i in range(len(spec.joint_names)):
        W[la.sl.start + _term_position(la, i), i] = spec.scale[i] / la.cfg.scale
        W[jpr.sl.start + _term_position(jpr, spec.policy_to_robot[i]), i] -= 1.0 / jpr.cfg.scale
    return W


def action_columns(spec: PolicySpec, joints: str, *, key: str) -> list[int]:
    """The action indices (policy order) of a group of joints.

    Args:
        spec: the deploy spec (its joint orders).
        joints: ``"all"``, ``"arms"`` (the spec's ``arms`` joint order) or ``"wrists"`` (the joints of that
            order whose name holds ``wrist``: LAC's two wrist rolls).
        key: the configuration key the group is for (named in the errors).

    Returns:
        The indices into the (n_act,) action: policy order for ``all``; the order of the spec's ``arms`` joint
        order for ``arms`` and ``wrists``.

    Raises:
        ValueError: ``joints`` is not ``"all"``, ``"arms"`` or ``"wrists"``.
        ConfigError: ``arms`` or ``wrists`` without an ``arms`` joint order in the spec or naming a joint not in
            its actions; ``wrists`` with no ``wrist`` joint in that order.
    """
    from contactflow.errors import ConfigError

    if joints not in ("all", "arms", "wrists"):
        raise ValueError(f"{key}: joints: expected 'all', 'arms' or 'wrists', got {joints!r}")
    if joints == "all":
        return list(range(len(spec.joint_names)))
    if "arms" not in spec.cfg.joint_orders:
        raise ConfigError(f"{spec.file}: {key}: needs the joint order 'arms' (for the joints {joints!r}); the spec has "
                          f"the joint orders {sorted(spec.cfg.joint_orders)}")
    missing = [j for j in spec.cfg.joint_orders["arms"] if j not in spec.joint_names]
    if missing:
        raise ConfigError(f"{spec.file}: {key}: joint order 'arms' names joints without an action: {missing}")
    names = [j for j in spec.cfg.joint_orders["arms"] if joints == "arms" or "wrist" in j]
    if not names:
        raise ConfigError(f"{spec.file}: {key}: wrists needs a joint named '*wrist*' in the joint order 'arms', it "
                          f"has {spec.cfg.joint_orders['arms']}")
    return [spec.joint_names.index(j) for j in names]


def last_action_map(spec: PolicySpec, joints: str = "all", *, key: str = "student.residual_action") -> np.ndarray:
    """The linear map ``a = frame @ W`` from a deploy frame to its ``last_action`` term, raw (the
    spec's term ``scale`` divided out), policy order.

    Args:
        spec: the deploy spec (its frame layout and joint orders).
        joints: the columns kept, the others zero (:func:`action_columns`: ``"all"``, ``"arms"``,
            ``"wrists"``).
        key: the config key or caller named in the errors.

    Returns:
        W (frame_dim, n_act) float32 [-]: the action's units (LAC: multiples of the action scale).

    Raises:
        ValueError, ConfigError: as :func:`action_columns`; ConfigError also when the spec's frame has no
            ``last_action`` term or it lacks an action.
    """
    from contactflow.errors import ConfigError

    cols = action_columns(spec, joints, key=key)
    la = spec.term("last_action")
    if la is None:
        raise ConfigError(f"{spec.file}: {key} needs the observation term last_action")
    W = np.zeros((spec.frame_dim, len(spec.joint_names)), np.float32)
    for i in cols:
        try:
            W[la.sl.start + _term_position(la, i), i] = 1.0 / la.cfg.scale
        except IndexError:
            raise ConfigError(f"{spec.file}: last_action does not hold action {i} ({spec.joint_names[i]})") from None
    return W


def _std_or_one(sd: torch.Tensor, std_floor: float) -> torch.Tensor:
    """A normaliser's standard deviations as float32: 1 where below ``std_floor`` (a feature constant in training)."""
    return torch.where(sd < std_floor, torch.ones_like(sd), sd).float()


class Student(nn.Module):
    """LAC student: log-stiffness, normaliser, history encoder, actor (module docstring).

    Args:
        cfg: network sizes.
        history: frames in the input (LAC: 64). frame_dim: values per frame (95). n_act: actions (23).
        stiffness: slice of the RAW stiffness values in a frame (LAC: the last 5). All four come from
            the deploy spec (``dagger.new_student``).
        aux_dim: outputs of an auxiliary linear head on the latent (training only; not exported); with
            ``cfg.wrench_input`` the load estimate's outputs (its head ``cfg.force_head_hidden``), which
            the actor takes as input (exported).
        tracking: ``(W, b)`` of :func:`tracking_feature_map` when ``cfg.tracking_features`` (stored as
            buffers, exported as constants), else None.
        last_action: (frame_dim, n_act) of :func:`last_action_map` when ``cfg.residual_action`` (a
            buffer, exported as a constant): the action is ``frames[:, -1] @ last_action`` plus the
            network's output (zero columns: the network's output alone); else None.
        head_tracking: ``(W, b)`` of :func:`tracking_feature_map` when ``cfg.force_head_frame``
            (buffers; the head's own normaliser :meth:`set_head_normalizer`), else None.
        compliance: ``(select, unit, bound, axes)`` when ``cfg.compliance_input`` (buffers), else None:
            ``select`` (n_stiffness, n_blocks) picks each 3-value block of the load its stiffness
            channel, ``unit`` (n_blocks,) the SI value of one unit of the block, ``bound`` (n_blocks,)
            its ``d_max`` [m or rad], ``axes`` (n_blocks, 3) 0/1 the block's values that enter
            (:meth:`compliance_features`; ``dagger.compliance_map``).
        arm_statics: ``(params, force_unit, couple_unit)`` when ``cfg.arm_estimate`` is not ``learned``: the
            :class:`~contactflow.lac.train.arm_statics.ArmStatics` of
            :func:`~contactflow.lac.train.arm_statics.arm_statics_params` and the load estimate's units [N], [N m]
            (:meth:`load_taken`), else None.

    Raises:
        ValueError: the history is too short for the convolutions; ``tracking`` / ``last_action`` /
            ``head_tracking`` / ``compliance`` / ``arm_statics`` given against the configuration; ``cfg.wrench_input``
            without ``aux_dim``; ``compliance`` not covering the load estimate's blocks; ``arm_statics`` without the
            15-value load estimate or with a history shorter than its low-pass; ``cfg.arm_feedforward`` with a
            history shorter than the low-pass and one frame, or a ``residual_action`` that leaves out an arm joint.

    Shapes: ``forward(frames (B, history, frame_dim)) -> (B, n_act)``.
    """

    def __init__(self, cfg: StudentCfg, *, history: int, frame_dim: int, n_act: int, stiffness: slice,
                 aux_dim: int = 0, tracking: tuple[np.ndarray, np.ndarray] | None = None,
                 last_action: np.ndarray | None = None, head_tracking: tuple[np.ndarray, np.ndarray] | None = None,
                 compliance: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
                 arm_statics: tuple | None = None):
        super().__init__()
        self.history, self.frame_dim, self.n_act = history, frame_dim, n_act
        self.k0, self.k1 = stiffness.start, stiffness.stop
        if cfg.tracking_features != (tracking is not None):
            raise ValueError("tracking: give tracking_feature_map(spec) exactly when cfg.tracking_features")
        self.tracking = tracking is not None
        if (cfg.residual_action != "none") != (last_action is not None):
            raise ValueError("last_action: give last_action_map(spec, cfg.residual_action) exactly when residual_action is not 'none'")
        self.residual = last_action is not None
        if last_action is not None:
            self.register_buffer("last_action_W", torch.as_tensor(np.asarray(last_action, np.float32)))
        feat_dim = frame_dim
        if tracking is not None:
            W, b = tracking
            self.register_buffer("tracking_W", torch.as_tensor(np.asarray(W, np.float32)))
            self.register_buffer("tracking_b", torch.as_tensor(np.asarray(b, np.float32)))
            feat_dim += int(W.shape[1])
        self.feat_dim = feat_dim
        self.register_buffer("obs_mean", torch.zeros(feat_dim))
        self.register_buffer("obs_std", torch.ones(feat_dim))
        layers, c_in, length = [], feat_dim, history
        for c in cfg.conv_channels:
            layers += [nn.Conv1d(c_in, c, cfg.conv_kernel, stride=2), nn.ELU()]
            c_in, length = c, (length - cfg.conv_kernel) // 2 + 1
        if length < 1:
            raise ValueError(f"history {history} too short for {len(cfg.conv_channels)} convolutions of kernel {cfg.conv_kernel}")
        self.encoder = nn.Sequential(*layers, nn.Flatten(), nn.Linear(c_in * length, cfg.latent_dim), nn.ELU())
        self.force_input = cfg.wrench_input != "none"
        if self.force_input and aux_dim < 1:
            raise ValueError("aux_dim: cfg.wrench_input needs the load estimate's size (aux_dim >= 1)")
        if cfg.compliance_input != (compliance is not None):
            raise ValueError("compliance: give dagger.compliance_map(cfg, spec) exactly when cfg.compliance_input")
        self.compliance = compliance is not None
        n_comp = 0
        if compliance is not None:
            sel, unit, bound, axes = (np.asarray(a, np.float32) for a in compliance)
            n_comp = 3 * sel.shape[1]
            if (sel.shape != (stiffness.stop - stiffness.start, unit.size) or bound.shape != unit.shape
                    or axes.shape != (unit.size, 3) or n_comp != aux_dim):
                raise ValueError(f"compliance: select (n_stiffness, n_blocks), unit and bound (n_blocks,), axes "
                                 f"(n_blocks, 3) for the {aux_dim} load values, got {sel.shape}, {unit.shape}, "
                                 f"{bound.shape}, {axes.shape}")
            self.register_buffer("comp_select", torch.as_tensor(sel))
            self.register_buffer("comp_unit", torch.as_tensor(unit))
            self.register_buffer("comp_bound", torch.as_tensor(bound))
            # not in the state dict: checkpoints of runs before the key load unchanged (its value from the config)
            self.register_buffer("comp_axes", torch.as_tensor(axes), persistent=False)
        sizes = [feat_dim + cfg.latent_dim + (aux_dim if self.force_input else 0) + n_comp, *cfg.actor_hidden]
        act = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            act += [nn.Linear(a, b), nn.ELU()]
        act.append(nn.Linear(sizes[-1], n_act))
        if self.residual:  # the initial student holds its last action where it is added
            cols = torch.as_tensor(np.flatnonzero(np.any(np.asarray(last_action) != 0, axis=0)))
            with torch.no_grad():
                act[-1].weight[cols] = 0.0
                act[-1].bias[cols] = 0.0
        self.actor = nn.Sequential(*act)
        n_k = self.k1 - self.k0
        self.film = (nn.ModuleList(nn.Linear(n_k, 2 * w) for w in cfg.actor_hidden)
                     if cfg.stiffness_film else None)
        if self.film is not None:
            for lin in self.film:
                nn.init.zeros_(lin.weight)
                nn.init.zeros_(lin.bias)
        if cfg.force_head_frame != (head_tracking is not None):
            raise ValueError("head_tracking: give tracking_feature_map(spec) exactly when cfg.force_head_frame")
        self.head_tracking = head_tracking is not None
        self.head_stiffness = bool(cfg.force_head_stiffness)
        if head_tracking is not None:
            W, b = head_tracking
            self.register_buffer("head_W", torch.as_tensor(np.asarray(W, np.float32)))
            self.register_buffer("head_b", torch.as_tensor(np.asarray(b, np.float32)))
            self.register_buffer("head_mean", torch.zeros(int(W.shape[1])))
            self.register_buffer("head_std", torch.ones(int(W.shape[1])))
        if aux_dim > 0 and self.force_input:
            head, w_in = [], cfg.latent_dim + (feat_dim + int(head_tracking[0].shape[1]) if head_tracking is not None else 0)
            for w_h in cfg.force_head_hidden:
                head += [nn.Linear(w_in, w_h), nn.ELU()]
                w_in = w_h
            self.aux = nn.Sequential(*head, nn.Linear(w_in, aux_dim))
        else:
            self.aux = nn.Linear(cfg.latent_dim, aux_dim) if aux_dim > 0 else None
        self.actor_dropout = float(cfg.actor_dropout)
        if (cfg.arm_estimate != "learned") != (arm_statics is not None):
            raise ValueError("arm_statics: give (arm_statics_params(...), force unit, couple unit) exactly when "
                             "cfg.arm_estimate is not 'learned'")
        self.arm_statics = None
        self.arm_couples = cfg.arm_estimate == "analytic"
        if arm_statics is not None:
            from contactflow.lac.train.arm_statics import ArmStatics

            params, force_unit, couple_unit = arm_statics
            if aux_dim != 15 or not self.force_input:
                raise ValueError(f"arm_statics: the analytic arm estimate fills the hand forces and couples of the "
                                 f"15-value load estimate (wrench_input 'wrench'), got aux_dim {aux_dim}")
            if history < len(params.filter_w):
                raise ValueError(f"arm_statics: its low-pass takes {len(params.filter_w)} frames, the history has {history}")
            self.arm_statics = ArmStatics(params)
            self.register_buffer("arm_units", torch.tensor([force_unit] * 6 + [couple_unit] * 6, dtype=torch.float32),
                                 persistent=False)
        self.arm_ff = cfg.arm_feedforward != "none"
        self.arm_admittance = cfg.arm_feedforward in ("admittance", "admittance_lag")
        self.arm_lag = cfg.arm_feedforward == "admittance_lag"
        if self.arm_ff:
            params = arm_statics[0]
            need = len(params.filter_w) + (2 if self.arm_lag else 1)
            if self.arm_lag and params.adm_zeta < 1.0:
                raise ValueError(f"arm_feedforward: 'admittance_lag' models an over-damped admittance, the expert's "
                                 f"admittance.damping_ratio is {params.adm_zeta} (< 1)")
            if history < need:
                raise ValueError(f"arm_feedforward: {cfg.arm_feedforward!r} takes {need} frames, the history has {history}")
            cols = np.asarray(params.act_col).reshape(-1)
            if self.residual and not (np.asarray(last_action)[:, cols] != 0).any(axis=0).all():
                raise ValueError("arm_feedforward: residual_action must hold every arm joint's last action")
            W = np.zeros((cols.size, n_act), np.float32)
            W[np.arange(cols.size), cols] = 1.0 / (np.asarray(params.kp) * np.asarray(params.act_scale)).reshape(-1)
            # not in the state dict (computed from the spec): the key leaves the checkpoint's keys as they are
            self.register_buffer("arm_ff_W", torch.as_tensor(W), persistent=False)

    def features(self, frames: torch.Tensor) -> torch.Tensor:
        """(B, H, D) raw frames -> (B, H, feat_dim): the log of the stiffness (clamped at 1e-6), other
        values as they are, then (``tracking_features``) the tracking errors of
        :func:`tracking_feature_map`."""
        k = torch.log(torch.clamp(frames[..., self.k0:self.k1], min=1e-6))
        parts = [frames[..., :self.k0], k, frames[..., self.k1:]]
        if self.tracking:
            parts.append(frames @ self.tracking_W + self.tracking_b)
        return torch.cat(parts, dim=-1)

    def compliance_features(self, stiffness: torch.Tensor, load: torch.Tensor) -> torch.Tensor:
        """The steady admittance displacement ``load`` would command, bounded (``cfg.compliance_input``).

        Args:
            stiffness: (B, 5) RAW commanded stiffness of the newest frame [N/m, N m/rad] (clamped
                at 1 below: K_lin and K_ang are >= 10 in LAC's ranges).
            load: (B, 3 n_blocks) the load in the estimate's units (``dagger.aux_blocks``, world axes).

        Returns:
            (B, 3 n_blocks): per block ``s tanh(|s|) / |s|`` with ``s = axes * unit load / (K d_max)``
            (the rest value of LAC eqs. (7)-(8), ``d = F / K``; for a couple the teacher's ``tau / K_ang``;
            the torso's horizontal force only with ``compliance_torso: horizontal``), in (-1, 1).
        """
        k = torch.clamp(stiffness, min=1.0) @ self.comp_select  # (B, n_blocks): each block's channel
        s = load.reshape(len(load), -1, 3) * self.comp_axes * (self.comp_unit / (k * self.comp_bound))[..., None]
        r = torch.sqrt((s * s).sum(dim=-1, keepdim=True) + 1e-12)
        return (s * (torch.tanh(r) / r)).reshape(len(load), -1)

    def set_normalizer(self, features: np.ndarray, std_floor: float) -> None:
        """Store the mean and standard deviation of ``features`` (N, D) (the output of
        :meth:`features` on training frames) as the normaliser. A feature whose std is below
        ``std_floor`` (constant in training: the base velocity commands, which the standing
        teacher never receives) keeps std 1, so a command it never saw enters unscaled rather than
        as hundreds of standard deviations."""
        f = np.asarray(features, dtype=np.float64)
        self.obs_mean.copy_(torch.as_tensor(f.mean(axis=0), dtype=torch.float32))
        self.obs_std.copy_(_std_or_one(torch.as_tensor(f.std(axis=0)), std_floor))

    def set_head_normalizer(self, frames: np.ndarray | torch.Tensor, std_floor: float) -> None:
        """With ``force_head_frame``: store the mean and standard deviation of the tracking errors of
        ``frames`` (N, frame_dim) raw training frames as the load estimate head's normaliser (a std
        below ``std_floor`` keeps 1, as :meth:`set_normalizer`). Without it: nothing to do.
        """
        if not self.head_tracking:
            return
        f = torch.as_tensor(np.asarray(frames, np.float32))
        n, s1, s2 = len(f), 0.0, 0.0
        with torch.no_grad():
            for i in range(0, n, 65536):  # in chunks: an aggregate holds millions of frames
                d = (f[i:i + 65536] @ self.head_W + self.head_b).double()
                s1, s2 = s1 + d.sum(dim=0), s2 + (d * d).sum(dim=0)
            mean = s1 / n
            sd = torch.sqrt(torch.clamp(s2 / n - mean * mean, min=0.0))
            self.head_mean.copy_(mean.float())
            self.head_std.copy_(_std_or_one(sd, std_floor))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """(B, history, frame_dim) raw frames, oldest first -> (B, n_act) actions, policy order.

        The normalised features are clipped to +-``CLIP_SIGMA`` (an input far outside the training
        data saturates instead of extrapolating)."""
        return self.forward_aux(frames)[0]

    def forward_aux(self, frames: torch.Tensor, force: torch.Tensor | None = None,
                    given: torch.Tensor | None = None, *, detach_estimate: bool = False
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(actions (B, n_act), the auxiliary head's output (B, aux_dim) or None).

        With ``cfg.wrench_input`` the actor takes the load estimate (:meth:`load_taken` of the head's output), or, where
        ``given`` (B,) or (B, aux_dim) bool is True, ``force`` (B, aux_dim) there instead (training: the
        ``optim.aux_target`` values, the true load by default); ``detach_estimate``: the actor takes the estimate without its gradient (training:
        ``optim.estimate_action_grad`` false; the values are the same). With ``cfg.compliance_input``
        the actor also takes :meth:`compliance_features` of the load it takes."""
        x = torch.clamp((self.features(frames) - self.obs_mean) / self.obs_std, -CLIP_SIGMA, CLIP_SIGMA)
        z = self.encoder(x.transpose(1, 2))
        if self.head_tracking:
            d = torch.clamp((frames[:, -1] @ self.head_W + self.head_b - self.head_mean) / self.head_std,
                            -CLIP_SIGMA, CLIP_SIGMA)
            xh = x[:, -1]
            if not self.head_stiffness:  # the command's stiffness at its training mean (0 normalised)
                xh = torch.cat([xh[:, :self.k0], torch.zeros_like(xh[:, self.k0:self.k1]), xh[:, self.k1:]], dim=-1)
            aux = self.aux(torch.cat([z, xh, d], dim=-1))
        else:
            aux = self.aux(z) if self.aux is not None else None
        an = ff = None
        if self.arm_ff:
            with torch.no_grad():  # no parameter in it
                an, tau_now, tau_prev = self.arm_statics.feedforward(frames, admittance=self.arm_admittance,
                                                                          lag=self.arm_lag)
                b = len(frames)
                ff = ((tau_now - tau_prev) if self.residual else tau_now).reshape(b, -1) @ self.arm_ff_W
        if self.force_input:
            est = self.load_taken(frames, aux.detach() if detach_estimate else aux, an)
            f_in = est if force is None or given is None else torch.where(given if given.dim() == 2 else given[:, None],
                                                                           force, est)
            h = torch.cat([x[:, -1], z, f_in], dim=-1)
            if self.compliance:
                h = torch.cat([h, self.compliance_features(frames[:, -1, self.k0:self.k1], f_in)], dim=-1)
        else:
            h = torch.cat([x[:, -1], z], dim=-1)
        if self.film is None and not self.actor_dropout:
            a = self.actor(h)
        else:
            k = x[:, -1, self.k0:self.k1]
            mods = list(self.actor)
            for i in range(len(mods) // 2):  # (Linear, ELU) pairs, then the output layer
                h = mods[2 * i + 1](mods[2 * i](h))
                if self.film is not None:
                    gamma, beta = self.film[i](k).chunk(2, dim=-1)
                    h = h * (1.0 + gamma) + beta
                if self.actor_dropout:  # identity in eval mode (the export)
                    h = nn.functional.dropout(h, self.actor_dropout, self.training)
            a = mods[-1](h)
        if self.residual:
            a = a + frames[:, -1] @ self.last_action_W
        if ff is not None:
            a = a + ff
        return a, aux

    def load_taken(self, frames: torch.Tensor, aux: torch.Tensor, analytic: torch.Tensor | None = None) -> torch.Tensor:
        """The load estimate the actor takes, (B, aux_dim) in the estimate's units: the head's output ``aux``, with
        ``cfg.arm_estimate`` not ``learned`` its hands' forces (and with ``analytic`` their couples) replaced by the
        teacher's arm estimator on ``frames`` (B, history, frame_dim) (:mod:`contactflow.lac.train.arm_statics`;
        ``analytic`` (B, 12): that estimator's output on them where the caller computed it already)."""
        if self.arm_statics is None:
            return aux
        with torch.no_grad():  # no parameter in it: nothing to back-propagate
            an = (self.arm_statics(frames) if analytic is None else analytic) / self.arm_units
        return torch.cat([an[:, :6], aux[:, 6:9], an[:, 6:] if self.arm_couples else aux[:, 9:]], dim=-1)

    def n_params(self) -> int:
        """Number of trained parameters."""
        return sum(p.numel() for p in self.parameters())


def deploy_metadata(spec: PolicySpec) -> dict:
    """The deploy facts of ``spec`` as ONNX metadata (policy order): ``dof_names``, ``kp``, ``kd``
    [N m/rad, N m s/rad], ``action_scale`` [rad], ``default_joint_pos`` [rad], ``joint_orders``
    (name -> list), ``observation_layout``, ``history``, ``rate_hz`` [Hz], ``spec_name``, ``spec_version``,
    ``spec_sha256`` (:data:`DEPLOY_METADATA_KEYS`)."""
    p2r = spec.policy_to_robot
    orders = {k: v for k, v in spec.cfg.joint_orders.items() if isinstance(v, list)}
    return {
        "dof_names": list(spec.joint_names),
        "kp": [float(x) for x in spec.kp[p2r]],
        "kd": [float(x) for x in spec.kd[p2r]],
        "action_scale": [float(x) for x in spec.scale],
        "default_joint_pos": [float(x) for x in spec.default_policy],
        "joint_orders": orders,
        "observation_layout": spec.layout(),
        "history": {"length": spec.cfg.history.length, "layout": spec.cfg.history.layout,
                    "fill": spec.cfg.history.fill, "order": spec.cfg.history.order},
        "rate_hz": spec.cfg.rate_hz,
        "spec_name": spec.cfg.name,
        "spec_version": SPEC_VERSION,
        "spec_sha256": hashlib.sha256(Path(spec.file).read_bytes()).hexdigest(),
    }


def export_onnx(model: Student, path: str | Path, metadata: Mapping, *, input_name: str = "frames",
                output_name: str = "action") -> Path:
    """Export ``model`` to ONNX (input ``frames`` (1, H, D) float32, output ``action`` (1, n)).

    Args:
        model: the student (put in eval mode; its weights are not changed).
        path: output ``.onnx`` file (parent created).
        metadata: ``metadata_props`` (non-string values stored as JSON).

    Returns:
        The path.

    Raises:
        ModuleNotFoundError: ``onnx`` is not installed (the ``[train]`` extra).
        onnx.checker.ValidationError: the exported graph is not valid ONNX (a bug).
    """
    import onnx

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    was_training = model.training
    model.eval()
    x = torch.zeros(1, model.history, model.frame_dim)
    x[..., model.k0:model.k1] = 100.0
    try:
        with replaced_atomically(path, ".tmp.onnx") as tmp:  # a deployed file is replaced whole, once checked
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice (no onnxscript needed)
                torch.onnx.export(model, (x,), str(tmp), input_names=[input_name], output_names=[output_name],
                                  opset_version=ONNX_OPSET, dynamo=False, do_constant_folding=True)
            m = onnx.load(str(tmp))
            m.producer_name = "contactflow.lac.train"
            del m.metadata_props[:]
            for k, v in metadata_strings(metadata).items():
                p = m.metadata_props.add()
                p.key, p.value = k, v
            onnx.checker.check_model(m)
            onnx.save(m, str(tmp))
    finally:
        model.train(was_training)
    return path


#: The keys of :func:`deploy_metadata` (the deploy contract of an exported student); the members of an ensemble must
#: agree on every one (:func:`ensemble_onnx`). ``tests/test_lac_train.py`` checks that the two lists are the same.
DEPLOY_METADATA_KEYS = ("dof_names", "kp", "kd", "action_scale", "default_joint_pos", "joint_orders",
                        "observation_layout", "history", "rate_hz", "spec_name", "spec_version", "spec_sha256")

def metadata_strings(metadata: Mapping) -> dict[str, str]:
    """``metadata`` as ONNX ``metadata_props`` store it (:func:`export_onnx`): strings as they are, other values as JSON."""
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()}


def read_metadata(path: str | Path) -> dict[str, str]:
    """An ONNX file's ``metadata_props`` as stored (strings; :func:`metadata_strings`), without loading external data.

    Raises:
        OSError: the file cannot be read; onnx's errors for a file that is not a model."""
    import onnx

    return {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}


def deploy_contract_mismatch(meta: Mapping[str, str], reference: Mapping[str, str]) -> str | None:
    """The first key of :data:`DEPLOY_METADATA_KEYS` whose stored value differs between two ONNX metadata maps
    (strings, as ``metadata_props`` hold them; a key missing from ``meta`` differs); ``None``: one deploy contract."""
    return next((k for k in DEPLOY_METADATA_KEYS if meta.get(k) != reference.get(k)), None)


#: The metadata of :func:`contactflow.lac.train.dagger.export_checkpoint` stored as JSON (the others are strings).
_JSON_RECORD_KEYS = ("train_round", "train_rounds_averaged", "train_config", "dataset", "dataset_seed")


def ensemble_onnx(members: Sequence[str | Path], path: str | Path, *, input_name: str = "frames",
                  output_name: str = "action") -> Path:
    """Write one deploy ONNX whose action is the mean of the actions of ``members`` (students exported by
    ``contactflow lac export``, e.g. runs of ``contactflow lac train`` with other seeds): the same input
    ``frames`` (1, 64, 95) float32 goes to every member's graph (each with its own log-stiffness,
    normaliser, encoder and actor), and ``action`` (1, 23) = ``Mean`` of their outputs. An ensemble of
    independently trained students averages what each got wrong differently (a bagged predictor,
    Breiman, 1996); the deploy I/O is unchanged, the inference cost is the sum of the members'.

    Metadata: the members' deploy metadata (:data:`DEPLOY_METADATA_KEYS`, equal in all of them); ``training``
    (what this is); ``ensemble_members``, per member: ``file`` (name), ``sha256`` (of the file), and its
    ``training``, ``train_round``, ``train_rounds_averaged``, ``train_config``, ``dataset``, ``dataset_seed``,
    ``git_revision`` where it has them (the provenance stays per member: no single training configuration is
    the ensemble's).

    Args:
        members: two or more ``.onnx`` paths.
        path: the output ``.onnx`` (parent created).
        input_name, output_name: the one input and the one output every member must have.

    Returns:
        The path.

    Raises:
        ConfigError: fewer than two members; a member that is not readable ONNX, has another input or output
            than ``input_name`` / ``output_name``, local functions or sparse initializers (not written by the
            export), is already an ensemble, has the graph of another member (the same student twice), lacks
            deploy metadata, or differs from the first member in a deploy-metadata key or in its opsets (each
            naming the file, and the key).
        ModuleNotFoundError: ``onnx`` is not installed (the ``[train]`` extra).
        onnx.checker.ValidationError: the combined graph is not valid ONNX (a bug).
    """
    import onnx
    from onnx import compose, helper

    from contactflow.errors import ConfigError

    members = [Path(m) for m in members]
    if len(members) < 2:
        raise ConfigError(f"an ensemble needs two or more students, got {len(members)}")
    models, metas, seen = [], [], {}
    for m in members:
        try:
            model = onnx.load(str(m))
        except Exception as exc:  # noqa: BLE001 - onnx raises several types for a bad file: name it
            raise ConfigError(f"{m}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
        g = model.graph
        if [i.name for i in g.input] != [input_name] or [o.name for o in g.output] != [output_name]:
            raise ConfigError(f"{m}: expected one input {input_name!r} and one output {output_name!r}, got "
                              f"{[i.name for i in g.input]} -> {[o.name for o in g.output]}")
        if len(model.functions) or len(g.sparse_initializer):
            raise ConfigError(f"{m}: local functions or sparse initializers are not supported in an ensemble member")
        digest = hashlib.sha256(g.SerializeToString()).hexdigest()  # the graph: weights, not metadata
        if digest in seen:
            raise ConfigError(f"{m}: the same student as {seen[digest]}: an ensemble's members are different students")
        seen[digest] = m
        meta = {p.key: p.value for p in model.metadata_props}
        if "ensemble_members" in meta:
            raise ConfigError(f"{m}: already an ensemble: give its members instead")
        missing = [k for k in DEPLOY_METADATA_KEYS if k not in meta]
        if missing:
            raise ConfigError(f"{m}: no deploy metadata {missing} (not exported by contactflow lac export)")
        if metas:
            k = deploy_contract_mismatch(meta, metas[0])
            if k is not None:
                raise ConfigError(f"{m}: metadata {k!r} differs from {members[0]}'s: not one deploy contract")
            if model.opset_import != models[0].opset_import:
                raise ConfigError(f"{m}: opset {list(model.opset_import)} differs from {members[0]}'s")
        models.append(model)
        metas.append(meta)
    nodes, inits, infos, outs = [], [], [], []
    for i, model in enumerate(models):
        pre = f"member{i}/"
        g = compose.add_prefix(model, pre, rename_inputs=False).graph
        for node in g.node:  # onnx < 1.19 also prefixes the graph input where a node reads it
            node.input[:] = [input_name if x == pre + input_name else x for x in node.input]
        nodes += g.node
        inits += g.initializer
        infos += g.value_info
        outs.append(g.output[0].name)
    nodes.append(helper.make_node("Mean", outs, [output_name], name="ensemble_mean"))
    g0 = models[0].graph
    graph = helper.make_graph(nodes, "contactflow_lac_student_ensemble", [g0.input[0]], [g0.output[0]],
                              initializer=inits, value_info=infos)
    out = helper.make_model(graph, opset_imports=models[0].opset_import, producer_name="contactflow.lac.train")
    out.ir_version = max(m.ir_version for m in models)

    def record(meta: dict) -> dict:
        return {k: (json.loads(meta[k]) if k in _JSON_RECORD_KEYS else meta[k])
                for k in ("training", *_JSON_RECORD_KEYS, "git_revision") if k in meta}

    members_record = [{"file": m.name, "sha256": hashlib.sha256(m.read_bytes()).hexdigest(), **record(meta)}
                      for m, meta in zip(members, metas)]
    props = {k: metas[0][k] for k in DEPLOY_METADATA_KEYS}
    props["training"] = f"ensemble (mean action) of {len(models)} students of contactflow lac train"
    props["ensemble_members"] = members_record
    for k, v in metadata_strings(props).items():
        p = out.metadata_props.add()
        p.key, p.value = k, v
    onnx.checker.check_model(out)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(out, str(path))
    return path
