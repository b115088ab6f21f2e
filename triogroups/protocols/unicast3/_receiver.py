"""UNICAST3's receiver half: one receive window per sender, acked with delay.

Each sender has a `ReceiverEntry`: the sender's connection id, a
`SeqnoTable` of what arrived and is not yet delivered, a state (OPEN /
CLOSING / CLOSED) and an ack-pending flag. Acks are cumulative (the highest
delivered seqno), one per received batch at most, and delayed: the
retransmit task sends the pending ones every ``xmit_interval``, unless
``ack_threshold`` messages were delivered since the last ack, which sends
one at once. Every ACK and SEND_FIRST_SEQNO carries a timestamp from this
member's counter (seed 000).

Without a window for a sender (or with one of an older connection), a
message cannot be placed: it is kept in a small per-sender cache and a
SEND_FIRST_SEQNO is *wanted* (seed 001: a flag, not sent at once). The
retransmit task sends it, at most once per ``sync_min_interval`` per sender
(seed 000's last-sync-sent table), and the sender answers with its lowest
unacked message marked ``first``, from which the window is created; cached
messages of that connection then join it.

*Floors* are this implementation's addition: when a window is removed
(reaped after ``conn_close_timeout``), its connection id, highest delivered
seqno and the OOB seqnos delivered above it are kept. A later message of
that same connection revives the window where it stopped instead of
restarting from the sender's lowest unacked message, so messages delivered
before the removal (whose ack may have been lost) are never delivered twice.
A CLOSE leaves a floor that drops the closed connection's late messages. A
floor is a few ints per sender; a non-member's floor expires after
``conn_close_timeout``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from triogroups.address import Address
from triogroups.message import Flag, Message
from triogroups.protocols._table import SeqnoTable
from triogroups.protocols.unicast3._common import (
    ACK,
    ID,
    SEND_FIRST_SEQNO,
    XMIT_REQ,
    ConnectionTable,
    Input,
    State,
    Unicast3Header,
    conn_newer,
    next_timestamp,
)
from triogroups.protocols.unicast3._context import Unicast3Context
from triogroups.view import View

__all__ = ["Receiver", "ReceiverEntry"]

_OOB = int(Flag.OOB)
_CONTROL = int(Flag.OOB | Flag.INTERNAL)
_INTERNAL = int(Flag.INTERNAL)
_OPEN = State.OPEN
_CLOSED_FLOOR = -1  # floor "highest delivered" of a connection its sender closed
_MAX_CACHED = 10_000  # messages cached per sender while waiting for its first seqno

DataItem = tuple[Unicast3Header, Message]


class Floor(NamedTuple):
    """What is left of a removed window: enough to resume it without duplicates."""

    conn_id: int
    #: Highest delivered seqno, or _CLOSED_FLOOR after a CLOSE.
    hd: int
    #: OOB seqnos above ``hd`` that were delivered already.
    oob: tuple[int, ...]
    since: float


def _gaps(table: SeqnoTable[Message | None], first: int, last: int, limit: int) -> list[int]:
    """Seqnos in [first, last] that ``table`` does not hold, lowest first, at most ``limit``."""
    out: list[int] = []
    for seqno in range(first, last + 1):
        if seqno not in table:
            out.append(seqno)
            if len(out) >= limit:
                break
    return out


class ReceiverEntry:
    """The receive side of one connection."""

    __slots__ = (
        "ack_pending",
        "acked",
        "conn_id",
        "last_used",
        "state",
        "table",
        "xmit_next",
        "xmit_seen",
    )

    def __init__(self, conn_id: int, offset: int, now: float) -> None:
        self.conn_id = conn_id
        #: Undelivered messages; None marks an OOB message that was delivered on arrival.
        self.table: SeqnoTable[Message | None] = SeqnoTable(offset)
        self.state = State.OPEN
        self.last_used = now
        self.ack_pending = False
        #: Highest delivered seqno carried by the last ACK sent.
        self.acked = offset
        #: Highest received seqno at the previous retransmit run, if it saw gaps (None:
        #: no gaps then). Every seqno missing now and not above it was missing then too.
        self.xmit_seen: int | None = None
        #: Where the next XMIT_REQ starts after a capped one (None: at the lowest gap).
        self.xmit_next: int | None = None

    def snapshot(self) -> dict[str, Any]:
        t = self.table
        return {
            "conn_id": self.conn_id,
            "state": self.state.value,
            "highest_delivered": t.hd,
            "highest_received": t.hr,
            "window": len(t),
            "missing": t.hr - t.hd - len(t),
            "ack_pending": self.ack_pending,
        }


#: The receiver's counters, kept in `Unicast3.counters` under these names.
RECEIVER_COUNTERS = (
    "msgs_received",
    "msgs_delivered",
    "duplicates",
    "dropped_beyond_window",
    "stale",  # of an older or closed connection
    "cached",
    "cache_dropped",
    "acks_sent",
    "xmit_reqs_sent",  # seqnos asked for
    "xmit_req_msgs_sent",
    "send_first_seqno_sent",
    "send_first_seqno_suppressed",  # runs that held one back for sync_min_interval
    "recv_conns_opened",
    "recv_conns_revived",
    "recv_conns_removed",
    "closes_received",
)


class Receiver(ConnectionTable[ReceiverEntry]):
    """All receive windows of one UNICAST3 instance, plus the receiver's counters."""

    def __init__(self, proto: Unicast3Context) -> None:
        self.proto = proto
        #: The protocol's counters (`Protocol.counters`): the receiver counts there.
        self.counters = proto.counters
        super().__init__()
        #: sender -> (conn_id, highest delivered or _CLOSED_FLOOR, since)
        self.floors: dict[Address, Floor] = {}
        self.cache: dict[Address, dict[tuple[int, int], Message]] = {}
        #: Senders a SEND_FIRST_SEQNO is wanted from (the seed-001 flag).
        self.sync_wanted: set[Address] = set()
        #: sender -> when the last SEND_FIRST_SEQNO went to it (seed 000's last-sync-sent).
        self.last_sync_sent: dict[Address, float] = {}
        self.timestamper = 0

    # --- data ----------------------------------------------------------------------

    def on_data(
        self,
        peer: Address,
        items: list[DataItem],
        now: float,
        delivered: list[Message],
        out: list[Message],
    ) -> None:
        """Add one sender's DATA messages of a batch; deliver what is ready; maybe ack."""
        self.counters["msgs_received"] += len(items)
        entry = self.entries.get(peer)
        # A batch with a first message opens the window from it before adding the others.
        for hdr, _ in items:
            if hdr.first and (entry is None or conn_newer(hdr.conn_id, entry.conn_id)):
                entry = self._open(peer, hdr.conn_id, hdr.seqno - 1, now) or entry
        if entry is None:
            floor = self.floors.get(peer)
            if (
                floor is not None
                and floor.hd >= 0
                and any(h.conn_id == floor.conn_id for h, _ in items)
            ):
                entry = self._open(peer, floor.conn_id, floor.hd, now)
                self.counters["recv_conns_revived"] += 1
        if entry is None:
            for hdr, msg in items:
                self._cache(peer, hdr, msg)
            return
        conn = entry.conn_id
        table = entry.table
        before = len(delivered)
        if not len(table):  # nothing waits: the in-order run from the front goes straight up
            nxt = table.hd + 1
            taken = 0
            for hdr, msg in items:
                if hdr.seqno != nxt or hdr.conn_id != conn or msg.flags & _OOB:
                    break
                delivered.append(msg)
                nxt += 1
                taken += 1
            if taken:
                table.purge(nxt - 1)  # nothing stored: only moves hd (and hr) on
                items = items[taken:]
        deliver_next = table.deliver_next
        for hdr, msg in items:
            if hdr.conn_id == conn:
                if not msg.flags & _OOB and deliver_next(hdr.seqno):  # in order, nothing waits
                    delivered.append(msg)
                else:
                    self._add(table, hdr.seqno, msg, delivered)
            elif conn_newer(hdr.conn_id, conn):
                self._cache(peer, hdr, msg)
            else:
                self.counters["stale"] += 1
        cached = self.cache.get(peer)
        if cached:  # what waited for this window joins it; other connections' stay
            for key in sorted(k for k in cached if k[0] == conn):
                self._add(table, key[1], cached.pop(key), delivered)
            if not cached:
                del self.cache[peer]
        entry.ack_pending = True
        entry.last_used = now
        if entry.state is not _OPEN:  # data reopens a closing connection (seed 001)
            self.transition(peer, entry, Input.USE, now)
        ready = table.remove_ready()
        if ready:
            delivered.extend(m for m in ready if m is not None)
        self.counters["msgs_delivered"] += len(delivered) - before
        if table.hd - entry.acked >= self.proto.ack_threshold:
            self._send_ack(peer, entry, out)

    def _add(
        self, table: SeqnoTable[Message | None], seqno: int, msg: Message, delivered: list[Message]
    ) -> None:
        """Add to the window; an OOB message is delivered at once and leaves a marker.

        Not beyond ``max_receive_window`` seqnos ahead of the next one to deliver:
        a sender that never fills its gaps cannot make us buffer without end.
        """
        if seqno - table.hd > self.proto.max_receive_window:
            self.counters["dropped_beyond_window"] += 1
            return
        oob = msg.flags & _OOB
        if table.add(seqno, None if oob else msg):
            if oob:
                delivered.append(msg)
        else:
            self.counters["duplicates"] += 1

    def _open(self, peer: Address, conn_id: int, offset: int, now: float) -> ReceiverEntry | None:
        """A new window for ``conn_id`` after ``offset``, unless a floor says it is stale."""
        floor = self.floors.get(peer)
        oob: tuple[int, ...] = ()
        if floor is not None:
            if floor.conn_id == conn_id:
                if floor.hd == _CLOSED_FLOOR:
                    return None
                offset = max(offset, floor.hd)
                oob = floor.oob
            elif conn_newer(floor.conn_id, conn_id):
                return None
            del self.floors[peer]
        entry = self.entries[peer] = ReceiverEntry(conn_id, offset, now)
        for seqno in oob:
            entry.table.add(seqno, None)
        self.sync_wanted.discard(peer)
        self.counters["recv_conns_opened"] += 1
        return entry

    def _cache(self, peer: Address, hdr: Unicast3Header, msg: Message) -> None:
        """Keep a message that has no window yet, and want a SEND_FIRST_SEQNO."""
        floor = self.floors.get(peer)
        if floor is not None and (
            floor.conn_id == hdr.conn_id or conn_newer(floor.conn_id, hdr.conn_id)
        ):
            self.counters["stale"] += 1  # of a closed or older connection
            return
        self.sync_wanted.add(peer)
        cache = self.cache.setdefault(peer, {})
        if len(cache) < _MAX_CACHED:
            cache[(hdr.conn_id, hdr.seqno)] = msg
            self.counters["cached"] += 1
        else:
            self.counters["cache_dropped"] += 1

    def on_close(self, peer: Address, hdr: Unicast3Header, now: float) -> None:
        """CLOSE: remove the window if the connection id matches (seed 001)."""
        self.counters["closes_received"] += 1
        entry = self.entries.get(peer)
        if entry is not None:
            if entry.conn_id != hdr.conn_id:
                return
            self.transition(peer, entry, Input.DROP, now)
            self.counters["recv_conns_removed"] += 1
        else:
            floor = self.floors.get(peer)
            if floor is not None and conn_newer(floor.conn_id, hdr.conn_id):
                return  # the CLOSE of a connection older than the one we know of
        self.floors[peer] = Floor(hdr.conn_id, _CLOSED_FLOOR, (), now)

    # --- the retransmit task -----------------------------------------------------------

    def tick(self, now: float, out: list[Message]) -> None:
        """Send pending acks and XMIT_REQs, reap windows, send wanted SEND_FIRST_SEQNOs."""
        for peer, entry in list(self.entries.items()):
            if entry.ack_pending:
                self._send_ack(peer, entry, out)
            self._ask_missing(peer, entry, out)
            self._reap(peer, entry, now)
        self._expire(now)
        self._send_first_seqno_requests(now, out)

    def _send_ack(self, peer: Address, entry: ReceiverEntry, out: list[Message]) -> None:
        hd = entry.table.hd
        hdr = Unicast3Header(ACK, hd, entry.conn_id, timestamp=self._timestamp())
        out.append(Message(peer, flags=_INTERNAL, headers={ID: hdr}))
        entry.ack_pending = False
        entry.acked = hd
        self.counters["acks_sent"] += 1

    def _timestamp(self) -> int:
        self.timestamper = next_timestamp(self.timestamper)
        return self.timestamper

    def _ask_missing(self, peer: Address, entry: ReceiverEntry, out: list[Message]) -> None:
        """XMIT_REQ for the gaps that were already missing at the previous run (seed 001).

        "Already missing" means not above the highest seqno received at the
        previous run: remembering the highest seqno of a capped list instead
        (as JGroups does) made every other run after a capped one ask for
        nothing (issue 12). A request holds at most `Unicast3.request_cap`
        seqnos; a capped one leaves a cursor, so the next run starts after the
        last seqno asked and wraps round to the lowest gap: the gaps left out
        are asked next. No gap old enough: no request at all.
        """
        table = entry.table
        if table.hr - table.hd == len(table):
            entry.xmit_seen = entry.xmit_next = None
            return
        seen = entry.xmit_seen
        entry.xmit_seen = table.hr
        if seen is None:
            return
        cap = self.proto.request_cap(peer)
        low = table.hd + 1
        start = entry.xmit_next
        if start is None or start <= low or start > seen:
            start = low
        ahead = _gaps(table, start, seen, cap)
        behind = _gaps(table, low, start - 1, cap - len(ahead)) if len(ahead) < cap else []
        missing = behind + ahead
        entry.xmit_next = (behind or ahead)[-1] + 1 if len(missing) == cap else None
        if not missing:
            return
        hdr = Unicast3Header(XMIT_REQ, missing=tuple(missing))
        out.append(Message(peer, flags=_CONTROL, headers={ID: hdr}))
        self.counters["xmit_reqs_sent"] += len(missing)
        self.counters["xmit_req_msgs_sent"] += 1

    def _reap(self, peer: Address, entry: ReceiverEntry, now: float) -> None:
        """OPEN -> CLOSING when idle; CLOSING -> CLOSED (removed, floor kept) after a while."""
        proto = self.proto
        if entry.state is State.OPEN:
            expiry = proto.conn_expiry_timeout
            if expiry > 0 and now - entry.last_used >= expiry:
                self.transition(peer, entry, Input.IDLE, now)
        elif proto.conn_close_timeout > 0 and now - entry.last_used >= proto.conn_close_timeout:
            self.transition(peer, entry, Input.EXPIRED, now)
            self.counters["recv_conns_removed"] += 1
            table = entry.table
            oob = tuple(seqno for seqno, msg in table.items() if msg is None)
            self.floors[peer] = Floor(entry.conn_id, table.hd, oob, now)

    def _expire(self, now: float) -> None:
        """Age out last-sync-sent entries, caches nobody waits for, non-members' floors."""
        proto = self.proto
        interval = proto.sync_min_interval
        for peer, sent in list(self.last_sync_sent.items()):
            if now - sent >= interval:
                del self.last_sync_sent[peer]
        for peer in list(self.cache):
            if peer not in self.sync_wanted and peer not in self.last_sync_sent:
                self._drop_cache(peer)
        for peer, floor in list(self.floors.items()):
            if now - floor.since >= proto.conn_close_timeout and not proto.is_member(peer):
                del self.floors[peer]

    def _send_first_seqno_requests(self, now: float, out: list[Message]) -> None:
        """At most one SEND_FIRST_SEQNO per sender per ``sync_min_interval`` (seed 000)."""
        for peer in list(self.sync_wanted):
            if peer in self.last_sync_sent:
                self.counters["send_first_seqno_suppressed"] += 1
                continue
            self.sync_wanted.discard(peer)
            self.last_sync_sent[peer] = now
            hdr = Unicast3Header(SEND_FIRST_SEQNO, timestamp=self._timestamp())
            out.append(Message(peer, flags=_CONTROL, headers={ID: hdr}))
            self.counters["send_first_seqno_sent"] += 1

    def _drop_cache(self, peer: Address) -> None:
        dropped = self.cache.pop(peer, None)
        if dropped:
            self.counters["cache_dropped"] += len(dropped)

    # --- connection management -----------------------------------------------------------

    def view_changed(self, view: View, now: float) -> None:
        """As `ConnectionTable.view_changed`, and early messages of non-members are dropped."""
        super().view_changed(view, now)
        for peer in [p for p in self.cache if p not in view]:
            self._drop_cache(peer)

    def flush_acks(self, out: list[Message]) -> None:
        """Send every pending ack now (the member is leaving)."""
        for peer, entry in self.entries.items():
            if entry.ack_pending:
                self._send_ack(peer, entry, out)

    def busy(self) -> bool:
        return bool(
            self.entries or self.floors or self.cache or self.sync_wanted or self.last_sync_sent
        )

    def gauges(self) -> dict[str, Any]:
        return {
            "cache_size": sum(len(c) for c in self.cache.values()),
            "floors": len(self.floors),
            "undelivered": sum(len(e.table) for e in self.entries.values()),
        }
