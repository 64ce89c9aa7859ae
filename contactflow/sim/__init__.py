"""Simulation of the robot (MuJoCo), built at run time from the robot description.

* :mod:`contactflow.sim.mujoco_model`: the one MuJoCo builder (``build_mujoco_spec`` /
  ``build_mujoco_model``) for every robot, ``PointMass`` payloads, the pitfall-M3 stability check.
* :mod:`contactflow.sim.state`: the one pinocchio <-> MuJoCo state converter (``StateMap``,
  joints by name; ``pin_to_mj_qpos``).
* :mod:`contactflow.sim.mujoco_robot`: ``MujocoSimBase`` (readings, falls, wrenches),
  ``MujocoRobotSim`` (position robots: Talos), ``SimConfig`` and ``SensorReadings`` in pinocchio
  conventions.
* :mod:`contactflow.sim.pd_robot`: ``PDRobotSim`` (PD robots: Unitree G1 23/29 DoF; the
  ``MotorCmd`` PD law at every physics step), ``PDSimConfig``.
* :mod:`contactflow.sim.driver`: ``RobotDriver``, the logic of the ``mujoco_driver`` node.
* :mod:`contactflow.sim.g1_mujoco`: ``build_g1_model``, the LAC tools' view of the G1 model.

Nothing is imported here, so ``import contactflow.sim`` does not load MuJoCo.
"""
