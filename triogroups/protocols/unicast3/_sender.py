"""UNICAST3's sender half: one send window per destination, purged by acks.

Each destination has a `SenderEntry`: a connection id, a `SeqnoTable` of the
messages sent and not yet acked (``hd`` is the highest acked, HA; ``hr`` the
highest sent, HS), a state (OPEN / CLOSING / CLOSED) and the timestamp of the
last ACK or SEND_FIRST_SEQNO taken from the receiver (seed 000).

The sender never guesses what was lost: the retransmit task resends only the
highest-sent message, and only when HA < HS and both were unchanged since the
previous run (seed 001); the receiver then asks for its gaps with XMIT_REQ.
Plain synchronous code: the protocol passes ``now`` and lists to append to.
"""

from __future__ import annotations

from typing import Any

from triogroups.address import Address
from triogroups.message import Flag, Message
from triogroups.protocols._budget import PeerBudget
from triogroups.protocols._table import SeqnoTable
from triogroups.protocols.unicast3._common import (
    CLOSE,
    ID,
    ConnectionTable,
    Input,
    State,
    Unicast3Header,
    next_conn_id,
    timestamp_newer,
)
from triogroups.protocols.unicast3._context import Unicast3Context

__all__ = ["Sender", "SenderEntry"]

_INTERNAL = int(Flag.INTERNAL)
_OPEN = State.OPEN


class SenderEntry:
    """The send side of one connection."""

    __slots__ = (
        "conn_id",
        "last_timestamp",
        "last_used",
        "progress",
        "state",
        "table",
        "watermark",
    )

    def __init__(self, conn_id: int, now: float) -> None:
        self.conn_id = conn_id
        self.table: SeqnoTable[Message] = SeqnoTable()
        self.state = State.OPEN
        #: Last send or state change: connection reaping measures idleness from here.
        self.last_used = now
        #: Last time the peer acked something new (or the window stopped being empty).
        self.progress = now
        #: (HA, HS) as seen by the previous retransmit run.
        self.watermark = (0, 0)
        #: Timestamp of the last ACK / SEND_FIRST_SEQNO accepted; 0 before the first.
        self.last_timestamp = 0

    def accept_timestamp(self, ts: int) -> bool:
        """Take ``ts`` if it is newer than the last one taken (seed 000); False: drop it."""
        if self.last_timestamp and not timestamp_newer(ts, self.last_timestamp):
            return False
        self.last_timestamp = ts
        return True

    def snapshot(self) -> dict[str, Any]:
        t = self.table
        return {
            "conn_id": self.conn_id,
            "state": self.state.value,
            "highest_acked": t.hd,
            "highest_sent": t.hr,
            "window": len(t),
            "last_timestamp": self.last_timestamp,
        }


#: The sender's counters, kept in `Unicast3.counters` under these names.
SENDER_COUNTERS = (
    "msgs_sent",
    "acks_received",
    "acks_dropped_stale",  # timestamp not newer than the last one (seed 000)
    "acks_dropped_conn",  # for a connection that no longer exists
    "send_first_seqno_received",
    "send_first_seqno_dropped",  # stale timestamp (seed 000)
    "send_first_seqno_unknown",  # no send window for the asker
    "first_resent",
    "xmit_reqs_received",  # seqnos asked for
    "xmit_rsps_sent",
    "xmits_capped",
    "retransmissions",  # highest-sent resends by the retransmit task
    "msgs_given_up",
    "send_conns_reopened",
    "send_conns_removed",
    "send_conns_departed",  # connections dropped because their peer left the view
    "closes_sent",
)


