"""MCAST's receive side: the receive windows filled in order, acks sent, gaps asked for.

`Receiver` adds what others multicast to their windows and delivers each
sender's messages in seqno order, exactly once; it acks the highest delivered
seqno, asks for gaps with XMIT_REQ and moves a window on PURGED. The in-order
case (the next seqno of a window, nothing waiting) is handled by `Mcast.up`
itself; everything else comes here.

Plain synchronous code run by `Mcast` (from ``up``, ``tick`` and
``down_event``): it never awaits and reads no clock. What it writes of the
shared `McastState` is listed there; the windows are opened, moved and
closed by `Membership` (`_membership`).

The seed's rules, as implemented here:

- Messages outside ``[low, low + capacity)`` are dropped; new ones are stored
  and delivered up to the first gap. A message past the window says its
  sender sent every seqno below it, so the window's empty slots become gaps
  (`RingBuffer.expect`) that the next tick asks for, answered by
  retransmissions or PURGED: dropped silently, it revealed nothing, and a
  window opened below what its sender still holds for us (a merge digest
  taken seconds before the merge view, while that sender's own subgroup acked
  and it purged) waited for ever, every later multicast and resend landing
  past it (campaign udp-mcast 2145: a restarted member's multicasts never
  reached the other subgroup).
- OOB messages are delivered as soon as they arrive (they may overtake) and
  leave a marker (`DELIVERED`) so ``low`` can pass them without delivering
  them twice.
- Receivers ack the highest delivered seqno to the sender after
  ``ack_threshold`` deliveries (default ``capacity // 4``) and otherwise every
  ``xmit_interval``; a duplicate is acked too (its sender may be probing for
  a lost ack).
- Every ``xmit_interval`` a receiver sends XMIT_REQ with the missing seqnos
  of each window to their sender.
- A joiner keeps the multicasts of senders it has no window for yet (see
  `keep`) and receives them once its digest opened the windows (`replay`).
"""

from __future__ import annotations

from triogroups.address import Address
from triogroups.message import Message
from triogroups.protocols import ids
from triogroups.protocols.mcast._context import McastContext
from triogroups.protocols.mcast._header import (
    ACK,
    CONTROL_FLAGS,
    OOB,
    XMIT_REQ,
    XMIT_RSP,
    McastHeader,
    as_header,
)
from triogroups.protocols.mcast._state import DELIVERED, McastState

__all__ = ["Receiver"]


