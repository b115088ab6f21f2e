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
"""

from __future__ import annotations

import re
from typing import Any

from triogroups.properties import Int, StrList, between
from triogroups.protocols import ids
from triogroups.protocols._discovery import REQUEST, RESPONSE, Discovery, DiscoveryHeader
from triogroups.transports._addresses import Physical
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
        1,
        doc="additional ports probed above each listed port",
        check=between(0, 1000),
        rule="in 0..1000",
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.listed = parse_hosts(self.initial_hosts)

    def property_changed(self, key: str, now: float) -> None:
        if key == "initial_hosts":
            self.listed = parse_hosts(self.initial_hosts)

    def _probed(self) -> dict[Physical, None]:
        """Every listed endpoint with its ``port_range`` extras, then the handed-in ones."""
        hosts: dict[Physical, None] = {}
        for host, port in self.listed:
            for p in range(port, min(port + self.port_range, 65535) + 1):
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


register_header(ids.TCPPING, DiscoveryHeader)
