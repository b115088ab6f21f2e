"""MCAST: reliable multicast with a fixed-capacity window per member (seed 004, JGRP-2780).

Unlike NAKACK2, MCAST's windows never grow: each member keeps one
`RingBuffer` of ``capacity`` slots for what it sent and one per other member
for what it received. A full send window blocks the sender (MCAST holds
what it cannot send and answers True from `blocks_down`, so new sends wait at
the top of the stack while acks and view changes keep flowing); a receiver
drops what lies beyond its window. The window
is the flow control: no MFC is needed above MCAST.

The seed's rules, in one paragraph each; the module that implements a rule
states it in full, with the choices made where the seed is open:

- *Send* (`_sender`): the next seqno ``S``, adding the message to the send
  window and handing it down happen in one synchronous handler call, so
  concurrent senders can never put seqnos on the wire out of order (the seed's
  "Misc" lock, free here). If ``S - low >= capacity`` the message waits, in
  order, with every later multicast; control multicasts (INTERNAL) never wait.
- *Receive* (`_receiver`): messages outside ``[low, low + capacity)`` are
  dropped; new ones are stored and delivered up to the first gap. OOB messages
  are delivered as soon as they arrive.
- *Ack* (`_receiver`, `_sender`): receivers ack the highest delivered seqno to
  the sender after ``ack_threshold`` deliveries (default ``capacity // 4``) and
  otherwise every ``xmit_interval``. The sender keeps an ack map over the
  view's other members, purges its window up to the minimum, and sends what
  was waiting.
- *Retransmit* (`_receiver`, `_sender`): every ``xmit_interval`` a receiver
  sends XMIT_REQ with the missing seqnos of each window to their sender, which
  answers each with the original message as a unicast to the requester
  (XMIT_RSP, original sender in the header), or with PURGED for what it no
  longer holds.
- *Views and digests* (`_membership`): windows are removed for members that
  left and created for new ones; `SetDigest` and `MergeDigest` move a
  member's window to the digest's delivered seqno. `GetDigest` is answered
  with a `DigestReply`.

The package, one job a module: this module holds the `Mcast` layer (its
properties, the in-order receive path, routing batches, events and the
retransmission timer between the sides, and the gauges); `_sender` the send
window, acks, retransmissions and the leave's flush; `_receiver` the receive
windows, acks owed and gaps asked for; `_membership` the windows across views
and digests and the joiner's wait; `_state` the `McastState` they share;
`_context` what the sides may call of `Mcast`; `_header` the header.

Also: unicasts and NO_RELIABILITY messages pass through untouched.
`StableDigest` is passed on and otherwise ignored: acks, not STABLE, purge
MCAST's window. ``capacity`` cannot change at run time (JGroups: not
writable).

Never awaits, never reads a clock: ``now`` is passed in.
"""

from __future__ import annotations

import math
from typing import Any

from triogroups.address import Address
from triogroups.events import (
    BecomeServer,
    DigestReply,
    Disconnect,
    Event,
    FlushRequest,
    GetDigest,
    MergeDigest,
    SetDigest,
    TmpView,
)
from triogroups.message import Message
from triogroups.properties import Duration, Int, PropertyError, at_least, positive
from triogroups.protocol import Protocol
from triogroups.protocols import ids
from triogroups.protocols._stats import reliable_stats
from triogroups.protocols._view_digest import ViewDigest
from triogroups.protocols.mcast._header import (
    ACK,
    MSG,
    OOB,
    PURGED,
    XMIT_REQ,
    XMIT_RSP,
    McastHeader,
    as_header,
)
from triogroups.protocols.mcast._membership import Membership
from triogroups.protocols.mcast._receiver import Receiver
from triogroups.protocols.mcast._sender import Sender
from triogroups.protocols.mcast._state import COUNTERS as _COUNTERS
from triogroups.protocols.mcast._state import DURATIONS as _DURATIONS
from triogroups.protocols.mcast._state import McastState, window_stats
from triogroups.view import Digest, View

__all__ = ["ACK", "MSG", "PURGED", "XMIT_REQ", "XMIT_RSP", "Mcast", "McastHeader", "as_header"]


