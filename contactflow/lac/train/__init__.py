"""``contactflow lac train``: a LAC-format student distilled from the model-based teacher (DAgger).

* :mod:`~contactflow.lac.train.config` -- every hyper-parameter (``robots/g1/lac_train.yaml``).
* :mod:`~contactflow.lac.train.env` -- the training episode on the G1 PD simulator, observation and
  action through the deploy :class:`~contactflow.policy.PolicyRunner`.
* :mod:`~contactflow.lac.train.teacher` -- ``LacExpert`` labels as LAC actions.
* :mod:`~contactflow.lac.train.student` -- the torch student and its ONNX export (needs ``[train]``).
* :mod:`~contactflow.lac.train.dagger` -- rollouts in worker processes, aggregation, training,
  checkpoints, logs.

torch is imported only by the student, DAgger and export modules.
"""
