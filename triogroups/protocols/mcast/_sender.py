"""MCAST's send side: numbering multicasts, the send window, acks, retransmissions, the flush.

`Sender` stamps each multicast with the next seqno and keeps it in the send
window until every other member acked it; a full window holds the
application's multicasts back (the window is the flow control). It answers
ACK and XMIT_REQ, resends the last message to a member stuck below it, and
answers GMS's `FlushRequest` when every member acked our highest seqno.

Plain synchronous code run by `Mcast` (from ``down``, ``up``, ``tick`` and
``down_event``): it never awaits and reads no clock (``now`` is passed in).
What it writes of the shared `McastState` is listed there.

Choices where the seed is open:

- The sender delivers its own multicasts itself, a copy each, when it sends
  them (unless DONT_LOOPBACK), and sends them down with DONT_LOOPBACK (as
  NAKACK2 does), so the transport does not copy them back up; a copy that
  comes back anyway is dropped. So a layer below that loses the outgoing
  message (DISCARD) cannot lose the local delivery, and nothing is delivered
  twice. The ack map holds the *other* members; alone in a view (and with no
  joiner on its way, see below), a member purges what it sent at once.
- Control multicasts (INTERNAL: a VIEW, anything GMS sends) never wait behind
  the application's: they are stamped and sent at once, past ``capacity`` if
  the window is full (``controls_past_capacity``; the send window gets more
  slots when it has none left), and the waiting application multicasts follow
  them. A full window whose acks never come (a member that does not ack) must
  not keep a coordinator's leave VIEW from going out.
- A digest must agree with what the senders still hold (issue 12: a
  coordinator alone in its view purged its VIEW multicast at once, below the
  digest it had just handed the joiner, whose window then waited for it for
  ever). Two rules, as JGroups holds back stability while a member joins:

  * The coordinator's `TmpView` (sent down just before it takes the joiners'
    digest) puts each joiner in the ack map at the highest seqno sent, the
    digest's entry for us (`hold_for_joiners`): from there on nothing the
    joiner's window will ask for is purged until the joiner acks it or leaves
    the view.
  * A digest entry for another sender is what the coordinator (or, for a
    merge, the other subgroup's representative) had delivered from it, and
    that sender may purge beyond it before it installs the view with the new
    member. An XMIT_REQ for seqnos at or below the send window's ``low`` is
    answered with PURGED (``low``): everything up to there was acked by every
    member of a view the requester was not in (a member of the ack map acks
    what it delivers, so it never asks for what was purged), so the
    requester's window moves there, as NAKACK2's VIEW_SEQNO does over TCP,
    instead of asking for ever.
- Before the first view nothing is purged (nobody to ack yet).
- Leaving (`Disconnect` from GMS) is final: multicasts still waiting for room
  were never sent and never will be (nobody acks us any more), so they are
  dropped, counted (``dropped_after_leave``) and said in a warning, and so are
  multicasts that come down later; no sender stays blocked on the window.
- Tail loss: a receiver cannot see a gap after the last message it got, and a
  lost ACK is never repeated by a receiver with nothing new to deliver. So, as
  JGroups' ``resend_last_seqno`` does, every ``xmit_interval`` the sender
  resends its highest message to each member whose ack has been behind it for
  a whole interval without moving; a receiver that already had it answers
  with an ACK.

Leaving (issue 37): GMS's `FlushRequest` is answered with `FlushDone` once
every other member of the view acked our highest seqno (at once if so
already). What waits for room goes at once when the flush begins, and so do
multicasts that come down during it, past ``capacity`` as control multicasts
do (``sent_past_capacity_at_flush``): the application's send returned, so
the message is ours to deliver here and to get to the others while the flush
lasts; waiting for room a member that does not ack may never give, it was
dropped at the leave, never delivered even by its sender (campaign udp-mcast
5135: a multicast parked 10 s behind a deaf member). Meanwhile the highest
message goes to every member whose ack is behind it, at once and at every
tick, beside the tail-loss resend above (which waits a whole interval without
progress): a receiver that had it answers with an ACK. A `Disconnect` that
comes first (the flush timed out) logs at WARNING who had not acked what.
"""

from __future__ import annotations

import logging

from triogroups.address import Address
from triogroups.events import FlushDone
from triogroups.message import Message
from triogroups.protocols import ids
from triogroups.protocols._budget import PeerBudget
from triogroups.protocols.mcast._context import McastContext
from triogroups.protocols.mcast._header import (
    CONTROL_FLAGS,
    DONT_LOOPBACK,
    INTERNAL,
    NO_RELIABILITY,
    PURGED,
    XMIT_RSP,
    McastHeader,
)
from triogroups.protocols.mcast._state import McastState, doubled
from triogroups.view import View

__all__ = ["Sender"]

_log = logging.getLogger("triogroups.protocols.mcast")


