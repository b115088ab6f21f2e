"""UNICAST3: reliable, ordered unicast with positive, cumulative, delayed acks.

Seeds 001 (UNICAST3) and 000 (receiver sync). The sender numbers messages per
destination connection and keeps them until acked; the receiver delivers
each sender's messages in seqno order, acks the highest delivered, asks for
gaps with XMIT_REQ, and syncs a window it lacks with SEND_FIRST_SEQNO. The two
halves live in `_sender` and `_receiver`; this class routes batches, events
and the retransmit task (every ``xmit_interval``) between them.

Only unicasts are handled: multicasts and NO_RELIABILITY messages pass
through untouched. A protocol never awaits, never reads a clock: ``now`` is
passed in.

Choices where the seeds leave room (JGroups' behaviour unless said):

- A unicast to self is delivered here, at once and in send order, without a
  seqno and without touching the network (JGroups' ``loopback``); one with
  DONT_LOOPBACK is dropped, as in JGroups.
- ``ack_threshold`` counts messages *delivered* since the last ack sent.
- The SEND_FIRST_SEQNO flag is a per-sender set rather than a field of the
  receiver entry: seed 000 notes the entry is usually missing exactly when a
  sync is needed. It is cleared when the window is opened or the request sent.
- A CLOSING send connection to a member is removed only after every message
  is acked (the flush seed 001 asks for); to a non-member it is removed after
  ``conn_close_timeout`` whatever is left. CLOSE goes to the peer unless the
  installed view lacks it.
- ``max_retransmit_time`` gives up on a peer that is not in the installed
  view (or with no view yet) and has acked nothing new for that long; members
  are left to failure detection, as in JGroups.
- A member that leaves the view (the previous installed view had it, the new
  one has not) has its send connection dropped with that view: what it did
  not ack is given up (``msgs_given_up``, ``send_conns_departed``) and nothing
  more is resent to it (issue 38: a coordinator resent a LEAVE_RSP whose ack
  the leaver never sent for ``max_retransmit_time``). JGroups only closes the
  connection and resends for up to ``max_retransmit_time``; the departed
  member is owed nothing (no promise for a member that leaves or is
  suspected), and its leave flush is over before the view that drops it.
  Connections to peers that were not in the previous view (a joiner's
  JOIN_RSP, a merge partner, a VIEW_ACK to a coordinator that left) keep the
  rule above. A member merged back later gets a new connection.
- Connection ids are 16 bits and compared wrap-around-safe, so a late first
  message of an older connection cannot replace a newer window.
- Removed receive windows leave a *floor* (see `_receiver`) so a connection
  reaped on the receiver side resumes without duplicate deliveries.
- ``max_xmit_req_size`` 0 means as many seqnos as fit one datagram of the
  transport below (its ``max_bundle_size``, 9 bytes per seqno). Whatever the
  property, a request is sent only if it fits one bundle once encoded (names
  and cluster included); the gaps a capped request leaves out are asked at the
  next run, and a run with no gap old enough sends no request (issue 12).
- Leaving (issue 37): GMS's `FlushRequest` is answered with `FlushDone` once
  every unicast we sent to a member of the view is acked (at once if so
  already); the retransmit task resends what is unacked meanwhile. Unicasts
  to non-members are not waited for: nobody may be there to ack them. A
  `Disconnect` that comes first (the flush timed out) logs at WARNING what
  was unacked.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from triogroups.address import Address
from triogroups.events import Disconnect, Event, FlushDone, FlushRequest
from triogroups.message import Flag, Message
from triogroups.properties import Duration, Int, at_least, positive
from triogroups.protocol import Passes, Protocol
from triogroups.protocols import ids
from triogroups.protocols._batch import carries
from triogroups.protocols._stats import reliable_stats
from triogroups.protocols.unicast3._common import (
    ACK,
    CLOSE,
    DATA,
    ID,
    SEND_FIRST_SEQNO,
    XMIT_REQ,
    header_ok,
)
from triogroups.protocols.unicast3._receiver import RECEIVER_COUNTERS, DataItem, Receiver
from triogroups.protocols.unicast3._sender import SENDER_COUNTERS, Sender
from triogroups.view import View
from triogroups.wire import MAX_DATAGRAM

__all__ = ["Unicast3"]

_log = logging.getLogger(__name__)
_NO_RELIABILITY = int(Flag.NO_RELIABILITY)
_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
_SEQNO_BYTES = 9  # a msgpack uint64
_HEADER_ROOM = 128  # bundle envelope, addresses, the rest of the header
#: A request's bundle besides its seqnos and names, at most: prefix and cluster-name
#: length (5), an authenticator's tag (256), msgpack framing of bundle, message and
#: header (< 64).
_REQ_FRAMING = 325
_ADDRESS_BYTES = 20  # ext header and UUID of each of the bundle's two addresses
_CONN_MOD = 1 << 16  # connection ids are 16 bits (see header_ok)


class Unicast3(Protocol):
    """Reliable unicast (seeds 001 and 000); see the module docstring."""

    name = "UNICAST3"
    id = ids.UNICAST3
    COUNTERS = (*SENDER_COUNTERS, *RECEIVER_COUNTERS, "loopbacks", "malformed")

    xmit_interval = Duration(
        0.5,
        doc="how often the retransmit task runs: delayed acks, XMIT_REQs, HS resends, reaping",
        check=positive,
    )
    ack_threshold = Int(
        100,
        doc="ack at once when this many messages were delivered since the last ack",
        check=at_least(1),
    )
    conn_expiry_timeout = Duration(
        120.0,
        doc="an idle OPEN connection goes to CLOSING after this long (0: never)",
        check=at_least(0),
    )
    conn_close_timeout = Duration(
        240.0,
        doc="a CLOSING connection is removed after this long (0: never)",
        check=at_least(0),
    )
    max_retransmit_time = Duration(
        60.0,
        doc="give up on messages to a non-member that acked nothing for this long (0: never)",
        check=at_least(0),
    )
    sync_min_interval = Duration(
        2.0,
        doc="min time between two SEND_FIRST_SEQNO to the same sender",
        check=at_least(0),
    )
    max_xmit_req_size = Int(
        0,
        doc="max seqnos in one XMIT_REQ (0: as many as fit one datagram)",
        check=at_least(0),
    )
    max_xmits_per_interval = Int(
        5000,
        doc="messages resent for one member's XMIT_REQs per xmit_interval; "
        "the rest of its requests is ignored and counted",
        check=at_least(1),
    )
    max_receive_window = Int(
        100_000,
        doc="seqnos kept per connection ahead of the next one to deliver; a message "
        "beyond is dropped and counted (a sender that never fills its gaps)",
        check=at_least(1),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.sender = Sender(self)
        self.receiver = Receiver(self)
        self._bundle_size = MAX_DATAGRAM  # until check_stack learns the transport's
        self._next_tick = math.inf
        self._flushing = False  # GMS's FlushRequest is not answered yet

    # --- configuration ---------------------------------------------------------------

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        size = getattr(below[0], "max_bundle_size", None) if below else None
        if isinstance(size, int) and size > 0:
            self._bundle_size = size

    @property
    def xmit_req_cap(self) -> int:
        """Most seqnos one XMIT_REQ may carry (asked for, or accepted from a peer)."""
        fit = max(1, (self._bundle_size - _HEADER_ROOM) // _SEQNO_BYTES)
        return min(self.max_xmit_req_size, fit) if self.max_xmit_req_size else fit

    def request_cap(self, peer: Address) -> int:
        """Most seqnos in an XMIT_REQ to ``peer``: `xmit_req_cap`, and few enough
        that the request, encoded, fits one bundle whatever the seqnos (JGRP-1868)."""
        me = self.local_address
        names = len((me.name if me else "").encode()) + len(peer.name.encode())
        room = _REQ_FRAMING + len(self.cluster.encode()) + 2 * _ADDRESS_BYTES + names
        return max(1, min(self.xmit_req_cap, (self._bundle_size - room) // _SEQNO_BYTES))

    def property_changed(self, key: str, now: float) -> None:
        if key == "xmit_interval" and self._next_tick != math.inf:
            self._next_tick = now + self.xmit_interval

    def is_member(self, peer: Address) -> bool:
        """True if the installed view has ``peer`` (False before any view)."""
        return self.view is not None and peer in self.view

    def may_be_member(self, peer: Address) -> bool:
        """False only if an installed view lacks ``peer``."""
        return self.view is None or peer in self.view

    # --- messages ---------------------------------------------------------------------

    def down(self, batch: list[Message], now: float) -> None:
        """Number unicasts per destination; consecutive messages to one peer go as a run."""
        out: list[Message] = []
        me = self.local_address
        send = self.sender.send
        run: list[Message] = []
        run_dest: Address | None = None
        for msg in batch:
            dest = msg.dest
            if dest is run_dest and dest is not None and not msg.flags & _NO_RELIABILITY:
                run.append(msg)
                continue
            if run:
                assert run_dest is not None
                send(run_dest, run, now, out)
                run, run_dest = [], None
            if dest is None or msg.flags & _NO_RELIABILITY:
                out.append(msg)
            elif dest == me:
                self._loopback(msg)
            else:
                run, run_dest = [msg], dest
        if run:
            assert run_dest is not None
            send(run_dest, run, now, out)
        self.send_down(out)
        self._arm(now)

    def _loopback(self, msg: Message) -> None:
        if msg.flags & _DONT_LOOPBACK:
            return
        msg.src = self.local_address
        self.counters["loopbacks"] += 1
        self.send_up_one(msg)

    @property
    def passes_up(self) -> Passes | None:
        """Multicasts are not its business, unless its retransmit task is idle while it
        has work (a view change closed connections): then any handler arms it."""
        return "multicasts" if self._next_tick != math.inf or not self._busy() else None

    passes_down = passes_up  # the same holds for `down`, which arms the task too

    def up(self, batch: list[Message], now: float) -> None:
        if not carries(batch, ID):  # multicasts only (the data path of a group): as it is
            self.send_up(batch)
            self._arm(now)
            return
        others: list[Message] = []
        data: dict[Address, list[DataItem]] = {}
        out: list[Message] = []
        sender = self.sender
        cap = 0  # `xmit_req_cap`, read for the first message that is not DATA
        last_src: Address | None = None  # runs from one sender skip the dict (Address.__hash__)
        last_items: list[DataItem] = []
        for msg in batch:
            hdr = msg.headers.get(ID)
            if hdr is None or msg.dest is None or msg.flags & _NO_RELIABILITY:
                others.append(msg)
                continue
            src = msg.src
            kind = hdr.type
            if kind == DATA:  # header_ok's DATA case, inline: this runs for every message
                ok = hdr.seqno >= 1 and 0 <= hdr.conn_id < _CONN_MOD
            else:
                if not cap:
                    cap = self.xmit_req_cap
                ok = header_ok(hdr, cap)
            if src is None or not ok:
                self.counters["malformed"] += 1
                continue
            if kind == DATA:
                if src is last_src:
                    last_items.append((hdr, msg))
                    continue
                items = data.get(src)
                if items is None:
                    items = data[src] = [(hdr, msg)]
                else:
                    items.append((hdr, msg))
                last_src, last_items = src, items
            elif kind == ACK:
                sender.on_ack(src, hdr, now)
            elif kind == SEND_FIRST_SEQNO:
                sender.on_send_first_seqno(src, hdr, out)
            elif kind == XMIT_REQ:
                sender.on_xmit_req(src, hdr, out, now)
            elif kind == CLOSE:
                self.receiver.on_close(src, hdr, now)
        delivered: list[Message] = []
        for src, items in data.items():
            self.receiver.on_data(src, items, now, delivered, out)
        self.send_down(out)
        self.send_up(delivered)
        self.send_up(others)
        self._arm(now)
        self._check_flushed()

    # --- events and connections -----------------------------------------------------------

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, FlushRequest):
            self._flushing = True
            self._check_flushed()
        elif isinstance(event, Disconnect):
            self._unflushed()
            out: list[Message] = []
            self.receiver.flush_acks(out)
            self.send_down(out)
        super().down_event(event, now)

    def view_changed(self, view: View, now: float) -> None:
        """Send connections to members that left are dropped; the other connections of
        non-members go to CLOSING (both halves), as in JGroups."""
        old = self.view
        super().view_changed(view, now)
        if old is not None:
            self.sender.drop_departed([p for p in old.members if p not in view], now)
        self.sender.view_changed(view, now)
        self.receiver.view_changed(view, now)
        self._check_flushed()

    # --- leaving: the flush ---------------------------------------------------------------

    def _unacked(self) -> dict[Address, int]:
        """Per member of the view: how many unicasts we sent it are not acked yet."""
        return {
            peer: len(entry.table)
            for peer, entry in self.sender.entries.items()
            if entry.table and self.may_be_member(peer)
        }

    def _check_flushed(self) -> None:
        """Answer GMS's `FlushRequest` once every unicast to a member is acked."""
        if self._flushing and not self._unacked():
            self._flushing = False
            self.pass_up(FlushDone(self.name))

    def _unflushed(self) -> None:
        """We leave before the flush ended: say what was not acked."""
        if self._flushing:
            self._flushing = False
            _log.warning(
                "%s: left with unicasts not acked: %s",
                self.local_address,
                ", ".join(f"{n} to {p}" for p, n in self._unacked().items()) or "none",
            )

    def close_connection(self, peer: Address, now: float) -> None:
        """Set both connections with ``peer`` to CLOSING (JGroups' closeConnection)."""
        self.sender.close(peer, now)
        self.receiver.close(peer, now)

    # --- the retransmit task ------------------------------------------------------------

    def _arm(self, now: float) -> None:
        if self._next_tick == math.inf and self._busy():
            self._next_tick = now + self.xmit_interval

    def _busy(self) -> bool:
        return bool(self.sender.entries) or self.receiver.busy()

    def next_deadline(self) -> float:
        return self._next_tick

    def tick(self, now: float) -> None:
        """The retransmit task: receiver side first (acks, XMIT_REQs), then senders."""
        out: list[Message] = []
        self.receiver.tick(now, out)
        self.sender.tick(now, out)
        self.send_down(out)
        self._check_flushed()
        self._next_tick = now + self.xmit_interval if self._busy() else math.inf

    # --- observability -----------------------------------------------------------------

    def gauges(self) -> dict[str, Any]:
        """Every connection's window and state, the sender's and the receiver's gauges,
        and the keys every reliable protocol shares (`reliable_stats`; ``pending_acks``:
        receive connections whose ack is delayed; xmit requests count seqnos asked for)."""
        counters, recv = self.counters, self.receiver
        states = self.sender.states()
        for state, count in self.receiver.states().items():
            states[state] += count
        return {
            **reliable_stats(
                sent=counters["msgs_sent"],
                received=counters["msgs_received"],
                delivered=counters["msgs_delivered"] + counters["loopbacks"],
                xmit_reqs_sent=counters["xmit_reqs_sent"],
                xmit_reqs_received=counters["xmit_reqs_received"],
                retransmitted=counters["xmit_rsps_sent"] + counters["retransmissions"],
                peer_windows={
                    str(p): (e.table.hd, e.table.hd, e.table.hr) for p, e in recv.entries.items()
                },
                pending_acks=sum(1 for e in recv.entries.values() if e.ack_pending),
            ),
            **self.sender.gauges(),
            **self.receiver.gauges(),
            "timestamp": self.receiver.timestamper,
            "connections": states,
            "send_conns": {str(p): e.snapshot() for p, e in self.sender.entries.items()},
            "recv_conns": {str(p): e.snapshot() for p, e in self.receiver.entries.items()},
        }
