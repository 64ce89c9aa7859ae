"""Cyclone DDS plumbing for the Unitree low-level topics, bound to one network interface.

Unitree's SDK selects the interface with a Cyclone XML configuration
(``<Domain Id="any"><General><Interfaces><NetworkInterface name="..."/>``); :func:`open_domain`
does the same. The robot is on domain 0 on its Ethernet interface; the emulator and the tests use
the loopback interface ``lo`` and any domain id (tests draw one at random to avoid cross-talk).

QoS: writers reliable (the DDS default), readers best-effort, both keep-last 1: the newest message
is the only one that matters in a 500 Hz control loop, and a best-effort reader matches both
best-effort and reliable writers.
"""

from __future__ import annotations

import re

from contactflow.errors import ConfigError

__all__ = ["cyclone_config", "UnitreeChannels"]

_DOMAINS: dict[int, tuple[object, str]] = {}  # one Cyclone Domain per id and process


def cyclone_config(interface: str) -> str:
    """The Cyclone XML configuration restricting DDS to ``interface`` (e.g. ``lo``, ``enp3s0``).

    Raises:
        ConfigError: an empty name or one with characters an interface name cannot hold.
    """
    if not interface or not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,64}", interface):
        raise ConfigError(f"network interface {interface!r}: expected a name such as 'lo' or 'enp3s0'")
    return (f'<CycloneDDS><Domain Id="any"><General><Interfaces><NetworkInterface name="{interface}" '
            f'priority="default" multicast="default"/></Interfaces></General></Domain></CycloneDDS>')


class UnitreeChannels:
    """One DDS participant with a reader and a writer of the Unitree low-level topics.

    Args:
        domain_id: DDS domain (0 on the robot network).
        interface: network interface (``lo`` for the emulator).
        read_topic, read_type: topic and IDL type read (driver: ``rt/lowstate``, ``LowState_``).
        write_topic, write_type: topic and IDL type written (driver: ``rt/lowcmd``, ``LowCmd_``).

    Attributes:
        reader, writer: the cyclonedds DataReader / DataWriter.

    Raises:
        ConfigError: bad interface name, or Cyclone DDS could not create the participant (the
            message names the domain and the interface).
    """

    def __init__(self, domain_id: int, interface: str, read_topic: str, read_type, write_topic: str, write_type):
        from cyclonedds.core import DDSException, Policy, Qos
        from cyclonedds.domain import Domain, DomainParticipant
        from cyclonedds.pub import DataWriter
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        self.domain_id, self.interface = int(domain_id), interface
        try:
            if self.domain_id in _DOMAINS:
                if _DOMAINS[self.domain_id][1] != interface:
                    raise ConfigError(f"DDS domain {domain_id} is already open on interface {_DOMAINS[self.domain_id][1]!r} "
                                      f"in this process, not {interface!r}")
            else:
                _DOMAINS[self.domain_id] = (Domain(self.domain_id, cyclone_config(interface)), interface)
            self.participant = DomainParticipant(self.domain_id)
            rq = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(1))
            wq = Qos(Policy.Reliability.Reliable(max_blocking_time=0), Policy.History.KeepLast(1))
            self.reader = DataReader(self.participant, Topic(self.participant, read_topic, read_type), qos=rq)
            self.writer = DataWriter(self.participant, Topic(self.participant, write_topic, write_type), qos=wq)
        except DDSException as exc:
            raise ConfigError(f"Cyclone DDS: cannot open domain {domain_id} on interface {interface!r}: {exc}") from None
        self.read_topic, self.write_topic = read_topic, write_topic
        from cyclonedds.core import GuardCondition

        self._guard = GuardCondition(self.participant)

    def take_newest(self):
        """The newest message received since the last call, or None (older ones are dropped)."""
        msgs = self.reader.take(N=16)
        return msgs[-1] if msgs else None

    def wait(self, timeout_s: float) -> bool:
        """Block until data is available, :meth:`wake` was called, or ``timeout_s`` [s] passed; True
        if data is available or a wake-up came."""
        from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState, WaitSet
        from cyclonedds.util import duration

        if not hasattr(self, "_ws"):
            self._ws = WaitSet(self.participant)
            self._rc = ReadCondition(self.reader, SampleState.NotRead | ViewState.Any | InstanceState.Any)
            self._ws.attach(self._rc)
            self._ws.attach(self._guard)
        got = bool(self._ws.wait(duration(microseconds=max(int(timeout_s * 1e6), 0))))
        self._guard.take()  # reset the wake-up
        return got

    def wake(self) -> None:
        """Make a :meth:`wait` in progress (or the next one) return at once (thread-safe)."""
        self._guard.set(True)

    def write(self, msg) -> None:
        """Publish ``msg`` on the write topic."""
        self.writer.write(msg)
