"""Simulation of the robot (MuJoCo), built at run time from the robot description.

* :mod:`contactflow.sim.mujoco_model`: ``build_mujoco_spec`` / ``build_mujoco_model`` (recipe of
  ``shared/reference/talos_mujoco.md``), ``PointMass`` payloads, the pitfall-M3 stability check.
* :mod:`contactflow.sim.mujoco_robot`: ``MujocoRobotSim`` (``reset`` / ``step``), ``SimConfig``
  and ``SensorReadings`` in pinocchio conventions.

Nothing is imported here, so ``import contactflow.sim`` does not load MuJoCo.
"""
