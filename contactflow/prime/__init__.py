"""PRIME: physically consistent motion, contact-force and inertial-parameter estimation
(Kang, Ren, Pang, Xiong, RSS 2026) from recorded streams. See docs/prime.md.

Modules: :mod:`~contactflow.prime.inertia` (log-Cholesky), :mod:`~contactflow.prime.contact`
(smoothed contact step + IFT derivatives), :mod:`~contactflow.prime.fie` (MAP problem on
crocoddyl FDDP), :mod:`~contactflow.prime.model` (robot + prime.yaml),
:mod:`~contactflow.prime.datagen` (MuJoCo / self-consistent data, recordings),
:mod:`~contactflow.prime.io` (recordings in and out), :mod:`~contactflow.prime.ports`,
:mod:`~contactflow.prime.cli`. Submodules are imported on demand (crocoddyl is only needed by
``fie``).
"""
