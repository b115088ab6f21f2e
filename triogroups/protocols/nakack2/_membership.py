"""NAKACK2's windows across views: joining, digests, view changes and leaving.

A member delivers only once it is a server. Until then (a joiner) it queues
the multicasts it receives in the become_server_queue; `SetDigest` gives it
a window per member, starting at the highest seqno of that member the group
had delivered, and `BecomeServer` replays the queue in arrival order. A view
change drops the windows of members that left and opens one for each new
member; `MergeDigest` moves the windows of the other subgroups forward;
`Disconnect` drops them all.

Plain synchronous code run by `Nakack2` (from ``down_event``,
``view_changed``, ``property_changed`` and, for the queue, ``up``): it never
awaits and reads no clock. It owns the queue, the floors and whether a
digest was set; it is the only side that adds or drops windows and moves
the member's `Phase` (in the shared `NakState`). What the queue held goes
back to `Nakack2` as a return value, to be received there.

Decisions where the seed and JGroups leave a choice:

- Windows: members that were never given a digest and install the group's
  first view (view id 1: the first coordinator's singleton view, or the
  view a test installs by hand) start every window at 0 and are servers at
  once, since nobody can have sent anything earlier. A member whose first
  view is a later one is a joiner: it queues multicasts until `SetDigest`
  (windows start at the digest's highest delivered seqnos) and
  `BecomeServer` (the queue is replayed in order). SetDigest may come before
  or after the joiner's ViewChange: it creates missing windows and moves
  existing ones forward, never back, and never touches our own. MergeDigest
  does the same for the members of the other subgroups (GMS leaves our own
  subgroup out), except that a server that retransmits leaves alone the
  window of a member still in its own view (listed in another subgroup too:
  a coordinator moved on, or still lists it). That member keeps what we
  lack (STABLE in our view purges only what all of us delivered), so moving
  the window would skip what retransmission is filling (issue 37: a chaos
  run's merge digest skipped 9 seqnos A was still asking C for). A asks at
  once for what the digest says lies above what it received. If the member
  did purge it (it went on in a view without us), it answers the XMIT_REQ
  with VIEW_SEQNO at its purge point, which moves the window then, counting
  and logging what truly cannot be filled. Without retransmission (TCP) the
  window moves as before. JGroups' mergeDigest resets such a window.
  As in JGroups, existing members give a member that is new in a view a
  window at 0, except one that was in an earlier view of ours: its window
  comes back where it was when it left (its highest delivered seqno and the
  OOB seqnos delivered above it), or further if the digest says so, never at
  0 (an addition: JGroups opens it afresh, and a member excluded and merged
  back gets its retransmissions delivered again).
- A server keeps multicasts from senders it has no window for (up to
  ``non_member_queue_size``, the newest) and receives them once a view or
  merge view gives their sender a window: views reach members at different
  times, so the first member to install one may multicast to a member that
  has not installed it yet. JGroups drops them and asks again; over TCP,
  without retransmission, they would be lost (found by a chaos run: a member
  merged back lost its first multicasts at every other member). Those at or
  below what we had delivered of the sender are dropped as duplicates then;
  for a member that was in an earlier view of ours, those above it but at
  or below the start a digest gave its reopened window are delivered at
  once, in seqno order, as `_move` delivers what a window held: the
  digest's seqno may come from a member that received them in a view that
  has us too (campaign udp seed 72298).
- The become_server_queue drops its oldest entries when full (the seed's
  correction); it holds only MSG and XMIT_RSP messages. With
  ``xmit_interval <= 0`` it is unbounded.
- A member that left the group (`Disconnect` from GMS) drops its windows and
  its retransmit task: it asks nobody for anything any more. Leaving is
  final (`Phase.LEFT`): a later BecomeServer or view opens no window.

An addition beyond JGroups, VIEW_SEQNO (see the `Nakack2` docstring for
why): a member X without retransmission (``xmit_interval <= 0``) that
installs a view with members that were not in its previous one unicasts
each of them its highest seqno ``b``. With retransmission X sends none, and
a joiner asks for what it lacks above its digest, as in JGroups. X's multicasts
up to ``b`` went out in a view without them, those after ``b`` in this view,
to them. The receiver Y moves its window for X forward to ``b`` (never
back; a server delivers the run it then holds); a joiner without a window
for X yet (a joiner, or X is not in Y's view yet: a merge partner that
installed the merge view first) keeps ``b`` as X's *floor*, and the window
starts there when the view or the digest creates it, if they say less. A
floor only ever skips what X sent in views without Y, so one that is never
used is harmless; at most ``_MAX_FLOORS`` are kept (hostile input). The
coordinator sends none to the joiners of its `TmpView`: its transport fans
multicasts out to them from the digest on, so they get every message after
it. A VIEW_SEQNO is a control message of its own (OOB, INTERNAL, not
numbered): lost or late over UDP it leaves a gap that retransmission heals
as before; over TCP it travels on the connection that carries X's later
multicasts, and a window that moves forward delivers what it holds above
``b``, so it need not arrive first.

A window that a digest or VIEW_SEQNO moves forward past a gap (messages it
held, received but waiting behind seqnos that never came) delivers what it
held, in order, rather than dropping it as JGroups' reset does: only the
gap is lost, and it is counted (``skipped_by_window_move``) and logged as a
warning (found by a 7-member `tcp` chaos run, where a merge digest silently
dropped 1,108 multicasts a member had held behind a gap for 14 s).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable

from triogroups.address import Address
from triogroups.message import Message
from triogroups.protocols import ids
from triogroups.protocols._retired import RetiredWindows
from triogroups.protocols._table import SeqnoTable
from triogroups.protocols.nakack2._context import NakContext
from triogroups.protocols.nakack2._header import VIEW_SEQNO, NakAckHeader2
from triogroups.protocols.nakack2._state import Input, NakState, Phase, Window
from triogroups.view import Digest, View

_log = logging.getLogger("triogroups.protocols.nakack2")

__all__ = ["Membership"]

_MAX_FLOORS = 1024  # VIEW_SEQNOs kept from members we have no window for


def _push(queue: deque[Message], msg: Message) -> bool:
    """Append ``msg`` to a bounded queue, whose oldest entry makes room when it is full (with
    no room at all, ``msg`` itself is dropped); True when something was dropped."""
    full = queue.maxlen is not None and len(queue) >= queue.maxlen
    queue.append(msg)
    return full


def _seqno(msg: Message) -> int:
    """The seqno of a kept multicast: a MSG's bare seqno, or an XMIT_RSP's header's."""
    hdr = msg.headers.get(ids.NAKACK2)
    return hdr if type(hdr) is int else getattr(hdr, "seqno", 0)


