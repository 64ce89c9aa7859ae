"""LAC compliant-motion augmentation on the 23-DoF Unitree G1 (LAC §III-B, Algorithm 1).

Modules: ``config`` (Table II dataclasses, stiffness checks), ``model`` (upper-body links,
Jacobians, capsules), ``contact_frames`` (library, synthetic generator, clip loader), ``events``
(profile, eqs. (2)-(3), curriculum bins), ``ik`` (eq. (11) QP), ``synthesis`` (eqs. (4)-(10),
gates, Algorithm 1), ``dataset`` (Parquet), ``augment`` (sharded driver), ``inspect``, ``cli``.
"""
