"""lac_policy node: a learned joint-position policy (ONNX, onnxruntime) under a YAML I/O spec.

Inputs:  ``sensors`` (``sensors``, tick k): joint state, IMU;
         ``command`` (``teleop_command``, tick k): base velocity, height, waist yaw, arm
         references, 5-D stiffness (the fields the spec reads).
         ``heartbeat`` (OPTIONAL, a dora timer such as ``dora/timer/millis/5``): the keep-alive: with a
         wall-clock driver the newest command is re-sent (``repeat``) on each of its events between
         ticks, so the driver's command watchdog hears from a live controller every few ms
         (``_runtime.KeepAlive``).
Outputs: ``command`` (``joint_command``, PD robots): ``q_target``, ``kp``, ``kd``, ``tau_ff``, ``ok``
         in robot joint order.

``--spec`` names the policy I/O spec: a bare name under ``robots/*/policies/`` (``lac``,
``holosoma_g1_29dof_loco``) or a YAML file; ``--model`` overrides the spec's ONNX file, and the
environment variable ``CONTACTFLOW_POLICY_MODEL`` overrides both (so a graph runs another checkpoint
without editing it). A relative ``--spec``/``--model`` path is looked up from the working directory
(a graph's directory), then from the repository root; a missing file is reported with every place
looked in. No LAC checkpoint is public: ``lac`` needs a model given this way
(``docs/lac_teleop.md``). The spec is checked against the model and the robot BEFORE the node
connects to dora: a wrong shape, an unknown observation term or a joint-name mismatch ends the node
with one line naming the files.

The graph's tick is the robot file's ``control_rate_hz``; a policy slower than the tick acts
every N ticks and resends its last command in between. An output that is non-finite or outside
the joint limits is not sent: the last safe command goes out with ``ok = 0`` (logged, counted);
so does a tick whose input message was malformed. Library: :mod:`contactflow.policy`.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from contactflow.nodes._runtime import KeepAlive, base_parser, connect, drain_after_finish, lockstep_for, node_main, sender_for

log = logging.getLogger("contactflow.lac_policy")


class _Keep(logging.Handler):
    """Keeps the INFO lines logged while the spec and its model are loaded."""

    def __init__(self):
        super().__init__(level=logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def main() -> int:
    from contactflow.errors import ConfigError
    from contactflow.contracts.messages import port_specs
    from contactflow.policy import PolicyRunner, load_policy_spec
    from contactflow.policy.spec import spec_robot
    from contactflow.robot import load_robot

    p = base_parser(__doc__.splitlines()[0], "lac_policy")
    p.add_argument("--spec", required=True, help="policy I/O spec: YAML file or name under robots/*/policies/ (--robot defaults to the robot the spec names)")
    p.add_argument("--model", default=None, help="ONNX file overriding the spec's model ($CONTACTFLOW_POLICY_MODEL overrides it)")
    p.add_argument("--realtime", action="store_true", help="skip ticks whose messages were dropped")
    args = p.parse_args()
    if args.config:
        raise ConfigError(f"--config {args.config}: lac_policy takes its configuration from --spec")

    robot_name = args.robot
    if robot_name is None:  # the robot the spec names
        robot_name = spec_robot(args.spec)
        if robot_name is None:
            raise ConfigError(f"{args.spec}: no 'robot' in the spec; give --robot")
    robot = load_robot(robot_name)
    if robot.actuation != "pd":
        raise ConfigError(f"{robot.file_label()}: lac_policy sends PD joint commands; the robot has actuation {robot.actuation!r}")
    specs = port_specs(robot)
    tick_s = 1.0 / specs["joint_command"].rate_hz
    fetch_lines = _Keep()  # the model download's log (before dora connects), forwarded to dora's log below
    logging.getLogger("contactflow.policy").addHandler(fetch_lines)
    try:
        spec = load_policy_spec(args.spec, robot, model=os.environ.get("CONTACTFLOW_POLICY_MODEL") or args.model)
    finally:
        logging.getLogger("contactflow.policy").removeHandler(fetch_lines)
    runner = PolicyRunner(spec, tick_period_s=tick_s)
    log.info("policy %s: model %s, %d Hz (every %d ticks), frame %d x history %d, terms %s", spec.cfg.name,
             spec.model.path, round(spec.cfg.rate_hz), runner.decimation, spec.frame_dim, spec.cfg.history.length,
             ", ".join(f"{r['label']}[{r['dim']}]" for r in spec.layout()))

    node = connect()
    # through dora's log (INFO) as well: `dora run --log-level info` hides the nodes' raw output
    for line in fetch_lines.lines + [f"policy {spec.cfg.name}: model {spec.model.path}"]:
        try:
            node.log_info(line)
        except Exception:  # noqa: BLE001 - an older dora without node logging: stderr has it already
            break
    config = {"spec": str(spec.file), "model": str(spec.model.path), "robot": robot.name, "decimation": runner.decimation,
              "layout": spec.layout(), "command_fields": list(spec.command_fields)}
    sender = sender_for(node, "lac_policy", specs, config)
    lock = lockstep_for(node, "lac_policy", specs, dt=tick_s, skip_missing=args.realtime,
                        heartbeat=KeepAlive.if_wired(node, sender, "lac_policy"))
    infer = []
    for tick in lock:
        out = runner.step(tick.inputs["sensors"], tick.inputs["command"])
        if out.acted and out.ok:
            infer.append(out.diagnostics["obs_time_s"] + out.diagnostics["infer_time_s"])
        sender.send("command", out.command, seq=tick.k, t=tick.t, finished=tick.finished)
    if infer:
        log.info("policy %s: %d policy steps, observation + inference %.3f ms mean, %.3f ms max; %d output(s) refused",
                 spec.cfg.name, len(infer), 1e3 * float(np.mean(infer)), 1e3 * float(np.max(infer)), runner.n_rejected)
    if lock.finished_seen:
        drain_after_finish(node)
    return 0


if __name__ == "__main__":
    node_main("lac_policy", main)
