"""Where members are: logical `Address` to physical (ip, port).

The table is filled by discovery (`AddPhysicalAddress`), by the source of
traffic that arrives (a UDP datagram's source, a TCP hello), and holds the
endpoints handed in from outside (`SetPhysicalAddresses`) whose members are
not known yet. It is bounded: hostile or stale traffic cannot grow it
without limit; the least recently confirmed entry goes first.

`SendToHosts` is how discovery reaches endpoints before it knows who listens
there (JGroups sends such messages to a physical address): the transport
sends the messages, as a group bundle, to each endpoint.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from triogroups.address import Address
from triogroups.events import AddPhysicalAddress, Event, SetPhysicalAddresses
from triogroups.message import Message

__all__ = ["AddressTable", "Physical", "SendToHosts", "format_physical", "label"]

Physical = tuple[str, int]


@dataclass(frozen=True, slots=True)
class SendToHosts(Event):
    """Discovery asks the transport (going down) to send ``messages`` to each endpoint.

    Endpoints are ``(host, port)``; the transport skips its own. Messages go
    as one group bundle (destination None), encoded once.
    """

    hosts: tuple[Physical, ...]
    messages: tuple[Message, ...]


def format_physical(physical: Physical) -> str:
    return f"{physical[0]}:{physical[1]}"


def label(address: Address) -> str:
    """Name plus UUID prefix: unique enough for stats keys, readable in logs."""
    return f"{address.name}#{address.uuid:032x}"[: len(address.name) + 9]


class AddressTable:
    """Logical -> physical, with the reverse lookup, bounded to ``max_entries``."""

    def __init__(self, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self._physical: OrderedDict[Address, Physical] = OrderedDict()
        self._logical: dict[Physical, Address] = {}
        self.hosts: list[Physical] = []
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._physical)

    def __contains__(self, address: object) -> bool:
        return address in self._physical

    def get(self, address: Address) -> Physical | None:
        return self._physical.get(address)

    def logical_at(self, physical: Physical) -> Address | None:
        """The member last seen at ``physical``, if any."""
        return self._logical.get(physical)

    def add(self, address: Address, physical: Physical) -> bool:
        """Map ``address`` to ``physical``; True when that changed the table.

        A newer member at the same endpoint (a restarted process) replaces the
        older one.
        """
        table = self._physical
        old = table.get(address)
        if old == physical:
            table.move_to_end(address)
            return False
        if old is not None:
            self._drop_reverse(address, old)
        previous = self._logical.get(physical)
        if previous is not None and previous != address:
            del table[previous]
        table[address] = physical
        table.move_to_end(address)
        self._logical[physical] = address
        while len(table) > self.max_entries:
            evicted, where = table.popitem(last=False)
            self._drop_reverse(evicted, where)
            self.evicted += 1
        return True

    def remove(self, address: Address) -> None:
        physical = self._physical.pop(address, None)
        if physical is not None:
            self._drop_reverse(address, physical)

    def _drop_reverse(self, address: Address, physical: Physical) -> None:
        if self._logical.get(physical) == address:
            del self._logical[physical]

    def learn(self, event: Event) -> None:
        """Take in what discovery or the application says about addresses; ignore other events.

        `AddPhysicalAddress` maps a member, `SetPhysicalAddresses` hands in
        endpoints whose members are not known yet. Every transport with a table
        reads these two events the same way, so they are read here.
        """
        if isinstance(event, AddPhysicalAddress):
            self.add(event.address, event.physical)
        elif isinstance(event, SetPhysicalAddresses):
            self.add_hosts(event.addresses)

    def add_hosts(self, hosts: tuple[Physical, ...]) -> None:
        """Remember endpoints handed in from outside (members not known yet)."""
        for host in hosts:
            if host not in self.hosts:
                self.hosts.append(host)
        del self.hosts[: max(0, len(self.hosts) - self.max_entries)]

    def members(self) -> list[Address]:
        return list(self._physical)

    def snapshot(self) -> dict[str, Any]:
        """Plain view for `stats`: member -> "ip:port", plus the unresolved hosts."""
        return {
            "addresses": {label(a): format_physical(p) for a, p in self._physical.items()},
            "hosts": [format_physical(h) for h in self.hosts],
            "evicted": self.evicted,
        }
