"""MCAST's windows across views: opened for new members, retired for those that left, moved
by digests, and the joiner's wait for its digest.

`Membership` opens a receive window per other member of the view and an entry
in the ack map, retires (remembers) the window of a member that left, moves
windows to a join or merge digest, and ends a joiner's wait once its digest
(or BecomeServer) came. It answers what MCAST's digest is.

Plain synchronous code run by `Mcast` (from ``view_changed`` and
``down_event``): it never awaits and reads no clock. What it writes of the
shared `McastState` is listed there; the windows' contents are the
`Receiver`'s (`_receiver`).

The seed's rules, as implemented here: windows are removed for members that
left and created for new ones; `SetDigest` (a joiner) and `MergeDigest` (the
members of the other subgroups after a merge) move a member's window to the
digest's delivered seqno (creating it if needed, never moving it back),
whichever of the view and the digest arrives first. A window moved past a gap
delivers, in order, what it held at or below its new start (JGroups resets it
and drops that), as NAKACK2 does: only the gap is lost, counted in
``skipped_by_window_move`` and said in a warning.

Choices where the seed is open:

- A joiner (a member whose first view is not the group's first, view id 1)
  opens no window before its digest (`SetDigest`, or `BecomeServer` for a join
  without one): a window at 0 would take what was multicast in views without
  it. Until then it keeps the multicasts it receives, the newest
  ``become_server_queue_size`` (as NAKACK2's become_server_queue), and
  receives them, in arrival order, once its windows exist; those at or below a
  window's start are duplicates then. Over UDP multicast the coordinator's
  VIEW, the first seqno after the joiner's digest, usually arrives before the
  JOIN_RSP carrying that digest: dropped, it left a gap that only a later
  multicast revealed, and a coordinator that left before the joiner asked for
  it again left the joiner waiting behind it for ever (the ``udp-mcast``
  preset: a joiner delivered none of a sender's 2,000 multicasts).
- A window starts at 0 for members of a view installed without a digest
  (the first view; GMS hands joiners a digest), except for a member that was
  in an earlier view of ours: its window comes back where it was when it left
  (its ``low`` and the OOB seqnos delivered above it), or further if a digest
  says so, never lower, as NAKACK2's does. A sender's seqnos never restart
  within its incarnation, so a window opened lower would deliver its
  retransmissions again (found by a chaos run: a member excluded during a
  partition and merged back had 424 of its multicasts delivered twice at each
  of three members).
- A new member's ack starts at our highest seqno when we install the view
  that brings it (the coordinator's `TmpView` puts its joiners there earlier,
  before its digest and VIEW: `Sender.hold_for_joiners`). It is owed only what
  we multicast from that view on: its window starts at the digest's entry for
  us, which the coordinator took before its VIEW, so at or below that seqno,
  and what lies between is not its to ack (asked for, it is retransmitted while
  held, or answered PURGED). Started at the send window's ``low``, a joiner
  held the window for seqnos it will never deliver until it acked our next
  multicast or a last-seqno resend, and one that died or was cut off before
  that blocked us until it was excluded: campaign udp-mcast 50322, E's window
  of 8 stayed full 6 s behind the dead joiner B while E's own parked multicast
  waited, 13.4 s in all. Acks from non-members are ignored; a view change
  recomputes the minimum, so a member that left cannot block senders for ever.
"""

from __future__ import annotations

import logging
from collections import deque

from triogroups.address import Address
from triogroups.message import Message
from triogroups.protocols._ring import RingBuffer
from triogroups.protocols.mcast._context import McastContext
from triogroups.protocols.mcast._state import DELIVERED, McastState
from triogroups.view import Digest, View

__all__ = ["Membership"]

_log = logging.getLogger("triogroups.protocols.mcast")


