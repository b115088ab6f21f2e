"""UNICAST2's header and per-connection bookkeeping: what the protocol's state is made of.

Kept apart from the protocol so that `_protocol` reads as the rules alone.
Nothing here sends; the one decision kept here is `RECV_TRANSITIONS`, what
a receiver does with a sender's connection (see `Peer`).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from triogroups.message import Flag, Message
from triogroups.protocols import ids
from triogroups.protocols._table import SeqnoTable
from triogroups.wire import register_header

DATA, XMIT_REQ, SEND_FIRST_SEQNO, STABLE = 0, 1, 2, 3

_ID = ids.UNICAST2
_OOB = int(Flag.OOB)
_NO_RELIABILITY = int(Flag.NO_RELIABILITY)
_CONTROL = int(Flag.OOB | Flag.INTERNAL)
_MAX_XMIT_REQ = 512  # seqnos per XMIT_REQ: a few KB at most, one datagram
_MAX_FIRST_SEQNO_ASKS = 5  # then the sender's next message or probe asks again
_MAX_TOMBSTONES = 1024  # when max_retransmit_time is 0, the oldest go first
_COUNTERS = (
    "msgs_sent",
    "msgs_received",
    "msgs_delivered",
    "duplicates",
    "xmit_reqs_sent",
    "xmit_reqs_received",
    "retransmissions",
    "stable_sent",
    "stable_received",
    "send_first_seqno_sent",
    "send_first_seqno_received",
    "probes",
    "stale_dropped",
    "dropped_no_connection",
    "dropped_beyond_window",
    "xmits_capped",
    "malformed",
    "connections_opened",
    "connections_reset",
    "connections_closed",
    "aged_out",
    "reaped",
    "abandoned",
)


class Unicast2Header(NamedTuple):
    """JGroups' Unicast2Header; which fields count depends on ``type``.

    DATA: seqno, conn_id, first. XMIT_REQ: conn_id, missing.
    SEND_FIRST_SEQNO: seqno (highest dropped), conn_id. STABLE: seqno (highest
    delivered), high (highest received), conn_id.
    """

    type: int
    seqno: int = 0
    conn_id: int = 0
    first: bool = False
    high: int = 0
    missing: tuple[int, ...] = ()


register_header(_ID, Unicast2Header)


class _SendEntry:
    __slots__ = ("acked", "conn_id", "heard", "mark", "used", "win")

    def __init__(self, conn_id: int, now: float) -> None:
        self.conn_id = conn_id
        self.win: SeqnoTable[Message] = SeqnoTable()
        self.heard = now  # last new message or STABLE: when the probe counts from
        self.used = now  # last new message: for conn_expiry_timeout
        self.mark = 0  # highest seqno sent when the previous STABLE came in
        self.acked = False  # a STABLE came on this connection: the receiver has it open


class _RecvEntry:
    __slots__ = ("bytes", "conn_id", "last_missing", "last_stable", "stable_count", "used", "win")

    def __init__(self, conn_id: int, win: SeqnoTable[Message], now: float) -> None:
        self.conn_id = conn_id
        self.win = win
        self.used = now  # last DATA on this connection: for conn_expiry_timeout
        self.bytes = 0
        self.last_stable = (-1, -1)
        self.stable_count = 0
        self.last_missing: frozenset[int] = frozenset()


class _Ask:
    """An outstanding SEND_FIRST_SEQNO: the first message of a connection is a gap too."""

    __slots__ = ("conn_id", "seqno", "time", "tries")

    def __init__(self, conn_id: int, seqno: int, now: float) -> None:
        self.conn_id = conn_id
        self.seqno = seqno
        self.time = now
        self.tries = 1


class _Tombstone(NamedTuple):
    conn_id: int
    hd: int
    oob: tuple[tuple[int, Message], ...]
    expires: float


class Peer(enum.Enum):
    """What a receiver holds for one sender: nothing, a window, or a closed window's tombstone."""

    NONE = "none"
    OPEN = "open"
    CLOSED = "closed"


class RecvInput(enum.Enum):
    """What happens to a receiver's connection with one sender."""

    #: DATA of a connection older than the one we hold (window or tombstone).
    OLDER = "older"
    #: DATA, not flagged first, of a connection we have no window for.
    NOT_FIRST = "not_first"
    #: DATA flagged first of a connection we have no window for.
    FIRST = "first"
    #: Closed: reaped, aged out, a view without the sender, close_connection, Disconnect.
    CLOSE = "close"
    #: The tombstone's time is up, or it is the oldest beyond the cap.
    EXPIRED = "expired"


class RecvAction(enum.Enum):
    """What `Unicast2` does for a (`Peer`, `RecvInput`) pair."""

    NONE = "none"
    #: Drop the message (counted ``stale_dropped``).
    DROP_STALE = "drop_stale"
    #: Drop the message and want a SEND_FIRST_SEQNO (counted ``dropped_no_connection``).
    ASK_FIRST = "ask_first"
    #: A new window at the first message (counted ``connections_opened``).
    OPEN = "open"
    #: A new window replaces ours for the newer connection (``connections_reset``).
    RESET = "reset"
    #: A new window from the tombstone: past what we delivered if it is the same
    #: connection (``connections_opened``).
    REOPEN = "reopen"
    #: Drop the window, keep a tombstone (``connections_closed``).
    BURY = "bury"
    #: Drop the tombstone.
    FORGET = "forget"


_N, _O, _C = Peer.NONE, Peer.OPEN, Peer.CLOSED

#: (what we hold, input) -> (action, what we hold then), for every pair. With
#: nothing held no connection is older; OLDER is listed there for completeness.
RECV_TRANSITIONS: dict[tuple[Peer, RecvInput], tuple[RecvAction, Peer]] = {
    (_N, RecvInput.OLDER): (RecvAction.DROP_STALE, _N),
    (_N, RecvInput.NOT_FIRST): (RecvAction.ASK_FIRST, _N),
    (_N, RecvInput.FIRST): (RecvAction.OPEN, _O),
    (_N, RecvInput.CLOSE): (RecvAction.NONE, _N),
    (_N, RecvInput.EXPIRED): (RecvAction.NONE, _N),
    (_O, RecvInput.OLDER): (RecvAction.DROP_STALE, _O),
    (_O, RecvInput.NOT_FIRST): (RecvAction.ASK_FIRST, _O),
    (_O, RecvInput.FIRST): (RecvAction.RESET, _O),
    (_O, RecvInput.CLOSE): (RecvAction.BURY, _C),
    (_O, RecvInput.EXPIRED): (RecvAction.NONE, _O),
    (_C, RecvInput.OLDER): (RecvAction.DROP_STALE, _C),
    (_C, RecvInput.NOT_FIRST): (RecvAction.ASK_FIRST, _C),
    (_C, RecvInput.FIRST): (RecvAction.REOPEN, _O),
    (_C, RecvInput.CLOSE): (RecvAction.NONE, _C),
    (_C, RecvInput.EXPIRED): (RecvAction.FORGET, _N),
}
