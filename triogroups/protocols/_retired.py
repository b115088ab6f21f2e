"""RetiredWindows: where the receive windows of members that left our view stood.

A sender's seqnos never restart within its incarnation, so a window opened again for a
member that comes back (excluded while partitioned, then merged) must start where it
stood, not at 0, or its retransmissions are delivered a second time (NAKACK2 and MCAST
both had that bug, found by chaos runs). The protocols keep, per member that left, the
window's highest delivered seqno and the OOB seqnos above it already delivered; at most
``limit`` members, the oldest forgotten first.
"""

from __future__ import annotations

from triogroups.address import Address

__all__ = ["MAX_RETIRED", "RetiredWindows"]

MAX_RETIRED = 1024  # windows of members that left, remembered for their return


class RetiredWindows:
    """Per member that left: (highest delivered seqno, OOB seqnos delivered above it)."""

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = MAX_RETIRED) -> None:
        self.limit = limit
        self._entries: dict[Address, tuple[int, list[int]]] = {}

    def remember(self, member: Address, delivered: int, oob: list[int]) -> None:
        """Where ``member``'s window stood as it left (the oldest entry goes when full)."""
        entries = self._entries
        entries.pop(member, None)
        if len(entries) >= self.limit:
            del entries[next(iter(entries))]
        entries[member] = (delivered, oob)

    def take(self, member: Address) -> tuple[int, list[int]] | None:
        """Where ``member``'s window stood, forgotten here; None for a member never seen."""
        return self._entries.pop(member, None)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
