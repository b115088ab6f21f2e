"""What UDP and TCP declare alike: their socket properties, address table and stats.

JGroups keeps these in ``TP``, the transport configuration both of its socket transports
extend; here `SocketTransport` declares them once and `UdpTransport` and `TcpTransport` add
their own (multicast; connections). A transport never interprets headers.
"""

from __future__ import annotations

from typing import Any

from triogroups.properties import Int, Str, at_least, between
from triogroups.transports._addresses import AddressTable, Physical, format_physical
from triogroups.transports._busy_poll import BusyPollingTransport
from triogroups.transports._drops import bundle_stats, drop_stats
from triogroups.transports._sockets import is_interface

__all__ = ["SocketTransport", "bind_port_property"]


def bind_port_property(default: int, doc: str) -> Int:
    """The ``bind_port`` declaration, with the transport's default (UDP: any free port;
    TCP: 7800, where TCPPING looks) and what it binds."""
    return Int(default, doc=doc, check=between(0, 65535), rule="in 0..65535")


class SocketTransport(BusyPollingTransport):
    """The shared half of the socket transports: ``bind_addr``, ``port_range`` and
    ``logical_addr_cache_max_size`` (each declares ``bind_port`` with
    `bind_port_property`, for its own default), the logical -> physical `AddressTable`,
    the bound address and socket buffers, and the stats both report."""

    bind_addr = Str(
        "127.0.0.1",
        doc="interface address to bind (UDP: and multicast on; TCP: listen on, connect from)",
        check=is_interface,
        rule="a specific IPv4 address (not 0.0.0.0)",
    )
    port_range = Int(
        50, doc="how many ports above bind_port to try", check=between(0, 65535), rule="in 0..65535"
    )
    logical_addr_cache_max_size = Int(
        2000,
        doc="members kept in the address table",
        check=at_least(1),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.table = AddressTable(self.logical_addr_cache_max_size)
        #: Where this transport is bound (UDP: its unicast socket; TCP: its listener).
        self.physical: Physical | None = None
        #: The socket buffer sizes the kernel granted, by socket.
        self.buffers: dict[str, int] = {}

    def gauges(self) -> dict[str, Any]:
        """Bundle sizes, drops by reason, the bound address, buffers, the address table,
        the shared secret and busy polling; a subclass adds its own."""
        return {
            **bundle_stats(self.counters),
            **drop_stats(self.send_drops, self.drops),
            "physical": None if self.physical is None else format_physical(self.physical),
            "buffers": dict(self.buffers),
            **self.table.snapshot(),
            **self.secret_stats(),
            **self.busy_poll_stats(),
        }
