"""PING: discovery by IP multicast (JGroups ``PING``).

A find multicasts one discovery request to the cluster; every member answers
the requester by unicast. Endpoints handed in with `SetPhysicalAddresses`
are asked directly as well, and their answers can end a find early. The
state machine and the rules for when a find ends are in `_discovery`.
Sans-IO: never awaits, never touches a socket or a clock.
"""

from __future__ import annotations

from triogroups.protocols import ids
from triogroups.protocols._discovery import REQUEST, RESPONSE, Discovery, DiscoveryHeader
from triogroups.wire import register_header

__all__ = ["REQUEST", "RESPONSE", "DiscoveryHeader", "Ping"]


class Ping(Discovery):
    """Multicast discovery: asks the whole cluster who is there and who coordinates."""

    name = "PING"
    id = ids.PING

    def multicast_requests(self) -> bool:
        return True


register_header(ids.PING, DiscoveryHeader)
