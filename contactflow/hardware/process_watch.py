"""Notice at once that a controller process is dying (Linux ``/proc``), for the hardware driver.

A dataflow runtime reports a stopped node to its consumers after the kernel has torn the process
down (its memory freed: 20-35 ms for the ~190 MB ``lac_expert`` process on this loaded 2-core
machine, up to hundreds of ms under heavy load) and after it has routed the news (dora 1.1's
``INPUT_CLOSED``; ``benchmarks/bench_unitree_kill.py``). The kernel knows much earlier that the
process will not send again: a pending ``SIGKILL`` (``SigPnd`` / ``ShdPnd`` of
``/proc/<pid>/status``: it cannot be caught or undone) and the ``PF_EXITING`` flag (field 9 of
``/proc/<pid>/stat``, set as the process starts to exit, whatever the cause: a signal, an
uncaught exception, ``exit``) are visible from the first microseconds. :class:`ProcessMonitor`
reads both (``pread`` on descriptors opened once: ~20 us per check, ~110 us while the process
runs, on this loaded machine) and is polled by the driver's 500 Hz thread, so damping follows
within one ``rt/lowcmd`` period.

None of these signs is ever shown by a live process that goes on living, so the check cannot fire
on normal traffic (unlike a watchdog shorter than the command period). A hung process (stopped,
deadlocked) shows none of them: the command watchdog covers it. The process is found among the
driver's siblings (children of the same parent, the runtime's daemon) by an environment variable
the runtime sets for each node (:func:`find_child_with_env`); where it cannot be found (another
machine, another parent, no ``/proc``), nothing is watched and the runtime's own notice stays the
only one. The descriptors refer to that process itself: a pid reused after it was reaped reads as
"exited", never as another process. Linux only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["process_env", "find_child_with_env", "ProcessMonitor"]

log = logging.getLogger("contactflow.process_watch")

PF_EXITING = 0x4
"""``task_struct.flags`` bit of a process that has begun to exit (include/linux/sched.h)."""
_SIGKILL_BIT = 1 << (9 - 1)  # SIGKILL = 9; bit n-1 of the SigPnd/ShdPnd hexadecimal masks


def process_env(pid: int, proc: Path = Path("/proc")) -> dict[str, str] | None:
    """The environment of process ``pid`` (``/proc/<pid>/environ``), None if unreadable or gone."""
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def _parent(pid: int, proc: Path) -> int | None:
    try:
        # the command name (field 2) may hold spaces and parentheses: split after the last ')'
        return int((proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def find_child_with_env(ppid: int, var: str, match: Callable[[str], bool], *, exclude: int | None = None,
                        near: int | None = None, proc: Path = Path("/proc")) -> list[int]:
    """Pids of the children of ``ppid`` (except ``exclude``) whose environment variable ``var``
    exists and satisfies ``match``.

    With ``near`` (a pid), the processes are tried by increasing distance from it and the first
    match is returned alone: siblings started together have nearby pids, so a busy machine's
    hundreds of processes are not all read (a full scan took seconds at load 30 on 2 cores).
    """
    pids = [int(d.name) for d in proc.iterdir() if d.name.isdigit()]
    if near is not None:
        pids.sort(key=lambda p: abs(p - near))
    found = []
    for pid in pids:
        if pid == exclude or _parent(pid, proc) != ppid:
            continue
        env = process_env(pid, proc)
        if env is not None and var in env and match(env[var]):
            found.append(pid)
            if near is not None:
                break
    return sorted(found)


class ProcessMonitor:
    """Non-blocking "is this process dying?" from ``/proc`` (module docstring).

    Args:
        pid: the process. proc: the proc file system's mount point.

    Raises:
        OSError: the process does not exist (any more) or its ``/proc`` files cannot be read.
    """

    def __init__(self, pid: int, proc: Path = Path("/proc")):
        self.pid = int(pid)
        self._stat = os.open(proc / str(pid) / "stat", os.O_RDONLY)
        try:
            self._status = os.open(proc / str(pid) / "status", os.O_RDONLY)
        except OSError:
            os.close(self._stat)
            raise
        self.closed = False

    def dying(self) -> str:
        """'' while the process lives; else why it is known to be gone or going: ``exited`` (no
        longer readable, zombie or dead), ``exiting`` (PF_EXITING set), ``SIGKILL pending``. Poll it:
        between a fatal signal's delivery and PF_EXITING (microseconds, the process running on
        another core) it still reads ''."""
        if self.closed:
            return ""
        try:
            stat = os.pread(self._stat, 1024, 0)
        except OSError:  # ESRCH: reaped (the descriptors outlive the process, never another one)
            return "exited"
        if not stat:
            return "exited"
        fields = stat.rsplit(b")", 1)[1].split(None, 8)  # the command name may hold spaces and ')'
        if fields[0] in (b"Z", b"X", b"x"):
            return "exited"
        if int(fields[6]) & PF_EXITING:
            return "exiting"
        if fields[0] != b"R":  # a pending SIGKILL wakes the process (R) until it exits
            return ""
        try:  # the 8 KB status only for a running process (the common sleeping case reads stat alone)
            status = os.pread(self._status, 8192, 0)
        except OSError:
            return "exited"
        for key in (b"SigPnd:", b"ShdPnd:"):
            i = status.find(key)
            if i >= 0 and int(status[i + len(key):status.index(b"\n", i)].strip(), 16) & _SIGKILL_BIT:
                return "SIGKILL pending"
        return ""

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._stat)
            os.close(self._status)