class Sender:
    """What one MCAST sent and who acked it (see the module docstring)."""

    def __init__(self, mcast: McastContext, state: McastState) -> None:
        self.mcast = mcast  # properties, address and output only
        self.state = state
        #: Per requester: how many retransmissions it may still get this interval.
        self._budget = PeerBudget()

    # --- sending ---------------------------------------------------------------------

    def down(self, batch: list[Message], now: float) -> None:
        """Stamp and send each multicast that has room; the rest waits, in order."""
        state = self.state
        if state.has_left:
            self._down_after_leave(batch)
            return
        out: list[Message] = []
        local: list[Message] = []
        pending = state.pending
        send, capacity = state.send, self.mcast.capacity
        stamped = 0
        for msg in batch:
            if msg.dest is not None or msg.flags & NO_RELIABILITY:
                out.append(msg)
            elif msg.flags & INTERNAL or state.flushing:  # control traffic, or leaving
                out.append(self._stamp_control(msg, local))
                send = state.send  # it may have made room for itself
                stamped += 1
            elif pending or send.high + 1 - send.low >= capacity:  # no room: wait
                pending.append(msg)
            else:
                out.append(self._stamp(msg, local))
                stamped += 1
        self._count_sent(stamped, len(local))
        self.mcast.send_down(out)
        self.mcast.send_up(local)
        if pending and state.blocked_since is None:
            state.blocked_since = now
            state.counters["blockings"] += 1

    def _down_after_leave(self, batch: list[Message]) -> None:
        """We left the group: our multicasts reach nobody's window any more, so they are
        dropped (counted) rather than kept for acks that never come; the rest passes."""
        out = [m for m in batch if m.dest is not None or m.flags & NO_RELIABILITY]
        self.state.counters["dropped_after_leave"] += len(batch) - len(out)
        self.mcast.send_down(out)

    def _has_room(self) -> bool:
        send = self.state.send
        return send.high + 1 - send.low < self.mcast.capacity

    def _stamp_control(self, msg: Message, local: list[Message]) -> Message:
        """`_stamp` for a control multicast (INTERNAL: a VIEW, anything GMS sends), at
        once even when the window is full: it never waits behind the application's
        multicasts, which wait for room and follow it. Past ``capacity`` it counts as
        ``controls_past_capacity``; the window gets more slots when it has none left
        (its ``capacity`` still bounds the application's multicasts). Also for the
        application's multicasts while the leave flushes (``sent_past_capacity_at_flush``)."""
        state = self.state
        send = state.send
        if send.high + 1 - send.low >= self.mcast.capacity:
            flushing = not msg.flags & INTERNAL
            key = "sent_past_capacity_at_flush" if flushing else "controls_past_capacity"
            state.counters[key] += 1
            if send.high + 1 - send.low >= send.capacity:
                state.send = doubled(send)
        return self._stamp(msg, local)

    def _stamp(self, msg: Message, local: list[Message]) -> Message:
        """Seqno, window and send in one step: what makes concurrent senders safe.

        Appends the local delivery (a copy from us) to ``local``. The caller
        counts both (`_count_sent`): once per batch, not per message.
        """
        state = self.state
        seqno = state.send.high + 1
        msg.headers[ids.MCAST] = seqno  # a MSG: its bare seqno
        state.send.add(seqno, msg)
        if self.mcast.view is not None and not state.acks:
            state.send.purge(seqno)  # alone in the view: nobody will ever ask for it
        if not msg.flags & DONT_LOOPBACK:
            copy = msg.copy()
            copy.src = self.mcast.local_address
            local.append(copy)
            msg.flags |= DONT_LOOPBACK  # delivered here: the transport must not loop it back
        return msg

    def _count_sent(self, sent: int, delivered_here: int) -> None:
        if sent:
            self.state.counters["msgs_sent"] += sent
            self.state.counters["msgs_delivered"] += delivered_here

    def drain(self, now: float) -> None:
        """Send what waited for room, in order (all of it while flushing, past ``capacity``
        if need be); unblock the senders when all went."""
        state = self.state
        pending = state.pending
        if not pending:
            return
        out: list[Message] = []
        local: list[Message] = []
        while pending and state.flushing:
            out.append(self._stamp_control(pending.popleft(), local))
        while pending and self._has_room():
            out.append(self._stamp(pending.popleft(), local))
        self._count_sent(len(out), len(local))
        self.mcast.send_down(out)
        self.mcast.send_up(local)
        if not pending and state.blocked_since is not None:
            state.durations["time_blocked"] += now - state.blocked_since
            state.blocked_since = None

    # --- acks and retransmissions ----------------------------------------------------

    def on_ack(self, member: Address | None, ack: int) -> None:
        """``member`` delivered our seqnos up to ``ack``: purge once the batch is through."""
        state = self.state
        if member is None or member not in state.acks:
            state.counters["acks_from_non_members"] += 1
            return
        state.counters["acks_received"] += 1
        ack = min(ack, state.send.high)
        if ack > state.acks[member]:
            state.acks[member] = ack
            state.progress.add(member)
            state.purge_due = True

    def purge(self, now: float) -> None:
        """Purge the send window up to the minimum ack, then send what waited."""
        state = self.state
        state.purge_due = False
        if self.mcast.view is None:
            return
        lowest = min(state.acks.values(), default=state.send.high)
        if lowest > state.send.low:
            state.send.purge(lowest)
        self.drain(now)
        self.check_flushed()

    def on_xmit_req(self, requester: Address | None, missing: tuple[int, ...], now: float) -> None:
        """Resend what ``requester`` misses, at most ``max_xmits_per_interval`` messages
        per requester per interval (`PeerBudget`); the rest counts as ``xmits_capped``."""
        counters = self.state.counters
        if requester is None:
            counters["bad_headers"] += 1
            return
        counters["xmit_reqs_received"] += 1
        mcast = self.mcast
        send = self.state.send
        out: list[Message] = []
        purged = False
        missing = missing[: mcast.capacity]
        granted = self._budget.take(
            requester, len(missing), mcast.max_xmits_per_interval, mcast.xmit_interval, now
        )
        if granted < len(missing):
            counters["xmits_capped"] += len(missing) - granted
            missing = missing[:granted]
        for seqno in missing:
            msg = send.get(seqno)
            if msg is not None:
                out.append(self._retransmission(msg, seqno, requester))
            elif seqno <= send.low:
                purged = True
            else:
                counters["xmit_not_found"] += 1
        counters["retransmissions"] += len(out)
        if purged:
            counters["purged_sent"] += 1
            header = McastHeader(PURGED, send.low)
            out.append(Message(requester, flags=CONTROL_FLAGS, headers={ids.MCAST: header}))
        mcast.send_down(out)

    def _retransmission(self, msg: Message, seqno: int, to: Address) -> Message:
        copy = msg.copy()
        copy.dest = to
        copy.headers[ids.MCAST] = McastHeader(XMIT_RSP, seqno, self.mcast.local_address)
        return copy

    def resend_last(self) -> None:
        """Resend the highest message to members stuck below it for a whole interval."""
        state = self.state
        high = state.send.high
        if self.mcast.view is not None:
            msg = state.send.get(high)
            for member, ack in state.acks.items():
                if ack < state.high_at_tick and member not in state.progress and msg is not None:
                    state.counters["last_seqno_resends"] += 1
                    self.mcast.send_down_one(self._retransmission(msg, high, member))
        state.progress.clear()
        state.high_at_tick = high

    def hold_for_joiners(self, view: View) -> None:
        """Keep what we send from here on until the joiners of ``view`` ack it.

        The coordinator's digest for them, taken next, says we sent up to
        ``high``: their windows start there and will ask for what follows.
        """
        state = self.state
        for member in view.members:
            if member != self.mcast.local_address and member not in state.acks:
                state.acks[member] = state.send.high

    # --- leaving: the flush -----------------------------------------------------------

    def start_flush(self, now: float) -> None:
        """GMS's `FlushRequest`: send what waits, probe the members behind, answer when
        every member acked our highest seqno."""
        self.state.flushing = True
        self.drain(now)
        self.flush_probe()
        self.check_flushed()

    def _lagging(self) -> dict[Address, int]:
        """The members whose ack is below our highest seqno, with their ack."""
        high = self.state.send.high
        return {m: ack for m, ack in self.state.acks.items() if ack < high}

    def check_flushed(self) -> None:
        """Answer GMS's `FlushRequest` once every member acked our highest seqno."""
        state = self.state
        if state.flushing and not state.pending and not self._lagging():
            state.flushing = False
            self.mcast.pass_up(FlushDone(self.mcast.name))

    def flush_probe(self) -> None:
        """Send our highest message to each member behind it: it delivers it or acks it."""
        state = self.state
        high = state.send.high
        msg = state.send.get(high)
        if msg is None:
            return
        for member in self._lagging():
            state.counters["last_seqno_resends"] += 1
            self.mcast.send_down_one(self._retransmission(msg, high, member))

    def unflushed(self) -> None:
        """We leave before the flush ended: say who may never get what."""
        state = self.state
        if state.flushing:
            state.flushing = False
            _log.warning(
                "%s: left with multicasts up to %d not acked by %s (pending %d)",
                self.mcast.local_address,
                state.send.high,
                ", ".join(f"{m} (acked {a})" for m, a in self._lagging().items()) or "nobody",
                len(state.pending),
            )

    def left_group(self, now: float) -> None:
        """Multicasts still waiting for room were never sent and never will be (no ack
        comes any more): they are dropped and counted (``dropped_after_leave``), as are
        those that come down later, so no sender stays blocked (a channel's own waiting
        sends raise ChannelClosed when it closes)."""
        state = self.state
        parked = len(state.pending)
        if parked:
            state.pending.clear()
            state.counters["dropped_after_leave"] += parked
            _log.warning(
                "%s: MCAST left the group with %d multicasts still waiting for room in "
                "the window: they were never sent and are dropped",
                self.mcast.local_address,
                parked,
            )
        if state.blocked_since is not None:
            state.durations["time_blocked"] += now - state.blocked_since
            state.blocked_since = None
