"""UNICAST3's header, connection states and their transitions, and the wrap-around-safe counters.

One small NamedTuple header serves all five message types (as JGroups'
UnicastHeader3 does); each type reads only its own fields, the rest keep
their defaults so a DATA header costs a handful of bytes on the wire.
Timestamps (seed 000) and connection ids are fixed-width counters that wrap;
they are compared by signed difference, so "newer" stays right across the
wrap. A connection's state (seed 001) changes only through
`ConnectionTable.transition`, over the `TRANSITIONS` table. Nothing here
reads a clock.
"""

from __future__ import annotations

import enum
from typing import Generic, NamedTuple, Protocol, TypeVar

from triogroups.address import Address
from triogroups.protocols import ids
from triogroups.view import View
from triogroups.wire import register_header

__all__ = [
    "ACK",
    "CLOSE",
    "DATA",
    "ID",
    "SEND_FIRST_SEQNO",
    "TRANSITIONS",
    "TYPE_NAMES",
    "XMIT_REQ",
    "Action",
    "ConnectionTable",
    "Input",
    "State",
    "Unicast3Header",
    "conn_newer",
    "header_ok",
    "next_conn_id",
    "next_timestamp",
    "timestamp_newer",
]

ID = ids.UNICAST3

DATA = 0
ACK = 1
SEND_FIRST_SEQNO = 2
XMIT_REQ = 3
CLOSE = 4
TYPE_NAMES = {
    DATA: "DATA",
    ACK: "ACK",
    SEND_FIRST_SEQNO: "SEND_FIRST_SEQNO",
    XMIT_REQ: "XMIT_REQ",
    CLOSE: "CLOSE",
}

_TS_BITS = 32
_TS_MOD = 1 << _TS_BITS
_CONN_MOD = 1 << 16
_new = tuple.__new__  # a header without the NamedTuple's keyword-default call


class Unicast3Header(NamedTuple):
    """The UNICAST3 header; which fields matter depends on ``type``.

    DATA (seqno, conn_id, first), ACK (seqno, conn_id, timestamp),
    SEND_FIRST_SEQNO (timestamp), XMIT_REQ (missing), CLOSE (conn_id).
    """

    type: int
    seqno: int = 0
    conn_id: int = 0
    first: bool = False
    timestamp: int = 0
    missing: tuple[int, ...] = ()

    @staticmethod
    def data_run(seqno: int, conn_id: int, count: int) -> list[Unicast3Header]:
        """The DATA headers of ``count`` messages from ``seqno`` on, ``first`` for seqno 1:
        ``Unicast3Header(DATA, s, conn_id, s == 1)`` for each, built without the
        keyword-default call and with one call per run (the send path's per-message cost)."""
        return [
            _new(Unicast3Header, (DATA, s, conn_id, s == 1, 0, ()))
            for s in range(seqno, seqno + count)
        ]

    def __repr__(self) -> str:
        name = TYPE_NAMES.get(self.type, str(self.type))
        if self.type == DATA:
            first = ", first" if self.first else ""
            return f"DATA(#{self.seqno}, conn_id={self.conn_id}{first})"
        if self.type == ACK:
            return f"ACK(#{self.seqno}, conn_id={self.conn_id}, ts={self.timestamp})"
        if self.type == SEND_FIRST_SEQNO:
            return f"SEND_FIRST_SEQNO(ts={self.timestamp})"
        if self.type == XMIT_REQ:
            return f"XMIT_REQ({len(self.missing)} seqnos)"
        return f"{name}(conn_id={self.conn_id})"


register_header(ID, Unicast3Header)


class State(enum.Enum):
    """Connection states of a sender or receiver entry (seed 001).

    CLOSED is the state of an entry that was removed: it no longer exists,
    and nothing moves it again (a new connection is a new OPEN entry).
    """

    OPEN = "OPEN"
    CLOSING = "CLOSING"
    CLOSED = "CLOSED"


class Input(enum.Enum):
    """What happens to a connection."""

    #: A message is sent (sender) or received (receiver) on it.
    USE = "use"
    #: `Unicast3.close_connection`, or the peer is not in the new view.
    CLOSE = "close"
    #: The peer is in the new view.
    MEMBER = "member"
    #: Unused for ``conn_expiry_timeout``.
    IDLE = "idle"
    #: CLOSING for ``conn_close_timeout`` (on the sender: and flushed, or the peer is no member).
    EXPIRED = "expired"
    #: Removed whatever its state: the peer's CLOSE (receiver), or given up after
    #: ``max_retransmit_time`` (sender).
    DROP = "drop"