class Receiver:
    """What one MCAST received and owes acks for (see the module docstring)."""

    def __init__(self, mcast: McastContext, state: McastState) -> None:
        self.mcast = mcast  # properties, address and output only
        self.state = state
        #: Deliveries from one sender after which we ack at once (`threshold_changed`).
        self.ack_every = self._threshold()

    def _threshold(self) -> int:
        return self.mcast.ack_threshold or max(1, self.mcast.capacity // 4)

    def threshold_changed(self) -> None:
        """``ack_threshold`` changed: ack after that many deliveries from here on."""
        self.ack_every = self._threshold()

    # --- receiving --------------------------------------------------------------------

    def receive(self, msg: Message, hdr: McastHeader, deliver: list[Message]) -> None:
        """Add ``msg`` (a MSG or XMIT_RSP) to its sender's window; what is ready goes to
        ``deliver``."""
        state = self.state
        counters = state.counters
        sender = hdr.sender if hdr.type == XMIT_RSP and hdr.sender is not None else msg.src
        seqno = hdr.seqno
        if sender is None or seqno < 1:
            counters["bad_headers"] += 1
            return
        if sender == self.mcast.local_address:
            counters["loopbacks_dropped"] += 1  # delivered when it was sent
            return
        win = state.windows.get(sender)
        if win is None:
            if state.joining:
                self._keep(msg)
            else:
                counters["dropped_no_window"] += 1
            return
        if seqno <= win.low:
            counters["duplicates"] += 1
            state.ack_due.add(sender)  # the sender may be probing for a lost ack
            return
        if win.beyond(seqno):
            counters["dropped_outside_window"] += 1
            win.expect(seqno)  # its whole window was sent: the next tick asks for the gaps
            return
        if hdr.type == XMIT_RSP:
            counters["xmit_rsps_received"] += 1
            msg.dest = None  # a retransmitted multicast is still a multicast
        oob = msg.flags & OOB
        if not win.add(seqno, DELIVERED if oob else msg):
            counters["duplicates"] += 1
            return
        counters["msgs_received"] += 1
        if oob:
            deliver.append(msg)
            counters["msgs_delivered"] += 1
        if seqno != win.low + 1:
            return
        ready = win.remove_ready()
        for m in ready:
            if m is not DELIVERED:
                deliver.append(m)
                counters["msgs_delivered"] += 1
        self.count_for_ack(sender, len(ready))

    def _keep(self, msg: Message) -> None:
        """A joiner keeps a multicast until its digest gives the sender a window.

        Over UDP multicast the coordinator's VIEW (the first seqno after the
        joiner's digest) usually arrives before the JOIN_RSP that carries the
        digest, and a member that installs the view early may multicast before
        it too. Dropped, such a message leaves a gap that only the next one
        reveals; if its sender leaves first, everything after the gap waits for
        ever. The newest ``become_server_queue_size`` are kept, as NAKACK2's
        become_server_queue does.
        """
        queue = self.state.queue
        if len(queue) == queue.maxlen:
            self.state.counters["become_server_queue_dropped"] += 1
        queue.append(msg)

    def replay(self, queued: list[Message]) -> None:
        """Receive what the joiner kept (`Membership.end_joining`), in arrival order; what
        lies at or below a window's start was sent in a view without us and is dropped as
        a duplicate."""
        deliver: list[Message] = []
        for msg in queued:
            hdr = as_header(msg.headers.get(ids.MCAST))
            assert hdr is not None  # only MSG and XMIT_RSP are kept
            self.receive(msg, hdr, deliver)
        self.mcast.send_up(deliver)
        self.send_acks_due()

    def on_purged(self, sender: Address | None, low: int, deliver: list[Message]) -> None:
        """``sender`` purged up to ``low`` in a view without us: our window starts there."""
        state = self.state
        win = state.windows.get(sender) if sender is not None else None
        if win is None or low <= win.low:
            state.counters["purged_ignored"] += 1  # a stranger's, or late: nothing to move
            return
        assert sender is not None
        state.counters["windows_moved_by_purged"] += 1
        win.purge(low)
        ready = [m for m in win.remove_ready() if m is not DELIVERED]
        state.counters["msgs_delivered"] += len(ready)
        deliver.extend(ready)
        state.ack_due.add(sender)

    # --- acks and gaps ----------------------------------------------------------------

    def count_for_ack(self, sender: Address, count: int) -> None:
        """``count`` more of ``sender``'s seqnos are delivered: ack once enough piled up."""
        unacked = self.state.unacked
        count += unacked.get(sender, 0)
        unacked[sender] = count
        if count >= self.ack_every:
            self.state.ack_due.add(sender)

    def send_acks_due(self) -> None:
        """Ack every sender that `count_for_ack` or a duplicate marked."""
        ack_due = self.state.ack_due
        for sender in ack_due:
            self._send_ack(sender)
        ack_due.clear()

    def send_pending_acks(self) -> None:
        """The tick: ack every sender with deliveries not acked yet."""
        for sender, count in list(self.state.unacked.items()):
            if count:
                self._send_ack(sender)

    def _send_ack(self, sender: Address) -> None:
        state = self.state
        win = state.windows.get(sender)
        if win is None:
            return
        state.unacked[sender] = 0
        state.counters["acks_sent"] += 1
        header = McastHeader(ACK, win.low)
        self.mcast.send_down_one(Message(sender, flags=CONTROL_FLAGS, headers={ids.MCAST: header}))

    def ask_for_gaps(self) -> None:
        """The tick: an XMIT_REQ to each sender whose window has gaps."""
        state = self.state
        for sender, win in state.windows.items():
            missing = win.missing(limit=self.mcast.capacity)
            if missing:
                state.counters["xmit_reqs_sent"] += 1
                header = McastHeader(XMIT_REQ, 0, None, tuple(missing))
                self.mcast.send_down_one(
                    Message(sender, flags=CONTROL_FLAGS, headers={ids.MCAST: header})
                )

    def pending_acks(self) -> int:
        """Senders owed an ack (a gauge)."""
        return sum(1 for n in self.state.unacked.values() if n)
