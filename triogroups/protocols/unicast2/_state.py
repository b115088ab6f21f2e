"""UNICAST2's header and per-connection bookkeeping: what the protocol's state is made of.

Kept apart from the protocol so that `_protocol` reads as the rules alone.
Nothing here sends or decides; it only holds.
"""

from __future__ import annotations

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
    __slots__ = ("conn_id", "heard", "mark", "used", "win")

    def __init__(self, conn_id: int, now: float) -> None:
        self.conn_id = conn_id
        self.win: SeqnoTable[Message] = SeqnoTable()
        self.heard = now  # last new message or STABLE: when the probe counts from
        self.used = now  # last new message: for conn_expiry_timeout
        self.mark = 0  # highest seqno sent when the previous STABLE came in


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