def _position(msg: Message) -> tuple[Address, int] | None:
    """A delivered multicast's sender and seqno (None if MCAST did not number it)."""
    hdr = msg.headers.get(ids.MCAST)
    if hdr is None or msg.dest is not None or msg.src is None:
        return None
    if type(hdr) is int:
        return msg.src, hdr
    sender = hdr.sender if hdr.type == XMIT_RSP and hdr.sender is not None else msg.src
    return sender, hdr.seqno


class Mcast(Protocol):
    """Reliable multicast over fixed-size windows; see the module docstring."""

    name = "MCAST"
    id = ids.MCAST
    COUNTERS = _COUNTERS
    DURATIONS = _DURATIONS

    capacity = Int(
        2048,
        doc="messages in each window (send and receive); fixed at run time",
        check=at_least(2),
    )
    ack_threshold = Int(
        0,
        doc="deliveries after which a receiver acks at once (0: capacity // 4)",
        check=at_least(0),
    )
    xmit_interval = Duration(
        1.0,
        doc="period of retransmission requests, pending acks and last-seqno resends",
        check=positive,
    )
    max_xmits_per_interval = Int(
        5000,
        doc="messages resent for one member's XMIT_REQs per xmit_interval; "
        "the rest of its requests is ignored and counted",
        check=at_least(1),
    )
    become_server_queue_size = Int(
        50,
        doc="multicasts a joiner keeps until its digest gives their senders windows "
        "(the newest are kept)",
        check=at_least(1),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        # What more than one side reads lives in `_state`; the three sides share it.
        self._state = McastState(
            self.capacity, self.become_server_queue_size, self.counters, self.durations
        )
        self._sender = Sender(self, self._state)
        self._receiver = Receiver(self, self._state)
        self._membership = Membership(self, self._state)
        self._view_digest = ViewDigest()
        self._next_tick = math.inf

    # --- configuration -----------------------------------------------------------

    def set_property(self, key: str, value: Any, now: float) -> None:
        if key == "capacity":
            raise PropertyError(f"MCAST.capacity cannot change at run time, got {value!r}")
        super().set_property(key, value, now)

    def property_changed(self, key: str, now: float) -> None:
        if key == "ack_threshold":
            self._receiver.threshold_changed()
        elif key == "become_server_queue_size":
            self._membership.apply_queue_bound(self.become_server_queue_size)
        elif key == "xmit_interval":
            self._next_tick = now + self.xmit_interval

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        if any(p.name == "NAKACK2" for p in (*below, *above)):
            raise PropertyError("MCAST replaces NAKACK2: a stack cannot have both")

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self._next_tick = now + self.xmit_interval

    # --- sending and receiving ------------------------------------------------------

    def down(self, batch: list[Message], now: float) -> None:
        self._sender.down(batch, now)

    def blocks_down(self) -> bool:
        return bool(self._state.pending)

    def parked(self) -> tuple[Message, ...]:
        """The application's multicasts taken from above and still waiting for room in the
        send window, oldest first: not numbered and never sent, so a process that dies now
        loses them as it loses what its socket buffer holds (the test kit's
        `SimMember.kill` takes them back from its history). A graceful leave sends them
        (the flush)."""
        return tuple(self._state.pending)

    def up(self, batch: list[Message], now: float) -> None:
        deliver: list[Message] = []
        state, receiver = self._state, self._receiver
        windows, counters = state.windows, state.counters
        in_order = 0
        hdr: Any  # a McastHeader, or a MSG's bare seqno
        for msg in batch:
            hdr = msg.headers.get(ids.MCAST)
            if hdr is None:
                deliver.append(msg)
                continue
            if type(hdr) is int:  # a MSG: its bare seqno (see `McastHeader`)
                kind, seqno = MSG, hdr
            else:
                kind, seqno = hdr.type, hdr.seqno
            if kind == MSG:
                # The common case first: the next message of a member's window, nothing waiting.
                win = windows.get(msg.src)  # type: ignore[arg-type]
                if win is not None and not msg.flags & OOB and win.deliver_next(seqno):
                    deliver.append(msg)
                    in_order += 1
                    counters["msgs_delivered"] += 1
                    receiver.count_for_ack(msg.src, 1)  # type: ignore[arg-type]
                else:
                    receiver.receive(msg, as_header(hdr), deliver)  # type: ignore[arg-type]  # not None
            elif kind == XMIT_RSP:
                receiver.receive(msg, hdr, deliver)
            elif kind == ACK:
                self._sender.on_ack(msg.src, hdr.seqno)
            elif kind == XMIT_REQ:
                self._sender.on_xmit_req(msg.src, hdr.missing, now)
            elif kind == PURGED:
                receiver.on_purged(msg.src, hdr.seqno, deliver)
            else:
                counters["bad_headers"] += 1
        if in_order:
            counters["msgs_received"] += in_order
        # The digest at a VIEW in the batch, for a rejoiner (`ViewDigest`, udp-mcast 40480).
        self._view_digest.at_controls(deliver, self.digest, _position)
        self.send_up(deliver)
        if state.ack_due:
            receiver.send_acks_due()
        if state.purge_due:
            self._sender.purge(now)

    # --- the retransmission timer ------------------------------------------------------

    def next_deadline(self) -> float:
        return self._next_tick

    def tick(self, now: float) -> None:
        """XMIT_REQ for every gap, acks not yet sent, and last-seqno resends."""
        self._receiver.ask_for_gaps()
        self._receiver.send_pending_acks()
        self._sender.resend_last()
        if self._state.flushing:
            self._sender.flush_probe()
        self._next_tick = now + self.xmit_interval

    # --- views, digests, leaving ----------------------------------------------------------

    def view_changed(self, view: View, now: float) -> None:
        super().view_changed(view, now)
        if self._state.joining and view.view_id.id <= 1:
            self._end_joining()  # the group's first view: nobody multicast before it
        self._membership.view_changed(view)
        self._view_digest.record(view.view_id, self.digest())
        self._sender.purge(now)

    def _end_joining(self) -> None:
        queued = self._membership.end_joining()
        if queued:
            self._receiver.replay(queued)

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, GetDigest):
            self.pass_up(DigestReply(event.requester, self._view_digest.answer(event, self.digest)))
            return
        if isinstance(event, SetDigest):
            self._membership.set_digest(event.digest, "a digest")
            self._end_joining()
        elif isinstance(event, MergeDigest):
            self._membership.set_digest(event.digest, "a merge digest")
        elif isinstance(event, BecomeServer):
            self._end_joining()
        elif isinstance(event, TmpView):
            self._sender.hold_for_joiners(event.view)
        elif isinstance(event, FlushRequest):
            self._sender.start_flush(now)
        elif isinstance(event, Disconnect):
            self._sender.unflushed()
            self._left_group(now)
        super().down_event(event, now)

    def _left_group(self, now: float) -> None:
        """GMS left the group: fall silent towards the old view, as NAKACK2 does.

        No view, no receive windows, no acks owed or awaited, no retransmission
        timer: otherwise a member that left would resend its last message to its
        old members and ask for retransmissions for ever. What we sent stays, so
        a late XMIT_REQ for our own last messages is still answered. What waited
        for room is dropped (`Sender.left_group`).
        """
        self._sender.left_group(now)
        self._state.forget_group()
        self.view = None
        self._view_digest.forget()
        self._next_tick = math.inf

    def digest(self) -> Digest:
        """Per member: (highest delivered, highest received); ours: highest sent twice."""
        return self._membership.digest()

    # --- observability --------------------------------------------------------------------

    def gauges(self) -> dict[str, Any]:
        """Windows, acks and the blocked sender; with the keys every reliable protocol
        shares (`reliable_stats`; ``pending_acks``: senders owed an ack)."""
        state = self._state
        send = state.send
        lowest = min(state.acks.values(), default=send.high)
        counters = state.counters
        return {
            **reliable_stats(
                sent=counters["msgs_sent"],
                received=counters["msgs_received"],
                delivered=counters["msgs_delivered"],
                xmit_reqs_sent=counters["xmit_reqs_sent"],
                xmit_reqs_received=counters["xmit_reqs_received"],
                retransmitted=counters["retransmissions"],
                peer_windows={str(m): (w.low, w.low, w.high) for m, w in state.windows.items()},
                pending_acks=self._receiver.pending_acks(),
            ),
            "blocked_since": state.blocked_since,
            "seqno": send.high,
            "send_window": window_stats(send),
            "receive_windows": {str(m): window_stats(w) for m, w in state.windows.items()},
            "ack_map": {str(m): a for m, a in state.acks.items()},
            "min_ack": lowest,
            "blocked": bool(state.pending),
            "parked_messages": len(state.pending),
            "become_server_queue": len(state.queue),
        }