class Membership:
    """MCAST's windows across views and digests (see the module docstring)."""

    def __init__(self, mcast: McastContext, state: McastState) -> None:
        self.mcast = mcast  # properties, address, view and output only
        self.state = state

    def apply_queue_bound(self, size: int) -> None:
        """``become_server_queue_size`` changed: keep the newest ``size`` (the rest counts
        as dropped)."""
        state = self.state
        queue = deque(state.queue, maxlen=size)
        state.counters["become_server_queue_dropped"] += len(state.queue) - len(queue)
        state.queue = queue

    def view_changed(self, view: View) -> None:
        """Retire the windows and acks of members that left ``view``; open them for new
        members (a joiner waits for its digest)."""
        state = self.state
        windows, acks = state.windows, state.acks
        me = self.mcast.local_address
        for member in [m for m in windows if m not in view]:
            self._retire(member, windows.pop(member))
            state.unacked.pop(member, None)
        for member in [m for m in acks if m not in view]:
            del acks[member]
        for member in view.members:
            if member == me:
                continue
            if member not in windows and not state.joining:  # a joiner: its digest
                self._open(member, 0)
            if member not in acks:  # owed what we send from this view on only
                acks[member] = state.send.high

    def end_joining(self) -> list[Message]:
        """A digest or BecomeServer came: windows for every member of our view (at 0 for
        those the digest did not name); returns what the joiner kept, in arrival order,
        for `Receiver.replay` (empty if we were not joining)."""
        state = self.state
        if not state.joining:
            return []
        state.joining = False
        me, view = self.mcast.local_address, self.mcast.view
        if view is not None:
            for member in view.members:
                if member != me and member not in state.windows:
                    self._open(member, 0)
        queued = list(state.queue)
        state.queue.clear()
        if queued:
            state.counters["become_server_queue_replayed"] += len(queued)
        return queued

    def _retire(self, member: Address, win: RingBuffer[Message]) -> None:
        """Remember where ``member``'s window was (what it held undelivered is dropped:
        a window opened again asks for it)."""
        oob = [s for s in range(win.low + 1, win.high + 1) if win.get(s) is DELIVERED]
        self.state.retired.remember(member, win.low, oob)

    def _open(self, member: Address, start: int) -> None:
        """A window for ``member`` from ``start``, or from where it was when ``member`` left
        our view if that is further: its seqnos never restart within one incarnation."""
        state = self.state
        capacity = self.mcast.capacity
        back = state.retired.take(member)
        if back is None:
            state.windows[member] = RingBuffer(capacity, start)
            return
        low, oob = back
        win: RingBuffer[Message] = RingBuffer(capacity, max(start, low))
        for seqno in oob:
            win.add(seqno, DELIVERED)  # at or below the start, or too far: not added
        win.remove_ready()  # markers right after the start: passed, nothing to deliver
        state.windows[member] = win
        state.counters["windows_reopened"] += 1

    def set_digest(self, digest: Digest, why: str) -> None:
        """Open or move windows to a join or merge digest.

        A merge digest never moves the window of a member of our own view (our
        subgroup: the merge view is not installed yet): that member is still with
        us and keeps what we did not ack, so its last-message resends and our
        XMIT_REQs fill the gap; if it did purge (it went on in a view without us)
        it answers PURGED and the window moves then (`Receiver.on_purged`). Moving it
        here skipped messages a merge could still get (campaign udp-mcast 2145, 5013:
        a flushed leaver's last multicasts never reached a member of its view).
        """
        state = self.state
        deliver: list[Message] = []
        merge = why == "a merge digest"
        me, view = self.mcast.local_address, self.mcast.view
        for member, (delivered, _received) in digest.items():
            if member == me:
                continue
            win = state.windows.get(member)
            if win is None:
                self._open(member, delivered)
            elif win.low < delivered:
                if merge and view is not None and member in view:
                    state.counters["merge_windows_kept"] += 1
                    continue
                self._move(win, delivered, member, why, deliver)
        state.counters["msgs_delivered"] += len(deliver)
        self.mcast.send_up(deliver)

    def _move(
        self,
        win: RingBuffer[Message],
        seqno: int,
        member: Address,
        why: str,
        deliver: list[Message],
    ) -> None:
        """Move ``win`` forward to ``seqno``; what it then holds in order goes to ``deliver``.

        What it held at or below ``seqno`` was received but waited behind a gap: it is
        delivered, in seqno order, not dropped (JGroups resets such a window and drops
        it). The gap's messages are lost here: counted (``skipped_by_window_move``) and
        said in a warning, as NAKACK2 does. Seqnos above everything held were never sent
        to us (a view without us): skipping them says nothing.
        """
        held: list[tuple[int, Message]] = []
        if len(win):
            for s in range(win.low + 1, min(seqno, win.high) + 1):
                m = win.get(s)
                if m is not None:
                    held.append((s, m))
        if held:
            ready = [m for _, m in held if m is not DELIVERED]
            deliver.extend(ready)
            skipped = held[-1][0] - win.low - len(held)
            if skipped:
                self.state.counters["skipped_by_window_move"] += skipped
                _log.warning(
                    "%s: MCAST %s moved the window for %s from %d to %d: %d of its "
                    "messages never came and are skipped, %d held behind them are delivered",
                    self.mcast.local_address,
                    why,
                    member,
                    win.low,
                    seqno,
                    skipped,
                    len(ready),
                )
        win.purge(seqno)
        deliver.extend(m for m in win.remove_ready() if m is not DELIVERED)

    def digest(self) -> Digest:
        """Per member: (highest delivered, highest received); ours: highest sent twice."""
        state = self.state
        entries = {m: (w.low, w.high) for m, w in state.windows.items()}
        me = self.mcast.local_address
        if me is not None:
            entries[me] = (state.send.high, state.send.high)
        return Digest(entries)