class Action(enum.Enum):
    """What `ConnectionTable.transition` does besides setting the next state."""

    NONE = "none"
    #: ``last_used`` becomes now.
    TOUCH = "touch"
    #: A send reopened a CLOSING connection: touched, and the sender counts it.
    REOPEN = "reopen"
    #: The entry is removed from the table; the side keeps a floor or sends CLOSE.
    REMOVE = "remove"


_O, _C, _X = State.OPEN, State.CLOSING, State.CLOSED
_NONE, _TOUCH, _REMOVE = Action.NONE, Action.TOUCH, Action.REMOVE

#: (state, input) -> (action, next state), for every pair (seed 001).
TRANSITIONS: dict[tuple[State, Input], tuple[Action, State]] = {
    (_O, Input.USE): (_NONE, _O),
    (_O, Input.CLOSE): (_TOUCH, _C),
    (_O, Input.MEMBER): (_NONE, _O),
    (_O, Input.IDLE): (_TOUCH, _C),
    (_O, Input.EXPIRED): (_NONE, _O),
    (_O, Input.DROP): (_REMOVE, _X),
    (_C, Input.USE): (Action.REOPEN, _O),
    (_C, Input.CLOSE): (_NONE, _C),
    (_C, Input.MEMBER): (_TOUCH, _O),
    (_C, Input.IDLE): (_NONE, _C),
    (_C, Input.EXPIRED): (_REMOVE, _X),
    (_C, Input.DROP): (_REMOVE, _X),
    **{(_X, event): (_NONE, _X) for event in Input},
}


class _Entry(Protocol):
    state: State
    last_used: float


E = TypeVar("E", bound=_Entry)


class ConnectionTable(Generic[E]):
    """What the send and receive sides share: one entry per peer, which goes
    CLOSING when closed or when the peer leaves the view, and OPEN again when
    the peer is back in a view before it was removed. Every change of state
    goes through `transition`."""

    def __init__(self) -> None:
        self.entries: dict[Address, E] = {}

    def transition(self, peer: Address, entry: E, event: Input, now: float) -> Action:
        """Move ``entry`` (``peer``'s) as `TRANSITIONS` says and do the table's part of the action.

        TOUCH and REOPEN set ``last_used``; REMOVE deletes the entry. The caller
        does what its side adds (a floor, a CLOSE, a counter).
        """
        action, entry.state = TRANSITIONS[entry.state, event]
        if action is _REMOVE:
            del self.entries[peer]
        elif action is not _NONE:
            entry.last_used = now
        return action

    def close(self, peer: Address, now: float) -> None:
        entry = self.entries.get(peer)
        if entry is not None:
            self.transition(peer, entry, Input.CLOSE, now)

    def view_changed(self, view: View, now: float) -> None:
        """Entries of members that left go to CLOSING; those of members reopen."""
        for peer, entry in self.entries.items():
            self.transition(peer, entry, Input.MEMBER if peer in view else Input.CLOSE, now)

    def states(self) -> dict[str, int]:
        """How many entries exist in each state (a removed entry is gone, never CLOSED)."""
        counts = {State.OPEN.value: 0, State.CLOSING.value: 0}
        for entry in self.entries.values():
            counts[entry.state.value] += 1
        return counts


def next_timestamp(ts: int) -> int:
    """The timestamp after ``ts``: 1, 2, ... 2**32 - 1, then 1 again (0 means "none yet")."""
    return ts % (_TS_MOD - 1) + 1


def timestamp_newer(ts: int, last: int) -> bool:
    """True if ``ts`` was issued after ``last``, also across the 32-bit wrap."""
    return 0 < (ts - last) % _TS_MOD < _TS_MOD >> 1


def next_conn_id(conn_id: int) -> int:
    """The connection id after ``conn_id`` (16 bits, wrapping, like JGroups' short)."""
    return (conn_id + 1) % _CONN_MOD


def conn_newer(conn_id: int, other: int) -> bool:
    """True if connection ``conn_id`` was opened after ``other`` by the same sender."""
    return 0 < (conn_id - other) % _CONN_MOD < _CONN_MOD >> 1


def header_ok(hdr: Unicast3Header, max_missing: int) -> bool:
    """Whether a received header's values are in range for its type (hostile input)."""
    if not 0 <= hdr.conn_id < _CONN_MOD:
        return False
    t = hdr.type
    if t == DATA:
        return hdr.seqno >= 1
    if t == ACK:
        return hdr.seqno >= 0 and 0 < hdr.timestamp < _TS_MOD
    if t == SEND_FIRST_SEQNO:
        return 0 < hdr.timestamp < _TS_MOD
    if t == XMIT_REQ:  # never sent empty: an empty one asks for nothing and is malformed
        return 0 < len(hdr.missing) <= max_missing and all(s >= 1 for s in hdr.missing)
    return t == CLOSE
