"""State transfer on join: the joiner gets the group's state before its first message.

Design. Every ordered multicast a channel sends (regular, not OOB, looped
back) carries the sender's *application seqno* (1, 2, 3 ... per sender
address) as a header of its own, ``APP_SEQNO``: a plain int, since every
such message pays for building and decoding it. Every member remembers, per
sender, the highest seqno it has handed to its application
(`Alignment.delivered`).

1. A joiner with a state provider holds back everything it delivers from
   the moment its stack starts: messages, RPC requests and views go into a
   queue instead of to the application.
2. Once its view is installed it asks the coordinator (STATE_REQ, unicast).
3. The coordinator handles STATE_REQ in its own delivery order. It waits
   until its application has *finished* everything delivered before (the
   receive queue is drained and the reader is back in ``receive()``; a
   group actor has handled its mailbox up to there; RPC requests before it
   have returned), then calls ``get_state()`` and answers with the state
   plus its `Alignment.delivered` table: "the state contains exactly your
   messages up to seqno n, per sender".
4. The joiner calls ``set_state()``, drops every held multicast whose seqno
   is covered by that table (and any that arrives later), and releases the
   rest in order.

Guarantee. Over reliable FIFO multicast (NAKACK2 or MCAST), whose joiner
windows start at the coordinator's highest delivered seqnos (the JOIN_RSP
digest), the joiner's state plus what it delivers afterwards contains every
ordered multicast exactly once, in each sender's order; this is JGroups'
FLUSH-less STATE_TRANSFER with the digest replaced by per-sender
application seqnos. Each answer is checked: if the joiner holds a message
whose predecessor is neither in the state nor held (the answering member
was behind, e.g. a new coordinator after the old one left), the joiner
asks again. OOB messages, unicasts and multicasts that skip the sender
(DONT_LOOPBACK) carry no seqno and are outside the guarantee: they are held
back and then delivered, never dropped.

This is done in the channel, not as a STATE_TRANSFER layer in the stack:
the snapshot point is where the *application* is in its message stream,
which only the channel can see (a sans-IO layer cannot wait for it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol, runtime_checkable

from triogroups.address import Address
from triogroups.protocols import ids
from triogroups.view import View
from triogroups.wire import register_header

__all__ = [
    "PICKLE_REFUSED",
    "STATE_REQ",
    "STATE_RSP",
    "Alignment",
    "StateHeader",
    "StateProvider",
    "first_gap",
]

STATE_REQ = 2
STATE_RSP = 3
#: Not state transfer: "I refused your pickled payload (allow_pickle is off here)",
#: sent back to the sender so the mismatch shows where the send was made.
PICKLE_REFUSED = 4

#: Senders that left are remembered this long (in departures) so a late
#: message of theirs is still recognised as already in the state.
_DEPARTED_KEPT = 256


class StateHeader(NamedTuple):
    """STATE_REQ/RSP: ``seqno`` is the request id; a response carries ``applied`` (per
    sender, the highest application seqno in the state). PICKLE_REFUSED: no fields.
    (Type 1, an application seqno, went to the ``APP_SEQNO`` header.)"""

    type: int
    seqno: int = 0
    applied: tuple[tuple[Address, int], ...] = ()
    has_state: bool = False


register_header(ids.STATE_TRANSFER, StateHeader)
register_header(ids.APP_SEQNO, int)


@runtime_checkable
class StateProvider(Protocol):
    """What an application implements to take part in state transfer.

    ``get_state`` returns bytes or a msgpack-able value (a pickle-able one
    when the channel allows pickle); ``set_state`` receives it decoded. Either
    may be a coroutine function.
    """

    def get_state(self) -> Any:
        """The application's state, at a point where it has finished every message
        delivered before (called on an older member when a joiner asks)."""
        ...

    def set_state(self, state: Any) -> Any:
        """Replace the application's state with ``state`` (called on a joiner, before it
        sees its first message)."""
        ...


class Alignment:
    """Per sender: the last application seqno handed to the application, and the floor
    below which messages are already in the state this member received."""

    def __init__(self) -> None:
        self.delivered: dict[Address, int] = {}
        self.floor: dict[Address, int] = {}
        self.gaps = 0
        self._departed: deque[Address] = deque()

    def accept(self, src: Address, seqno: int) -> bool:
        """Record a delivery; False if the message is already contained in the state.

        The usual case, the sender's next seqno, needs no look at the floor: a sender
        with a floor has its delivered seqno at or above it (`install`).
        """
        delivered = self.delivered
        if seqno == delivered.get(src, 0) + 1:
            delivered[src] = seqno
            return True
        if seqno <= self.floor.get(src, 0):
            return False
        last = self.delivered.get(src)
        if last is not None and seqno > last + 1:
            self.gaps += 1
        if last is None or seqno > last:
            self.delivered[src] = seqno
        return True

    def snapshot(self) -> tuple[tuple[Address, int], ...]:
        return tuple(self.delivered.items())

    def install(self, applied: Iterable[tuple[Address, int]]) -> None:
        """Take the table that came with a state, which replaces the application's state:
        exactly those messages count as delivered (also after a restart)."""
        self.floor = dict(applied)
        self.delivered = dict(self.floor)

    def view_changed(self, view: View) -> None:
        """Forget senders long gone, so the tables stay bounded."""
        for src in self.delivered.keys() - set(view.members):
            if src not in self._departed:
                self._departed.append(src)
        while len(self._departed) > _DEPARTED_KEPT:
            gone = self._departed.popleft()
            if gone not in view:
                self.delivered.pop(gone, None)
                self.floor.pop(gone, None)


def first_gap(
    held: Iterable[tuple[Address, int]], applied: Iterable[tuple[Address, int]]
) -> Address | None:
    """A sender whose first held seqno does not follow what the state contains, if any.

    ``held`` is (sender, seqno) of the held multicasts in delivery order.
    """
    covered = dict(applied)
    seen: set[Address] = set()
    for src, seqno in held:
        if src in seen:
            continue
        seen.add(src)
        if seqno > covered.get(src, 0) + 1:
            return src
    return None