def _rebound(queue: deque[Message], maxlen: int | None) -> tuple[deque[Message], int]:
    """``queue`` with a new bound (a smaller one keeps the newest), and how many it lost."""
    bounded = deque(queue, maxlen=maxlen)
    return bounded, len(queue) - len(bounded)


class Membership:
    """The windows of one NAKACK2 as members come and go (see the module docstring)."""

    def __init__(self, nak: NakContext, state: NakState) -> None:
        self.nak = nak  # properties, address and output only
        self.state = state
        self.queue: deque[Message] = deque(maxlen=self._queue_bound())
        self.has_digest = False
        #: Per member: the highest VIEW_SEQNO it sent us before we had a window for it.
        self.floors: dict[Address, int] = {}
        #: The view our coordinator's transport fans multicasts out to before it installs it.
        self.tmp_view: View | None = None
        #: Multicasts from senders without a window, in arrival order (see `keep_early`).
        self.early: deque[Message] = deque(maxlen=nak.non_member_queue_size)
        #: Per member that left our view: its window's highest delivered seqno and the OOB
        #: seqnos above it already delivered, so a window opened again for it (a merge, a
        #: view that has it back) delivers nothing twice.
        self.retired = RetiredWindows()

    # --- the become_server_queue -----------------------------------------------------------

    def _queue_bound(self) -> int | None:
        nak = self.nak
        return None if nak.xmit_interval <= 0 else nak.become_server_queue_size

    def apply_queue_bound(self) -> None:
        """Apply a changed bound; a smaller one drops the oldest entries."""
        bound = self._queue_bound()
        if bound != self.queue.maxlen:
            self.queue, dropped = _rebound(self.queue, bound)
            self.state.counters["become_server_queue_dropped"] += dropped

    def enqueue(self, msg: Message) -> None:
        if _push(self.queue, msg):
            self.state.counters["become_server_queue_dropped"] += 1

    # --- multicasts that came before their sender's view -------------------------------------

    def keep_early(self, msg: Message) -> None:
        """Keep a multicast from a sender we have no window for, until a view gives it one.

        A view or merge view reaches members at different times: a member that
        installed it first (the merge leader, or one whose INSTALL_MERGE_VIEW
        came first) multicasts to us before our copy of that view arrives. Over
        TCP, without retransmission, a message dropped then would be lost for
        good; with retransmission it would cost a round of XMIT_REQs. The
        newest ``non_member_queue_size`` are kept; what is pushed out is
        counted as ``non_member_dropped``.
        """
        counters = self.state.counters
        if _push(self.early, msg):
            counters["non_member_dropped"] += 1
        if self.early.maxlen:
            counters["non_member_kept"] += 1

    def apply_early_bound(self) -> None:
        """Apply a changed ``non_member_queue_size``; a smaller one drops the oldest."""
        self.early, dropped = _rebound(self.early, self.nak.non_member_queue_size)
        self.state.counters["non_member_dropped"] += dropped

    def _take_early(self) -> list[Message]:
        """The kept multicasts whose senders now have a window, in arrival order."""
        early = self.early
        if not early:
            return []
        windows = self.state.windows
        ready = [m for m in early if m.src in windows]
        if ready:
            self.early = deque((m for m in early if m.src not in windows), maxlen=early.maxlen)
            self.state.counters["non_member_replayed"] += len(ready)
        return ready

    def become_server(self, event: Input) -> list[Message]:
        """Deliver from now on; returns the queued multicasts, to be received in order.

        ``event`` is BECOME_SERVER (from GMS) or FIRST_VIEW. A member that left
        stays out: no windows, and nothing to replay.
        """
        state = self.state
        state.move(event)
        if state.phase is not Phase.SERVER:
            return []
        view = self.nak.view
        if view is not None:
            self.adjust_windows(view)
        queued = list(self.queue)
        self.queue.clear()
        state.counters["become_server_queue_replayed"] += len(queued)
        return queued + self._take_early()

    # --- views and digests -----------------------------------------------------------------

    def view_changed(self, old: View | None, view: View) -> list[Message]:
        """Adjust the windows; tell the members new in ``view`` our highest seqno.

        Returns what the become_server_queue held if this view, the group's
        first, made us a server (to be received in order), else nothing.
        """
        queued: list[Message] = []
        phase = self.state.phase
        if phase is Phase.SERVER or (phase is Phase.JOINING and self.has_digest):
            self.adjust_windows(view)
            if phase is Phase.SERVER:
                queued = self._take_early()
        elif phase is Phase.JOINING and view.view_id.id <= 1:
            queued = self.become_server(Input.FIRST_VIEW)  # every window starts at 0
        fanned_out, self.tmp_view = self.tmp_view, None
        if old is not None and self.nak.xmit_interval <= 0:
            for member in view.members:
                if member not in old and (fanned_out is None or member not in fanned_out):
                    self._send_view_seqno(member)
        return queued

    def _send_view_seqno(self, member: Address) -> None:
        nak = self.nak
        if member == nak._me():
            return
        hdr = NakAckHeader2(VIEW_SEQNO, self.state.seqno)
        nak._send_control(member, hdr)
        self.state.counters["view_seqnos_sent"] += 1

    def on_view_seqno(self, src: Address | None, seqno: int) -> None:
        """``src`` multicast up to ``seqno`` in a view without us: skip to it, never back."""
        counters = self.state.counters
        counters["view_seqnos_received"] += 1
        if src is None or seqno < 0 or src == self.nak._me():
            counters["view_seqnos_ignored"] += 1
            return
        win = self.state.windows.get(src)
        if win is not None:
            if win.hd < seqno:
                self._move(win, seqno, src, "VIEW_SEQNO")
                counters["windows_moved_by_view_seqno"] += 1
        elif src in self.floors or len(self.floors) < _MAX_FLOORS:
            self.floors[src] = max(self.floors.get(src, 0), seqno)
        else:
            counters["view_seqnos_ignored"] += 1

    def _move(self, win: Window, seqno: int, member: Address, why: str) -> None:
        """Move ``win`` forward to ``seqno``; a server delivers what it then holds in order.

        What it held at or below ``seqno`` was received but waited behind a gap: a server
        delivers it, in seqno order, instead of dropping it (JGroups resets such a window
        and drops it). The gap's messages are lost here: counted (``skipped_by_window_move``)
        and said in a warning. Seqnos above everything held were never sent to us (a view
        without us): skipping them says nothing.
        """
        server = self.state.phase is Phase.SERVER
        held = [(s, m) for s, m in win.items() if s <= seqno] if len(win) else []
        ready: list[Message] = []
        if held:
            top = held[-1][0]
            skipped = top - win.hd - len(held)
            if server:
                ready = [m for _, m in held if m is not None]
            if skipped:
                self.state.counters["skipped_by_window_move"] += skipped
                _log.warning(
                    "%s: NAKACK2 %s moved the window for %s from %d to %d: %d of its "
                    "messages never came and are skipped, %d held behind them %s",
                    self.nak._me(),
                    why,
                    member,
                    win.hd,
                    seqno,
                    skipped,
                    sum(m is not None for _, m in held),
                    "are delivered" if server else "are dropped",
                )
        win.purge(seqno)
        if server and win.has_ready():
            ready += [m for m in win.remove_ready() if m is not None]
        if ready:
            self.state.counters["msgs_delivered"] += len(ready)
            self.nak.send_up(ready)

    def adjust_windows(self, view: View) -> None:
        """Drop the windows of members that left; members new in the view start at 0."""
        me = self.nak._me()
        windows = self.state.windows
        for member in [m for m in windows if m not in view]:
            self._retire(member, windows.pop(member))
        for member in view.members:
            if member not in windows and member != me:
                self._open(member, self.floors.pop(member, 0))

    def _retire(self, member: Address, win: Window) -> None:
        """Remember where ``member``'s window was (what it held undelivered is dropped:
        a window opened again asks for it)."""
        self.retired.remember(member, win.hd, [s for s, m in win.items() if m is None])

    def _open(self, member: Address, start: int) -> None:
        """A window for ``member`` from ``start``, or from where it was when ``member`` left
        our view if that is further: its seqnos never restart within one incarnation.

        A window opened again: what we kept from ``member`` while it had no window
        (`keep_early`) at or below the start, and above what we delivered of it, we never
        delivered, and a server delivers it now, in seqno order (`_deliver_kept`), rather
        than dropping it as a duplicate. From a member never in our view it is still dropped:
        it was sent in another subgroup's views (delivering it broke the total order of
        campaign udp-total 257, where SEQUENCER's stream of another subgroup came in)."""
        back = self.retired.take(member)
        win: Window
        if back is None:
            self.state.windows[member] = SeqnoTable(start)
            return
        hd, oob = back
        win = SeqnoTable(max(start, hd))
        win.add_many((s, None) for s in oob if s > win.hd)
        self.state.windows[member] = win
        self.state.counters["windows_reopened"] += 1
        self._deliver_kept(member, hd, oob, win.hd)

    def _deliver_kept(self, member: Address, delivered: int, oob: Iterable[int], top: int) -> None:
        """Deliver, in seqno order, the multicasts of ``member`` kept in `early` above
        ``delivered`` (and not among its ``oob`` seqnos delivered above it) and at or below
        ``top``, where a digest just opened its window.

        A digest's seqno for a member says what some member delivered of it, not that the
        multicasts below it were sent in views without us: a merge leader took the seqno of
        E from C, the stale representative of a view E had gone on from, into a view with
        us, which C had installed; B, cut off until then, kept E's multicast of that view
        (E had no window at B yet) and dropped it as a duplicate once the merge digest
        opened E's window past it, then installed E's view (campaign udp seed 72298). What
        arrived is delivered, as `_move` delivers what a window held behind a gap; only
        what never came is skipped.
        """
        if top <= delivered or not self.early or self.state.phase is not Phase.SERVER:
            return
        skip = set(oob)
        kept: dict[int, Message] = {}
        rest: deque[Message] = deque(maxlen=self.early.maxlen)
        for msg in self.early:
            if msg.src == member:
                seqno = _seqno(msg)
                if delivered < seqno <= top and seqno not in skip:
                    kept.setdefault(seqno, msg)
                    continue
            rest.append(msg)
        if not kept:
            return
        self.early = rest
        ready = [kept[s] for s in sorted(kept)]
        counters = self.state.counters
        counters["non_member_replayed"] += len(ready)
        counters["msgs_delivered"] += len(ready)
        self.nak.send_up(ready)

    def set_digest(self, digest: Digest, *, merge: bool = False) -> list[tuple[Address, int, int]]:
        """Windows start at the digest's highest delivered seqnos (never our own).

        An existing window moves forward (never back): SetDigest works whether
        it comes before or after the joiner's view, and a MergeDigest (the
        other subgroups only) catches up with a member we last saw in an
        older view.

        Except, for a MergeDigest at a server that retransmits, the window of a
        member of our current view (our own subgroup: GMS passes MergeDigest
        before it installs the merge view), which is left where it is: that
        member also sits in another subgroup (it moved on, or another
        coordinator still lists it), and the digest's seqno for it comes from
        there, but it is still with us and keeps what we lack until we have
        it (STABLE purges only what all of our view delivered). Moving the
        window would skip what retransmission is still filling. Returns the
        ranges (member, first, last) to ask for at once, up to the digest's
        seqno; if that member did purge them (it went on in a view without
        us), it answers with VIEW_SEQNO and the window moves then, counting
        what truly cannot be filled.
        """
        me = self.nak._me()
        windows = self.state.windows
        floors = self.floors
        view = self.nak.view
        retransmits = self.state.phase is Phase.SERVER and self.nak.xmit_interval > 0
        ours = set(view.members) if merge and retransmits and view is not None else set()
        asks: list[tuple[Address, int, int]] = []
        for member, (delivered, _received) in digest.items():
            if member == me:
                continue
            start = max(delivered, floors.pop(member, 0))
            win = windows.get(member)
            if win is None:
                self._open(member, start)
            elif win.hd < start and member in ours:
                self.state.counters["merge_windows_kept"] += 1
                if start > win.hr:
                    asks.append((member, win.hr + 1, start))
            elif win.hd < start:
                self._move(win, start, member, "a merge digest" if merge else "a digest")
        if not merge:
            self.has_digest = True
        self.state.counters["digests_set"] += 1
        return asks

    def left_group(self) -> None:
        """GMS left the group: no view, no windows, no retransmit task.

        Every member is a non-member from now on. A window kept from the last
        view would ask for what the others purged in views without us, for
        ever, and those requests would look like signs of life to their
        failure detectors. What we sent stays, so a late XMIT_REQ for our
        own last messages is still answered. `Nakack2` stops the
        retransmit task, which never runs for `Phase.LEFT`.
        """
        self.state.move(Input.DISCONNECT)
        self.nak.view = None
        self.state.windows.clear()
        self.floors.clear()
        self.queue.clear()
        self.early.clear()
