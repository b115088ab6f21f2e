"""A new coordinator's recovery: the tails it waits for, and which one reaches furthest.

Pure state and a choice; the protocol feeds it TAIL and TAIL_END messages and multicasts
what it chooses.
"""

from __future__ import annotations

from triogroups.address import Address
from triogroups.message import Message

__all__ = ["Recovery", "Tail"]

#: A tail: (forwarder, its seqno, the message), in delivery order.
Tail = list[tuple[Address, int, Message]]


class Recovery:
    """The tails of the members of the previous view that are in the new one."""

    def __init__(self, awaiting: set[Address]) -> None:
        self.awaiting = awaiting
        self.tails: dict[Address, Tail] = {}
        self.trimmed: dict[Address, tuple[Address | None, int]] = {}

    def add(self, member: Address, sender: Address, seqno: int, msg: Message) -> None:
        """One TAIL of ``member``'s, in its order."""
        self.tails.setdefault(member, []).append((sender, seqno, msg))

    def end(self, member: Address, trimmed: tuple[Address | None, int]) -> None:
        """``member``'s TAIL_END: its tail is complete."""
        self.tails.setdefault(member, [])
        self.trimmed[member] = trimmed
        self.awaiting.discard(member)

    def furthest(
        self, me: Address, own: Tail, own_trimmed: tuple[Address | None, int]
    ) -> tuple[Tail, bool]:
        """The tail that reaches furthest, ours included, and whether the tails agreed.

        Every member's delivered sequence is a prefix of one order, so one tail holds
        the last message of every other (or trimmed it last, as delivered everywhere).
        If none does (the tails disagree: a case the protocol does not make), the
        longest is taken.
        """
        tails = {me: own, **self.tails}
        trimmed = {me: own_trimmed, **self.trimmed}
        keys = {m: {(s, n) for s, n, _ in tail} for m, tail in tails.items()}
        ends = {m: (tail[-1][0], tail[-1][1]) for m, tail in tails.items() if tail}
        for member, tail in tails.items():
            held = keys[member]
            if all(
                end in held or end == trimmed.get(member)
                for other, end in ends.items()
                if other != member
            ):
                return tail, True
        return max(tails.values(), key=len), False
