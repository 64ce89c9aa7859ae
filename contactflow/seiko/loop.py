"""The SEIKO pipeline in one process, tick by tick (no dora): the stages of the dataflow nodes,
fed the messages the nodes would receive (SEIKO RA-L 2024 §IV; seiko.md §7).

* :class:`SeikoPipeline`: the SEIKO part of one tick of ``dataflows/seiko_talos*.yml`` --
  admittance (14) (optional), input filter (8), Retargeting QP (9), Controller QP (11) -- from the
  ``sensors`` and ``operator_command`` of tick k to the ``effector_targets``, ``desired``,
  ``joint_command`` and ``controller_state`` of tick k. It runs the very stage objects of the
  nodes (:mod:`contactflow.seiko.stages`); the fused node ``nodes/seiko_stack.py`` is a thin
  adapter around it.
* :func:`run_loop`: the closed loop of a graph in one process: scenario player (the ``operator``
  node), :class:`SeikoPipeline`, and the simulated robot with its command safety
  (:class:`contactflow.sim.driver.RobotDriver`, the ``mujoco_driver`` node). With ``lag`` equal to
  the graph's ``--lag`` it computes what the lockstep graph computes, bit for bit
  (``tests/test_seiko_loop.py``). Used by the paper-claim tests and the benchmarks.

Timing within a tick, as in the lockstep graph: the operator command of tick k comes from the
scenario at t_k = k dt (``dt`` = 2 ms; the sensors' time is k dt up to rounding); the input filter
is centred on the desired poses of tick k - lag; the Retargeting uses the targets and command of
tick k; the Controller uses the sensors of tick k (k - 1 with ``sensor_lag`` 1) and the Retargeting
output of tick k - lag; the
admittance (when on) the sensors of tick k and the desired of tick k - 1 (as
``nodes/admittance.py``); the robot then simulates [t_k, t_k+1) under the Controller's command.
After the operator's last tick only the Controller runs, ``lag`` more ticks
(:meth:`SeikoPipeline.tail_tick`), as in the split graph.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from pathlib import Path
from types import ModuleType
from typing import Callable, Mapping, Sequence

import numpy as np

from contactflow.errors import ConfigError

__all__ = ["DT_S", "PipelineTick", "SeikoPipeline", "LoopLog", "SeikoLoop", "run_loop"]

DT_S = 0.002
"""SEIKO control period [s] (500 Hz)."""


@dataclasses.dataclass
class PipelineTick:
    """Outputs of one :meth:`SeikoPipeline.tick` (message values, ``dict`` field -> array).

    Attributes:
        targets: ``effector_targets`` of tick k.
        desired: ``desired`` of tick k (views into ``desired_vec``).
        desired_vec: the packed ``desired`` message of tick k (float64).
        command: ``joint_command`` of tick k (the last safe command when the Controller QP failed).
        state: ``controller_state`` of tick k.
        admittance: ``admittance_command`` of tick k, or None without admittance.
        delayed_finished: the ``finished`` flag of the tick whose ``desired`` the Controller used
            (k - lag): the Controller's outputs end the run ``lag`` ticks after the operator.
    """

    targets: dict
    desired: dict
    desired_vec: np.ndarray
    command: dict
    state: dict
    admittance: dict | None
    delayed_finished: bool


class SeikoPipeline:
    """The SEIKO stages of one tick, in one process, as the split graph's nodes run them.

    Args:
        robot: the :class:`contactflow.robot.Robot`.
        filter_config: :class:`contactflow.operator.input_filter.InputFilterConfig` (default: defaults).
        retargeting_config: :class:`contactflow.seiko.retargeting.RetargetingConfig` (default: defaults).
        controller_config: :class:`contactflow.seiko.controller.ControllerConfig` (default: defaults).
        environment: surfaces for the Retargeting's enable-distance check, or None.
        lag: ticks between the Retargeting output used by the input filter and the Controller and
            the current tick (the nodes' ``--lag``; >= 1 since the stages run in order).
        admittance: effector -> :class:`contactflow.seiko.admittance.AdmittanceParams` for the
            admittance (14) of those effectors (``nodes/admittance.py``), or None (no admittance).
        wrench_lag: None: the Controller's own complementary filter (13); 0 or 1: the filter as
            its own stage (:class:`~contactflow.seiko.stages.WrenchFilterStage`, ``nodes/wrench_filter.py``)
            fed the sensors of tick k and the Controller's ``flex_rate`` of tick k - 1, its output of
            tick k - ``wrench_lag`` used by the Controller (``seiko_controller --wrench-lag``).
        stages: a module with ``InputFilterStage``, ``RetargetingStage`` and ``ControllerStage`` of
            the same contracts (default :mod:`contactflow.seiko.stages`; a benchmark passes an older
            version of the package to time it in the same loop). With it, pass the three configs
            of that version.
        sensor_lag: 0: the Controller uses the sensors of tick k; 1: those of tick k - 1 (None at
            tick 0: its reset readings), as ``seiko_controller --sensor-lag 1``: the command is applied
            one period after the state it answers, as on a robot, and in a lockstep graph the
            Controller computes beside the driver's step instead of after it.
        controller: False builds no Controller (and no wrench filter): the pipeline is the planner
            of the real-time graph (``seiko_stack --no-controller``), run with :meth:`plan` only, while
            the Controller runs in its own process.

    Attributes:
        filter, retargeting, controller (None with ``controller=False``), wrench_filter (or None): the stage objects (``retargeting.failures``,
            ``controller.failures`` count the failed QPs); admittance: the
            :class:`~contactflow.seiko.stages.AdmittanceStage` or None.
        times: (3,) wall time of the last tick [s]: input filter (and admittance), Retargeting,
            Controller (and the wrench filter) (``time.perf_counter``).

    Raises:
        ConfigError: ``lag`` < 1, ``wrench_lag`` not None, 0 or 1, ``sensor_lag`` not 0 or 1, a config
            missing with ``stages``, an unknown admittance effector, a config whose ``dt_s`` is not
            :data:`DT_S`.
    """

    def __init__(self, robot, *, filter_config=None, retargeting_config=None, controller_config=None,
                 environment=None, lag: int = 2, admittance: Mapping | None = None, wrench_lag: int | None = None,
                 stages: ModuleType | None = None, sensor_lag: int = 0, controller: bool = True):
        from contactflow.contracts.messages import port_specs

        if int(lag) < 1:
            raise ConfigError(f"lag must be >= 1 (the stages run in order within a tick), got {lag}")
        if sensor_lag not in (0, 1):
            raise ConfigError(f"sensor_lag must be 0 or 1, got {sensor_lag}")
        self.sensor_lag = int(sensor_lag)
        self._sensors_prev = None  # sensor_lag 1: the sensors of tick k - 1
        if wrench_lag not in (None, 0, 1):
            raise ConfigError(f"wrench_lag must be None, 0 or 1, got {wrench_lag}")
        if stages is None:
            from contactflow.operator.input_filter import InputFilterConfig
            from contactflow.seiko import stages
            from contactflow.seiko.controller import ControllerConfig
            from contactflow.seiko.retargeting import RetargetingConfig

            filter_config = filter_config or InputFilterConfig()
            retargeting_config = retargeting_config or RetargetingConfig()
            controller_config = controller_config or ControllerConfig()
        elif None in (filter_config, retargeting_config, controller_config):
            raise ConfigError("SeikoPipeline: with `stages`, pass filter_config, retargeting_config and controller_config")
        from contactflow.seiko.config_checks import require_period

        require_period((filter_config, retargeting_config, controller_config), DT_S, "the in-process loop's period")
        self.robot = robot
        self.lag = int(lag)
        self.dspec = port_specs(robot)["desired"]
        self.filter = stages.InputFilterStage(robot, filter_config)
        self.retargeting = stages.RetargetingStage(robot, retargeting_config, environment)
        self.controller = stages.ControllerStage(robot, controller_config, retargeting_config) if controller else None
        self.wrench_lag = wrench_lag
        self.wrench_filter = (None if wrench_lag is None or not controller
                              else stages.WrenchFilterStage(robot, controller_config))
        self._flex_rate = None  # the Controller's flex_rate of tick k - 1
        self._filtered_prev = None  # the wrench filter's output of tick k - 1
        self.admittance = None
        if admittance:
            from contactflow.seiko.stages import AdmittanceStage

            self.admittance = AdmittanceStage(robot, admittance)
        # (tick, desired fields, finished) of ticks k - lag .. k - 1
        self._past: collections.deque = collections.deque(maxlen=self.lag)
        self.times = np.zeros(3)
        self._t_retarget = 0.0  # perf_counter() when the tick's Retargeting began

    def tick(self, k: int, t: float, sensors: Mapping | None, command: Mapping | None, *,
             command_error: str | None = None, finished: bool = False, integrating: bool = True,
             t_start: float | None = None, on_command: Callable[[dict, dict, bool], None] | None = None,
             skipped_commands: Sequence[Mapping | None] = ()) -> PipelineTick:
        """One tick.

        The Controller runs first: with ``lag`` >= 1 it does not depend on this tick's input filter
        and Retargeting (nor they on it), so the order changes no result, and a node can send the
        command (``on_command``) before the Retargeting runs: the command's latency is the
        Controller's alone.

        Args:
            k: tick index. t: its time [s].
            sensors: ``sensors`` values of tick k (None: the Controller keeps its last readings).
            command: ``operator_command`` values of tick k (None: no operator input this tick).
            command_error: why the operator command of this tick was unusable (logged by the
                Retargeting stage), or None.
            finished: the tick's ``finished`` flag (end of the scenario), returned ``lag`` ticks
                later as :attr:`PipelineTick.delayed_finished`.
            integrating: False runs the Controller in shadow (``ControllerStage.tick``).
            t_start: ``time.perf_counter()`` at the start of the tick (the state's ``solve_time``).
            on_command: ``on_command(command, state, delayed_finished)`` called as soon as the
                Controller's outputs of the tick exist, before the input filter and the Retargeting
                run (``delayed_finished``: :attr:`PipelineTick.delayed_finished` of the tick).
            skipped_commands: real time: the ``operator_command`` values of the ticks skipped before
                this one, oldest first (``Tick.skipped``; None: none for that tick): the input filter
                steps once with each before this tick's, as ``input_filter --realtime`` does.

        Returns:
            :class:`PipelineTick`.
        """
        if self.controller is None:
            raise RuntimeError("SeikoPipeline(controller=False) runs plan() only")
        past = self._past
        t0 = time.perf_counter() if t_start is None else t_start
        delayed, delayed_fin = past[0][1:] if len(past) == self.lag else (None, False)
        adm = None
        if self.admittance is not None:
            adm = self.admittance.tick(sensors, past[-1][1] if past else None)
        t1 = time.perf_counter()
        cmd, state = self._control(k, sensors, delayed, t0, integrating)
        t2 = time.perf_counter()
        if on_command is not None:
            on_command(cmd, state, delayed_fin)
        t3 = time.perf_counter()
        targets, desired, dvec = self._plan(k, t, command, delayed, adm, command_error, finished, skipped_commands)
        self.times[:] = ((t1 - t0) + (self._t_retarget - t3), time.perf_counter() - self._t_retarget, t2 - t1)
        return PipelineTick(targets, desired, dvec, cmd, state, adm, delayed_fin)

    def plan(self, k: int, t: float, command: Mapping | None, *, command_error: str | None = None,
             finished: bool = False, skipped_commands: Sequence[Mapping | None] = ()) -> PipelineTick:
        """The input filter and the Retargeting of tick k, without the Controller (the planner of
        the real-time graph, ``seiko_stack --no-controller``): :meth:`tick` less the Controller, the
        admittance and the wrench filter. The arguments are those of :meth:`tick`.

        Returns:
            :class:`PipelineTick` with ``command``, ``state`` and ``admittance`` None.
        """
        t0 = time.perf_counter()
        past = self._past
        delayed = past[0][1] if len(past) == self.lag else None
        targets, desired, dvec = self._plan(k, t, command, delayed, None, command_error, finished, skipped_commands)
        self.times[:] = (self._t_retarget - t0, time.perf_counter() - self._t_retarget, 0.0)
        return PipelineTick(targets, desired, dvec, None, None, None, False)

    def _plan(self, k, t, command, delayed, adm, command_error, finished, skipped_commands):
        for held in skipped_commands:
            self.filter.tick(held, delayed, adm)
        targets = self.filter.tick(command, delayed, adm)
        self._t_retarget = time.perf_counter()
        dvals = self.retargeting.tick(k, t, targets, command, command_error)
        dvec = self.dspec.pack(dvals)  # a copy: the next ticks read it while the Retargeting moves on
        desired = self.dspec.unpack(dvec, check_finite=False)
        self._past.append((k, desired, bool(finished)))
        return targets, desired, dvec

    def tail_tick(self, k: int, sensors: Mapping | None, *, integrating: bool = True,
                  t_start: float | None = None) -> PipelineTick:
        """A tick after the operator's last one (the end of a run): the input filter and the
        Retargeting have ended (as the split graph's nodes after the ``finished`` command) and the
        Controller runs on, on the ``desired`` of tick k - lag, until the one carrying ``finished``
        (:attr:`PipelineTick.delayed_finished`). Its ``targets``, ``desired``, ``admittance`` are None.
        """
        past = self._past
        t0 = time.perf_counter() if t_start is None else t_start
        # the newest desired of a tick <= k - lag (in lockstep exactly k - lag; in real time ticks are
        # skipped): a `finished` among those passed over still ends the run
        delayed, delayed_fin = None, False
        while past and past[0][0] <= k - self.lag:
            _, delayed, fin = past.popleft()
            delayed_fin = delayed_fin or fin
        cmd, state = self._control(k, sensors, delayed, t0, integrating)
        self.times[:] = (0.0, 0.0, time.perf_counter() - t0)
        return PipelineTick(None, None, None, cmd, state, None, delayed_fin)

    def _control(self, k, sensors, delayed, t0, integrating):
        if self.sensor_lag:  # the wrench filter (its own node) keeps the sensors of tick k
            sensors, self._sensors_prev, current = self._sensors_prev, sensors, sensors
        else:
            current = sensors
        if self.wrench_filter is None:
            kw = {} if integrating else {"integrating": False}  # (an older stage may not take it)
            return self.controller.tick(k, sensors, delayed, t_start=t0, **kw)
        filtered = self.wrench_filter.tick(current, self._flex_rate)
        if self.wrench_lag == 1:
            filtered, self._filtered_prev = self._filtered_prev, filtered
        out = self.controller.tick(k, sensors, delayed, t_start=t0, integrating=integrating, filtered=filtered)
        self._flex_rate = self.controller.flex_rate_values()
        return out


@dataclasses.dataclass
class LoopLog:
    """What :func:`run_loop` records, one row per simulated tick (T rows).

    Attributes:
        t: (T,) simulated time at the end of the tick [s].
        q: (T, nq) measured configuration. gyro: (T, 3) pelvis IMU rate [rad/s].
        tau: (T, n) measured joint torques [N m]. tau_limit: (T, n) the Controller's torque limits (12) [N m].
        fell: the robot fell (the run stopped there).
        wrench: plane effector -> (T, 6) measured sole wrench [N, N m] (LOCAL).
        pose_d: effector -> (T, 3) the Retargeting's desired world position [m] at tick k (the
            output the Controller uses at tick k + lag).
        stage_s: (T, 3) wall time per tick [s] of the input filter (+ admittance), the Retargeting
            and the Controller stage.
        wall_s: wall time of the ticks [s] (scenario, stages, simulation; the recording included).
        retargeting_failures, controller_failures: failed QPs (a safe output was used).
        rejected_commands: commands the robot's command safety did not apply (held the last one).
    """

    t: np.ndarray
    q: np.ndarray
    gyro: np.ndarray
    tau: np.ndarray
    tau_limit: np.ndarray
    fell: bool
    wrench: dict = dataclasses.field(default_factory=dict)
    pose_d: dict = dataclasses.field(default_factory=dict)
    stage_s: np.ndarray | None = None
    wall_s: float = 0.0
    retargeting_failures: int = 0
    controller_failures: int = 0
    rejected_commands: int = 0

    @property
    def realtime_factor(self) -> float:
        """Simulated seconds per wall second (1.0 = the 500 Hz loop in real time)."""
        return float(len(self.t) * DT_S / self.wall_s) if self.wall_s > 0 else float("nan")


class SeikoLoop:
    """The SEIKO closed loop in one process, one tick per :meth:`step`: scenario (the ``operator``
    node) -> :class:`SeikoPipeline` -> simulated robot with its command safety
    (:class:`contactflow.sim.driver.RobotDriver`, the ``mujoco_driver`` node). :func:`run_loop`
    runs one to its end; a benchmark may step two alternately.

    Args: as :func:`run_loop`.

    Attributes:
        pipeline, driver, n_ticks (ticks of the run), k (ticks done), done (the run ended: all
        ticks done or the robot fell), wall_s (wall time spent in :meth:`step` [s]).
    """

    def __init__(self, robot, scenario, *, ccfg=None, rcfg=None, fcfg=None, environment: bool = False,
                 disturb: Callable | None = None, controller_on: bool = True, duration_s: float | None = None,
                 sim_hook: Callable | None = None, extra_bodies: list | None = None, admittance: Mapping | None = None,
                 operator_hook: Callable | None = None, lag: int = 1, wrench_lag: int | None = None,
                 stages: ModuleType | None = None, sim_config=None, pipeline: SeikoPipeline | None = None,
                 sensor_lag: int = 0):
        from contactflow.environment import Environment, load_environment
        from contactflow.contracts.messages import port_specs
        from contactflow.operator.scenario import ScenarioPlayer, load_scenario
        from contactflow.seiko.estimation import JointTorqueForceEstimator
        from contactflow.seiko.stages import operator_command_values
        from contactflow.sim.driver import RobotDriver
        from contactflow.sim.mujoco_robot import sensor_values

        self._sensor_values, self._command_values = sensor_values, operator_command_values
        self.robot = robot
        env = load_environment(robot.raw.get("environment"), f"{robot.name}:environment") if environment else None
        scn = load_scenario(scenario, robot) if isinstance(scenario, (str, Path)) else scenario
        self.player = ScenarioPlayer(scn)
        self.player.reset()
        if pipeline is None:
            pipeline = SeikoPipeline(robot, filter_config=fcfg, retargeting_config=rcfg, controller_config=ccfg,
                                     environment=env if env is not None else Environment(),  # the floor, as the nodes
                                     lag=lag, admittance=admittance, wrench_lag=wrench_lag,
                                     stages=stages, sensor_lag=sensor_lag)
        self.pipeline = pipeline
        self.driver = RobotDriver(robot, sim_config, payloads=list(extra_bodies or ()), environment=env)
        if sim_hook is not None:
            sim_hook(self.driver.sim)
        self.estimators = {}
        if env is not None:
            for e, c in robot.contacts.items():
                if c.frame in env.force_joints:
                    self.estimators[e] = JointTorqueForceEstimator(robot.model, c.frame, env.force_joints[c.frame])
        self.sensor_fields = [f.name for f in port_specs(robot)["sensors"].fields]
        self.disturb, self.operator_hook, self.controller_on = disturb, operator_hook, controller_on
        self.readings = self.driver.reset()
        self.n_ticks = T = int(round((duration_s if duration_s is not None else scn.duration_s) / DT_S))
        self.effs = list(robot.contacts)
        self.planes = [e for e, c in robot.contacts.items() if c.type == "plane"]
        nq, nj = robot.model.nq, robot.n
        self._log = {"t": np.empty(T), "q": np.empty((T, nq)), "gyro": np.empty((T, 3)), "tau": np.empty((T, nj)),
                     "tau_limit": np.empty((T, nj)), "stage_s": np.empty((T, 3))}
        self._w_log = {e: np.empty((T, 6)) for e in self.planes}
        self._p_log = {e: np.empty((T, 3)) for e in self.effs}
        self.k = 0
        self.fell = False
        self.wall_s = 0.0

    @property
    def done(self) -> bool:
        return self.fell or self.k >= self.n_ticks

    def step(self) -> bool:
        """Run one tick (nothing once :attr:`done`); returns :attr:`done`."""
        if self.done:
            return True
        t0 = time.perf_counter()
        k, r, pipeline, robot = self.k, self.readings, self.pipeline, self.robot
        t = k * DT_S  # the tick's time, as the graph's operator (ahead mode) plays the scenario
        cmd = self.player.step(t, dt_s=DT_S)
        if self.operator_hook is not None:
            cmd = self.operator_hook(t, cmd, r)
        sensors = self._sensor_values(r, robot, fields=self.sensor_fields, estimators=self.estimators)
        out = pipeline.tick(k, t, sensors, self._command_values(robot, cmd), finished=cmd.finished,
                            integrating=self.controller_on)
        theta = (out.command if self.controller_on
                 else {"theta_cmd": np.array(pipeline.controller.desired["theta_ahead"])})
        self.driver.offer_command(theta, r.t)
        if self.disturb is not None:
            self.disturb(self.driver.sim, t)
        r, _ = self.driver.advance()
        self.readings = r
        log = self._log
        log["t"][k] = r.t
        log["q"][k] = r.q
        log["gyro"][k] = r.imu_gyro
        log["tau"][k] = r.tau
        log["tau_limit"][k] = out.state["tau_limit"]
        log["stage_s"][k] = pipeline.times
        for e in self.planes:
            self._w_log[e][k] = r.wrenches[e]
        for e in self.effs:
            self._p_log[e][k] = out.desired[f"pose_d.{e}"][:3]
        self.k = k + 1
        self.fell = bool(self.driver.status.fell)
        self.wall_s += time.perf_counter() - t0
        return self.done

    def log(self) -> LoopLog:
        """The :class:`LoopLog` of the ticks done so far."""
        i = self.k
        lg = {name: v[:i] for name, v in self._log.items()}
        return LoopLog(t=lg["t"], q=lg["q"], gyro=lg["gyro"], tau=lg["tau"], tau_limit=lg["tau_limit"], fell=self.fell,
                       wrench={e: v[:i] for e, v in self._w_log.items()}, pose_d={e: v[:i] for e, v in self._p_log.items()},
                       stage_s=lg["stage_s"], wall_s=self.wall_s, retargeting_failures=self.pipeline.retargeting.failures,
                       controller_failures=self.pipeline.controller.failures,
                       rejected_commands=self.driver.status.rejected_commands)


def run_loop(robot, scenario, *, ccfg=None, rcfg=None, fcfg=None, environment: bool = False,
             disturb: Callable | None = None, controller_on: bool = True, duration_s: float | None = None,
             sim_hook: Callable | None = None, extra_bodies: list | None = None, admittance: Mapping | None = None,
             operator_hook: Callable | None = None, lag: int = 1, wrench_lag: int | None = None,
             stages: ModuleType | None = None,
             sim_config=None, pipeline: SeikoPipeline | None = None, sensor_lag: int = 0) -> LoopLog:
    """Run the SEIKO closed loop in one process to its end (:class:`SeikoLoop`): scenario ->
    :class:`SeikoPipeline` -> simulated robot.

    Args:
        robot: the :class:`contactflow.robot.Robot` (position actuation: Talos).
        scenario: scenario file (``contactflow/operator/scenario.py`` format) or a loaded
            :class:`~contactflow.operator.scenario.Scenario`.
        ccfg, rcfg, fcfg: Controller, Retargeting, input filter configs (default: defaults).
        environment: add the robot file's ``environment:`` (walls, supports, hand force sensing and
            the right hand's joint-torque force estimate, SEIKO §6.7), as ``--environment`` on the
            driver and the Retargeting.
        disturb: ``disturb(sim, t)`` called before simulating each tick (external wrenches, mass
            changes; ``sim`` is the :class:`~contactflow.sim.mujoco_robot.MujocoRobotSim`; ``t``
            = k dt [s], the time the scenario is played at).
        controller_on: False sends the Retargeting's ahead posture ``theta_ahead`` (tick k - lag)
            instead of the Controller's command and runs the Controller in shadow.
        duration_s: simulated time [s] (default: the scenario's duration).
        sim_hook: ``sim_hook(sim)`` called once before the reset (e.g. change the compiled model).
        extra_bodies: unmodelled :class:`~contactflow.sim.mujoco_model.PointMass` es (simulation only).
        admittance: effector -> :class:`~contactflow.seiko.admittance.AdmittanceParams`: the
            admittance (14) on those effectors (as ``nodes/admittance.py`` in the multi-contact graph).
        operator_hook: ``operator_hook(t, cmd, reading) -> cmd`` may change the scenario's
            :class:`~contactflow.operator.scenario.OperatorCommand` of each tick from the latest
            :class:`~contactflow.sim.mujoco_robot.SensorReadings` (an operator model).
        lag: the nodes' ``--lag`` (``seiko_talos_multicontact.yml``: 1, the default; ``seiko_talos.yml``: 2).
        wrench_lag: see :class:`SeikoPipeline` (None: the Controller's own filter (13)).
        sensor_lag: the Controller's ``--sensor-lag`` (:class:`SeikoPipeline`).
        stages, sim_config: see :class:`SeikoPipeline`; the simulator's
            :class:`~contactflow.sim.mujoco_robot.SimConfig` (default: defaults).
        pipeline: a ready :class:`SeikoPipeline` (then ``ccfg``, ``rcfg``, ``fcfg``,
            ``admittance``, ``lag``, ``wrench_lag``, ``stages``, ``sensor_lag`` are not used).

    Returns:
        :class:`LoopLog` (the run stops at a fall).

    Raises:
        ConfigError, ModelError, ContractError: bad configuration or scenario (before the first tick).
    """
    loop = SeikoLoop(robot, scenario, ccfg=ccfg, rcfg=rcfg, fcfg=fcfg, environment=environment, disturb=disturb,
                     controller_on=controller_on, duration_s=duration_s, sim_hook=sim_hook, extra_bodies=extra_bodies,
                     admittance=admittance, operator_hook=operator_hook, lag=lag, wrench_lag=wrench_lag, stages=stages,
                     sim_config=sim_config, pipeline=pipeline, sensor_lag=sensor_lag)
    while not loop.step():
        pass
    return loop.log()