class Sender(ConnectionTable[SenderEntry]):
    """All send windows of one UNICAST3 instance, plus the sender's counters."""

    def __init__(self, proto: Unicast3Context) -> None:
        self.proto = proto
        #: The protocol's counters (`Protocol.counters`): the sender counts there.
        self.counters = proto.counters
        super().__init__()
        self._conn_id = -1
        self.budget = PeerBudget()

    # --- sending ---------------------------------------------------------------

    def send(self, dest: Address, msgs: list[Message], now: float, out: list[Message]) -> None:
        """Number a run of messages to ``dest`` on its connection, keep them until acked,
        send them (appended to ``out``)."""
        entry = self.entries.get(dest)
        if entry is None:
            self._conn_id = next_conn_id(self._conn_id)
            entry = self.entries[dest] = SenderEntry(self._conn_id, now)
        elif entry.state is not _OPEN:  # a send reopens a closing connection (seed 001)
            self.transition(dest, entry, Input.USE, now)
            self.counters["send_conns_reopened"] += 1
        table = entry.table
        if table.hd == table.hr:  # the window was empty: the wait for an ack starts now
            entry.progress = now
        entry.last_used = now
        conn_id = entry.conn_id
        headers = Unicast3Header.data_run(table.append_run(msgs), conn_id, len(msgs))
        for msg, hdr in zip(msgs, headers, strict=True):
            msg.headers[ID] = hdr
        self.counters["msgs_sent"] += len(msgs)
        out += msgs

    # --- what the receiver tells us ------------------------------------------------

    def on_ack(self, peer: Address, hdr: Unicast3Header, now: float) -> None:
        """Cumulative ack: purge everything <= seqno, unless the ack is stale."""
        entry = self.entries.get(peer)
        if entry is None or entry.conn_id != hdr.conn_id:
            self.counters["acks_dropped_conn"] += 1
            return
        if not entry.accept_timestamp(hdr.timestamp):
            self.counters["acks_dropped_stale"] += 1
            return
        self.counters["acks_received"] += 1
        table = entry.table
        upto = min(hdr.seqno, table.hr)  # an ack beyond what was sent is bogus: clamp
        if upto > table.hd:
            table.purge(upto)
            entry.progress = now

    def on_send_first_seqno(self, peer: Address, hdr: Unicast3Header, out: list[Message]) -> None:
        """Resend the lowest unacked message marked first, unless the request is stale."""
        entry = self.entries.get(peer)
        if entry is None:
            self.counters["send_first_seqno_unknown"] += 1
            return
        if not entry.accept_timestamp(hdr.timestamp):
            self.counters["send_first_seqno_dropped"] += 1
            return
        self.counters["send_first_seqno_received"] += 1
        table = entry.table
        msg = table.get(table.hd + 1)
        if msg is None:
            return
        copy = msg.copy()  # the stored message keeps its own header
        copy.headers[ID] = copy.headers[ID]._replace(first=True)
        self.counters["first_resent"] += 1
        out.append(copy)

    def on_xmit_req(
        self, peer: Address, hdr: Unicast3Header, out: list[Message], now: float
    ) -> None:
        """Resend the requested messages that are still in the window, at most
        ``max_xmits_per_interval`` per peer per interval (`PeerBudget`)."""
        self.counters["xmit_reqs_received"] += len(hdr.missing)
        entry = self.entries.get(peer)
        if entry is None:
            return
        proto = self.proto
        missing = hdr.missing
        granted = self.budget.take(
            peer, len(missing), proto.max_xmits_per_interval, proto.xmit_interval, now
        )
        if granted < len(missing):
            self.counters["xmits_capped"] += len(missing) - granted
            missing = missing[:granted]
        get = entry.table.get
        for seqno in missing:
            msg = get(seqno)
            if msg is not None:
                out.append(msg)
                self.counters["xmit_rsps_sent"] += 1

    # --- the retransmit task ----------------------------------------------------------

    def tick(self, now: float, out: list[Message]) -> None:
        """Resend HS where HA/HS is stuck; give up on silent non-members; reap connections."""
        proto = self.proto
        for peer, entry in list(self.entries.items()):
            table = entry.table
            ha_hs = (table.hd, table.hr)
            if ha_hs[0] < ha_hs[1]:
                if (
                    proto.max_retransmit_time > 0
                    and now - entry.progress >= proto.max_retransmit_time
                    and not proto.is_member(peer)
                ):
                    self._remove(peer, entry, Input.DROP, now, out, close=False)
                    continue
                if entry.watermark == ha_hs:
                    msg = table.get(ha_hs[1])
                    if msg is not None:
                        out.append(msg)
                        self.counters["retransmissions"] += 1
                else:
                    entry.watermark = ha_hs
            else:
                entry.watermark = ha_hs
            self._reap(peer, entry, now, out)

    def _reap(self, peer: Address, entry: SenderEntry, now: float, out: list[Message]) -> None:
        """OPEN -> CLOSING when idle; CLOSING -> CLOSED (removed, CLOSE sent) when flushed.

        A CLOSING connection to a member is removed only once every message is
        acked: the retransmit task flushes it first (seed 001), and dropping
        unacked messages to a member would break the delivery contract.
        """
        proto = self.proto
        if entry.state is State.OPEN:
            expiry = proto.conn_expiry_timeout
            if expiry > 0 and now - entry.last_used >= expiry:
                self.transition(peer, entry, Input.IDLE, now)
        elif proto.conn_close_timeout > 0 and now - entry.last_used >= proto.conn_close_timeout:
            if not entry.table:
                self._remove(peer, entry, Input.EXPIRED, now, out, close=proto.may_be_member(peer))
            elif not proto.is_member(peer):
                self._remove(peer, entry, Input.EXPIRED, now, out, close=False)

    def _remove(
        self,
        peer: Address,
        entry: SenderEntry,
        event: Input,
        now: float,
        out: list[Message],
        *,
        close: bool,
    ) -> None:
        """Remove the connection; what is still unacked is given up (counted)."""
        self.transition(peer, entry, event, now)
        self.counters["send_conns_removed"] += 1
        self.counters["msgs_given_up"] += len(entry.table)
        if close:
            hdr = Unicast3Header(CLOSE, conn_id=entry.conn_id)
            out.append(Message(peer, flags=_INTERNAL, headers={ID: hdr}))
            self.counters["closes_sent"] += 1

    # --- connection management ---------------------------------------------------------

    def drop_departed(self, peers: list[Address], now: float) -> None:
        """Remove the connections to ``peers``, members that left the installed view: what
        they did not ack is given up (counted) and nothing is resent to them. No CLOSE goes
        out: a peer outside the view gets none (JGroups' removeSendConnection)."""
        for peer in peers:
            entry = self.entries.get(peer)
            if entry is not None:
                self._remove(peer, entry, Input.DROP, now, [], close=False)
                self.counters["send_conns_departed"] += 1

    def gauges(self) -> dict[str, Any]:
        return {
            "unacked": sum(len(e.table) for e in self.entries.values()),
        }
