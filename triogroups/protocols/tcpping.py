"""TCPPING: discovery from a static host list (JGroups ``TCPPING``).

``initial_hosts`` lists endpoints as ``host[port]`` (JGroups syntax) or
``host:port``; each is probed at ``port`` and the ``port_range`` ports above
it, so several members on one host are found. A find sends the discovery
request directly to each of those endpoints, to the endpoints handed in with
`SetPhysicalAddresses` (how a Spark barrier stage passes its members), and to
every member discovered before (JGroups' dynamic hosts). The state machine
and the rules for when a find ends are in `_discovery`: besides the timeout
and a coordinator's answer, a find ends once every probed endpoint (the
``port_range`` extras included) has answered. Ending once only the listed
ports answered split groups whose members start together on one host: each
heard the base port's member, no coordinator yet, and several of them
concluded they sorted first. Sans-IO: no sockets, no clock, no DNS.

``port_range`` unset (the default) follows the transport's own
``port_range`` (`Transport.port_span`, learnt in `check_stack`; 1, as in
JGroups, when the transport does not take its port from a range). Decision:
discovery covers every port the transport may take, rather than the
transport being held to the ports discovery probes. A transport confined to
a few ports fails to start once they are taken (another cluster, another
program), while a wider probe costs one refused connection per idle port
and finds every member. With JGroups' defaults (TCP 50, TCPPING 1), and the
earlier preset's 4, two members of a second cluster that started after five
of a first one listened above the probed ports and each became a group of
one, silently. A member whose joining find ends with no answer although it
met other clusters' members or its own range had taken ports says so (see
`_discovery`).
"""

from __future__ import annotations

import re
from typing import Any

from triogroups.properties import Int, StrList, between
from triogroups.protocol import Protocol
from triogroups.protocols import ids
from triogroups.protocols._discovery import REQUEST, RESPONSE, Discovery, DiscoveryHeader
from triogroups.transports._addresses import Physical
from triogroups.transports.base import Transport
from triogroups.wire import register_header

__all__ = ["REQUEST", "RESPONSE", "DiscoveryHeader", "TcpPing", "parse_hosts"]

_HOST = re.compile(r"^\s*([^\s\[\]:]+)\s*(?:\[(\d{1,5})\]|:(\d{1,5}))\s*$")


def parse_hosts(entries: tuple[str, ...]) -> list[Physical]:
    """``("a[7800]", "b:7801")`` -> ``[("a", 7800), ("b", 7801)]``; ValueError names a bad entry."""
    hosts: list[Physical] = []
    for entry in entries:
        match = _HOST.match(entry)
        if match is None:
            raise ValueError(f"initial_hosts entry must look like host[port], got {entry!r}")
        port = int(match.group(2) or match.group(3))
        if not 0 < port < 65536:
            raise ValueError(f"initial_hosts port must be in 1..65535, got {entry!r}")
        hosts.append((match.group(1), port))
    return hosts


def _valid_hosts(entries: tuple[str, ...]) -> bool:
    try:
        parse_hosts(entries)
    except ValueError:
        return False
    return True


class TcpPing(Discovery):
    """Discovery by asking known endpoints directly; no multicast needed."""

    name = "TCPPING"
    id = ids.TCPPING

    initial_hosts = StrList(
        ("127.0.0.1[7800]",),
        doc="endpoints to ask: host[port], ...",
        check=_valid_hosts,
        rule="a list of host[port] entries",
    )
    port_range = Int(
        None,
        doc="additional ports probed above each listed port; unset: the transport's port_range",
        check=between(0, 1000),
        rule="in 0..1000",
        nullable=True,
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.listed = parse_hosts(self.initial_hosts)
        self.transport_span: int | None = None

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        """Learn the transport's port range, which an unset ``port_range`` follows."""
        super().check_stack(below, above)
        if below and isinstance(below[0], Transport):
            self.transport_span = below[0].port_span()

    def property_changed(self, key: str, now: float) -> None:
        if key == "initial_hosts":
            self.listed = parse_hosts(self.initial_hosts)

    def extra_ports(self) -> int:
        """Ports probed above each listed one: ``port_range``, else the transport's, else 1."""
        if self.port_range is not None:
            return self.port_range
        return 1 if self.transport_span is None else self.transport_span

    def _probed(self) -> dict[Physical, None]:
        """Every listed endpoint with its ``port_range`` extras, then the handed-in ones."""
        hosts: dict[Physical, None] = {}
        span = self.extra_ports()
        for host, port in self.listed:
            for p in range(port, min(port + span, 65535) + 1):
                hosts[(host, p)] = None
        for extra in self.hosts:
            hosts[extra] = None
        return hosts

    def request_hosts(self) -> list[Physical]:
        hosts = self._probed()
        for data in self.members():
            hosts[data.physical] = None
        return list(hosts)

    def expected_hosts(self) -> set[Physical]:
        return set(self._probed())

    def passed_over(self) -> list[Physical]:
        """Probed ports on this member's address below its own, in the range its own port is
        in: the transport took the first free port, so these were taken when it bound."""
        me = self.local_physical
        probed = self._probed()
        if me is None or me not in probed:
            return []
        ip, port = me
        below: list[Physical] = []
        while (ip, port - 1) in probed:
            port -= 1
            below.append((ip, port))
        return below[::-1]


register_header(ids.TCPPING, DiscoveryHeader)
