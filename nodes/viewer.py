"""viewer node: shows the run in rerun (robot meshes, contact wrenches, effector targets, tracking plots).

Inputs: ``sensors`` (contract ``sensors``), optional ``desired`` (``desired``) and
``controller_state`` (``controller_state``). Outputs: none. The viewer is an observer, not a
lockstep stage: wire its inputs with small ``drop_oldest`` queues (``queue_size: 10``) so that it can
never hold back the 500 Hz loop; it logs one tick in ``--every`` per input, skipping messages that
arrive in between (and any that dora drops: its last line counts them as "never arrived"). Live in a spawned rerun viewer with ``--spawn`` when a
display is available (else it falls back to the file), streamed to a running viewer with
``--connect URL``, or saved to ``--rrd PATH`` (default ``<recordings>/<name>-<UTC time>.rrd``; a relative
``$CONTACTFLOW_RECORDINGS`` is refused there);
open a file later with ``rerun FILE.rrd``. Drawing: :class:`contactflow.recording.viewer.RerunLogger`.
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from contactflow.nodes._runtime import base_parser, connect, is_received_repeat, meta_seq, meta_time, node_main

log = logging.getLogger("contactflow.recording.viewer")

_HANDLERS = {"sensors": "log_sensors", "desired": "log_desired", "controller_state": "log_controller_state"}


def main() -> int:
    from contactflow.errors import ConfigError, ContactflowError, ContractError
    from contactflow.contracts.messages import port_specs
    from contactflow.contracts.ports import input_specs
    from contactflow.paths import default_recordings_dir
    from contactflow.robot import load_robot
    from contactflow.recording.store import SeqGaps
    from contactflow.recording.viewer import RerunLogger, display_available, open_recording

    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--rrd", default=None, help="write the .rrd file here (default <recordings>/<name>-<UTC time>.rrd)")
    p.add_argument("--name", default="view", help="prefix of the default .rrd file name")
    p.add_argument("--spawn", action="store_true", help="spawn a live rerun viewer if a display is available "
                   "(otherwise save to the .rrd file)")
    p.add_argument("--connect", default=None, help="stream to a running rerun viewer at this gRPC URL "
                   "(e.g. rerun+http://127.0.0.1:9876/proxy)")
    p.add_argument("--every", type=int, default=25, help="log one tick in N of each input (25: 20 Hz at 500 Hz)")
    p.add_argument("--force-scale-m-per-n", type=float, default=1e-3, help="wrench arrow length per newton [m/N]")
    p.add_argument("--no-meshes", action="store_true", help="draw links as boxes and axes instead of URDF meshes")
    args = p.parse_args()
    if args.every < 1:
        raise ConfigError(f"--every must be >= 1, got {args.every}")

    robot = load_robot(args.robot)
    specs = input_specs("viewer", port_specs(robot))  # input id -> contract (contactflow.contracts.ports)
    if args.connect:
        rec = open_recording(connect_url=args.connect)
        where = f"viewer at {args.connect}"
    else:
        rec = None
        if args.spawn:
            if display_available():
                try:
                    rec = open_recording(spawn=True)
                    where = "a spawned rerun viewer"
                except ContactflowError as exc:
                    log.warning("could not spawn a rerun viewer (%s): saving to a file instead", exc)
            else:
                log.warning("--spawn: no display (DISPLAY/WAYLAND_DISPLAY unset): saving to a file instead")
        if rec is None:
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
            where = args.rrd or str(default_recordings_dir(node=True) / f"{args.name}-{stamp}.rrd")
            rec = open_recording(where)
    logger = RerunLogger(robot, rec, force_scale_m_per_n=args.force_scale_m_per_n, meshes=not args.no_meshes)
    node = connect()
    print(f"[viewer] logging every {args.every} ticks to {where}", flush=True)

    last: dict[str, int] = {}  # input -> seq of the last logged message
    seen: dict[str, SeqGaps] = {}  # input -> its seqs received (from 0): the messages that never arrived
    n_logged = n_bad = n_lost = 0
    stop_deadline = None
    try:
        while True:
            ev = node.next(timeout=0.5)
            if ev is None:
                break
            typ = ev["type"]
            if typ == "STOP" and stop_deadline is None:
                stop_deadline = time.monotonic() + 0.5  # drain what is queued, briefly
            if stop_deadline is not None and time.monotonic() > stop_deadline:
                break
            if typ != "INPUT" or ev["id"] not in _HANDLERS:
                continue
            iid, md = ev["id"], ev["metadata"]
            seq = meta_seq(md)
            gaps = seen.setdefault(iid, SeqGaps(first=0))
            if is_received_repeat(md, gaps.last):
                continue  # a re-sent message already received (a keep-alive, a re-sent end of run)
            if seq is not None:  # a gap in seq: messages dora dropped on the way (drop_oldest queues)
                n_lost += gaps.add(seq)
            finished = bool(md.get("finished", False))
            if seq is not None and iid in last and seq - last[iid] < args.every and not finished:
                continue
            try:
                fields = specs[iid].decode(ev["value"])
                getattr(logger, _HANDLERS[iid])(fields, meta_time(md, 0.0), seq)
            except ContractError as exc:
                n_bad += 1
                if n_bad <= 5:
                    log.warning("input %r: message not shown: %s", iid, exc)
                continue
            if seq is not None:
                last[iid] = seq
            n_logged += 1
    finally:
        logger.close()
    print(f"[viewer] logged {n_logged} messages ({n_bad} malformed skipped, {n_lost} never arrived) to {where}",
          flush=True)
    return 0


if __name__ == "__main__":
    node_main("viewer", main)
