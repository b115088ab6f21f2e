"""SEQUENCER: total order multicast through the coordinator (JGroups' SEQUENCER).

Sans-IO: it never awaits and has no timer; the reliability it needs comes from
UNICAST3 (forwards, tails) and NAKACK2 (the coordinator's multicasts) below it.

Every regular multicast going down (not OOB, INTERNAL or NO_RELIABILITY; every
multicast an application sends through a channel is one) gets this member's
next SEQUENCER seqno, is kept in the *forward table* and is unicast to the
coordinator as FORWARD. The coordinator multicasts each forward it receives,
in arrival order, as BCAST naming the forwarder and its seqno; its own
multicasts skip the hop. The coordinator's NAKACK2 seqnos are the global
order: every member delivers the coordinator's multicasts in that order,
each with its forwarder as source. A forwarder drops a message from its
forward table once it delivers it; receivers drop a BCAST whose seqno is not
above the highest they delivered from that forwarder (the *delivery table*;
each forwarder's messages reach the order in its own seqno order, since
UNICAST3 is FIFO and re-forwards go first).

When the coordinator changes (it crashed or left), each member re-forwards
its whole forward table to the new one, in seqno order, as FLUSH, before
anything new. That alone (JGroups' FORWARD/FLUSH) loses what the old
coordinator multicast and only some members received: NAKACK2 drops the old
coordinator's window with the view, and XMIT_REQs went only to it. So every
member also keeps a *log* of what it delivered until STABLE says every member
delivered it (`StableDigest`, on the coordinator's NAKACK2 seqnos), and hands
the log to the new coordinator (TAIL each, then TAIL_END) before its FLUSHes.
The logs are slices of the old order (a joiner's starts late), so the tails,
merged by each entry's stamp, hold what any member lacks, in that order: the
new coordinator multicasts them first (receivers drop what they have), then
the forwards it queued meanwhile (an addition beyond JGroups). This module
holds the layer; the log is in `_log`, the recovery in `_recovery`, the trimming of
the forward and delivery tables in `_tables`, the stack check in `_neighbours`.

Decisions where JGroups leaves a choice:

- SEQUENCER sits below GMS and STABLE, above NAKACK2 and UNICAST3 (JGroups'
  sequencer.xml puts it above GMS): it must see GMS's `FlushRequest` and
  STABLE's `StableDigest` (which trims the log), both of which go down only.
- No ack mode (JGroups' ``threshold``, JGRP-1449): a member keeps FORWARD,
  FLUSH and TAIL messages that arrive before it is the coordinator, and
  handles them once a view makes it one, so forwards stream; and BCASTs
  stamped with a view to come, from a member not yet its coordinator, until
  that view (campaign udp-total seed 257), with its coordinator's BCASTs behind
  them till that view: a resumed old coordinator may still be ordering (71059);
  and behind a VIEW in the same batch that changes our coordinator (`_neighbours`).
  The coordinator never holds its own: they are its order (72471: held, they were
  delivered at its merge view, before the other subgroups' logs).
  No ``delivery_table_max_size``: the highest seqno per forwarder is exact.
- The coordinator multicasts its own messages at once, not to itself. Leaving, it
  stops multicasting forwards at `FlushRequest`: the forwarders keep them and
  forward them to the next coordinator, so its NAKACK2 flush can end.
- A DONT_LOOPBACK multicast is ordered too; its sender does not deliver it.

A member merged back under the same coordinator (its own view kept it in while
the coordinator's left it out) re-forwards its forward table at the merge view;
a coordinator keeps a non-member's forwards in arrival order (up to
``_EARLY_MAX``) and orders them first once a view of its holds that member again.

A merge view's coordinator runs the same recovery for every subgroup another
coordinator ordered: it waits for those members' tails and multicasts the
furthest of each subgroup, then its own log (a later merge view's subgroups,
taken into a recovery still waiting, after it), before anything new (each member
sends its tail at a merge view). A subgroup whose logs fork (a merge whose recovery
never ended) has its forks' logs multicast one after the other, not merged by stamp.
A member sends an empty tail at its first view: the coordinator may count it among
the previous view's members though it never installed that view. A BCAST carries
its coordinator's view counter: a member whose coordinator changed at a later view
drops it, as the end of an order it was not in (what the merge view's coordinator
multicast in its old subgroup after the merge digest).
While the recovery waits for a member's tail, that member's forwards are dropped:
they were sent before it saw the change, and its FLUSH after its tail sends again
whatever of them it has not delivered, in its own order.

A leaving member answers the flush once its own messages are delivered here and,
by STABLE's digests, everywhere (as NAKACK2's flush means). Known limit: a merge
of two partitions does not reconcile their orders (each side's order stands).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from triogroups.address import Address
from triogroups.events import (
    Disconnect,
    Event,
    FlushDone,
    FlushRequest,
    StableDigest,
)
from triogroups.message import Flag, Message
from triogroups.protocol import Passes, Protocol
from triogroups.protocols import ids
from triogroups.protocols.nakack2._header import as_header
from triogroups.protocols.sequencer._header import (
    BCAST,
    FLUSH,
    FORWARD,
    TAIL,
    TAIL_END,
    TYPE_NAMES,
    SequencerHeader,
)
from triogroups.protocols.sequencer._header import as_header as forward_or_header
from triogroups.protocols.sequencer._log import Log, Logged
from triogroups.protocols.sequencer._neighbours import changes_coordinator, check_placement
from triogroups.protocols.sequencer._recovery import Recovery, old_orders
from triogroups.protocols.sequencer._tables import forget_departed, forget_forwarded
from triogroups.view import MergeView, View

__all__ = [
    "BCAST",
    "FLUSH",
    "FORWARD",
    "TAIL",
    "TAIL_END",
    "TYPE_NAMES",
    "Sequencer",
    "SequencerHeader",
]

_ID = ids.SEQUENCER
_NAK = ids.NAKACK2
_GMS = ids.GMS
#: Multicasts left out of the order: control traffic and OOB (which may overtake anyway).
_UNORDERED = int(Flag.OOB | Flag.INTERNAL | Flag.NO_RELIABILITY)
_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
#: Header ids of the layers below, when no stack told us (unit tests): stripped from a
#: forward before the coordinator multicasts it, so no layer below sees a stale header.
_LOWER_IDS = frozenset({ids.NAKACK2, ids.UNICAST3, ids.UNICAST2, ids.MCAST})
#: Messages kept that were sent to this member as coordinator before it is one.
_EARLY_MAX = 100_000
_tuple_new = tuple.__new__  # a NamedTuple (`Logged`, `SequencerHeader`) without its `__new__`
_new_message = object.__new__  # a `Message` with its slots set in line (see `_bcast`)


class Sequencer(Protocol):
    """Total order multicast through the coordinator (see the module docstring)."""

    name = "SEQUENCER"
    id = _ID
    #: JGroups' counters (``forwarded_msgs``, ``bcast_msgs``, ``received_forwards``,
    #: ``received_bcasts``, ``delivered_bcasts``) first, then ours
    COUNTERS = (
        "forwarded_msgs",
        "flushed_msgs",
        "bcast_msgs",
        "received_forwards",
        "received_bcasts",
        "delivered_bcasts",
        "duplicates",
        "recoveries",
        "tails_sent",
        "tail_msgs_resent",
        "bcasts_not_from_coord",
        "bcasts_other_order",
        "bcasts_held_for_view",
        "early_dropped",
        "forwards_dropped_leaving",
        "forwards_before_tail",
        "left_undelivered",
        "malformed",
        "non_member_dropped",
        "recoveries_inconsistent",
        "tails_ignored",
        "non_member_kept",
    )
    passes_up: Passes | None = "all"  # its messages carry its header
    passes_down: Passes | None = "unicasts"  # it orders multicasts only

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.coord: Address | None = None
        self.is_coord = False
        self._members: frozenset[Address] = frozenset()
        self._lower_ids = _LOWER_IDS
        self._seqno = 0
        #: own multicasts not yet delivered here, by seqno (ascending: dicts keep order)
        self._forward_table: dict[int, Message] = {}
        #: highest seqno delivered per forwarder
        self._delivered: dict[Address, int] = {}
        self._departed: deque[Address] = deque()
        self._log = Log()
        self._early: deque[Message] = deque()
        self._early_bcasts: list[Message] = []  # BCASTs stamped with a view to come
        #: one came since our last view: our coordinator's wait behind it, till that view
        self._hold_coord = self._replaying = False
        self._recovery: Recovery | None = None
        self._pending: list[Message] = []  # BCASTs waiting for the recovery to end
        #: our view's counter: it stamps the BCASTs we multicast as coordinator
        self._view_no = 0
        #: the counter of the view from which our coordinator's order is ours (it changed
        #: there): its BCASTs stamped earlier belong to an order we were not in
        self._epoch = 0
        self._leaving = False  # GMS asked for the flush
        self._flush_answered = False

    # --- configuration ---------------------------------------------------------------

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        """Refuse a stack without NAKACK2 and UNICAST3 below, or STABLE and GMS above."""
        check_placement(below, above)
        self._lower_ids = frozenset(p.id for p in below if p.id) | _LOWER_IDS

    def _me(self) -> Address:
        assert self.local_address is not None, "SEQUENCER used before start()"
        return self.local_address

    # --- sending ---------------------------------------------------------------------

    def down(self, batch: list[Message], now: float) -> None:
        """Number each ordered multicast, keep it, and forward it (or, as coordinator,
        multicast it); everything else goes down in its place."""
        out: list[Message] = []
        me = self._me()
        table, coord = self._forward_table, self.coord
        seqno = self._seqno
        forwarded = 0
        for msg in batch:
            flags = msg.flags
            if msg.dest is not None or flags & _UNORDERED:
                out.append(msg)
                continue
            seqno += 1
            msg.src = me
            table[seqno] = msg
            if coord is None or self.is_coord:
                self._forward(msg, seqno, FORWARD, out)
                continue
            headers = msg.headers.copy()  # `_forward`, in line: the usual case
            headers[_ID] = seqno  # a FORWARD is its bare seqno (`SequencerHeader`)
            fwd = _new_message(Message)
            fwd.dest, fwd.src, fwd.flags = coord, None, flags & ~_DONT_LOOPBACK
            fwd.headers, fwd.payload = headers, msg.payload
            out.append(fwd)
            forwarded += 1
        self._seqno = seqno
        if forwarded:
            self.counters["forwarded_msgs"] += forwarded
        self.send_down(out)

    def _forward(self, msg: Message, seqno: int, kind: int, out: list[Message]) -> None:
        """Forward one of our own multicasts to the coordinator (none yet: it stays in the
        forward table until a view names one)."""
        coord = self.coord
        if coord is None:
            return
        if self.is_coord:
            self._ordered(self._bcast(msg, self._me(), seqno), out)
            return
        headers = msg.headers.copy()
        headers[_ID] = seqno if kind == FORWARD else SequencerHeader(kind, seqno)
        out.append(Message(coord, msg.payload, flags=msg.flags & ~_DONT_LOOPBACK, headers=headers))
        self.counters["forwarded_msgs" if kind == FORWARD else "flushed_msgs"] += 1

    def _bcast(self, msg: Message, sender: Address, seqno: int) -> Message:
        """The coordinator's multicast of ``sender``'s message ``seqno``: the upper
        layers' headers, our BCAST header, looped back (it is delivered here too)."""
        headers = msg.headers.copy()
        for key in self._lower_ids.intersection(headers):
            del headers[key]
        headers[_ID] = _tuple_new(SequencerHeader, (BCAST, seqno, sender, 0, self._view_no))
        bcast = _new_message(Message)
        bcast.dest = bcast.src = None
        bcast.flags = msg.flags & ~_DONT_LOOPBACK
        bcast.headers = headers
        bcast.payload = msg.payload
        return bcast

    def _ordered(self, bcast: Message, out: list[Message]) -> None:
        """Multicast ``bcast`` in the global order, or queue it behind a recovery."""
        if self._recovery is not None:
            self._pending.append(bcast)
        else:
            out.append(bcast)
            self.counters["bcast_msgs"] += 1

    # --- receiving -------------------------------------------------------------------

    def up(self, batch: list[Message], now: float) -> None:
        """Deliver BCASTs (the hot path: every ordered multicast, at every member), and
        take FORWARDs and the rest as coordinator; other messages pass up in place.
        Counters move once per batch. A batch holds runs of one forwarder's messages (the
        coordinator orders what each bundle brings): the delivery table's entry of the
        run's forwarder is read once and written back when the run ends, and `Address`
        hashing and comparison (Python calls) happen once per run, not per message."""
        out: list[Message] = []
        down: list[Message] = []
        delivered = self._delivered
        log_append = self._log.entries.append
        coord, me = self.coord, self.local_address
        received = dups = forwards = 0
        fast_forward = self.is_coord and not self._leaving and self._recovery is None
        members, lower = self._members, self._lower_ids
        epoch, view_no = self._epoch, self._view_no
        view_id = self.view.view_id if self.view is not None else None
        run: Address | None = None  # the forwarder of the run of BCASTs being delivered
        high, own = 0, False  # its highest seqno delivered; whether it is us
        fwd: Address | None = None  # the source of the run of forwards being ordered
        fwd_member = False
        for msg in batch:
            headers = msg.headers
            hdr = headers.get(_ID)
            if hdr is None:
                out.append(msg)
                if _GMS in headers and not self._hold_coord and not self._replaying:
                    # a VIEW GMS installs after this batch: our coordinator's BCASTs after
                    # it wait for it (campaign tcp-total-blocks 71012)
                    self._hold_coord = changes_coordinator(
                        headers[_GMS], msg.src, me, view_id, coord
                    )
                continue
            if type(hdr) is int:  # a FORWARD's bare seqno
                kind, seqno, sender, hview = FORWARD, hdr, None, 0
            else:
                kind, seqno, sender, _, hview = hdr
            if kind == BCAST:
                src = msg.src
                if src is None or (src is not coord and src != coord):
                    if hview > view_no and len(self._early_bcasts) < _EARLY_MAX:
                        self._early_bcasts.append(msg)  # its view, coming, may make it ours
                        self.counters["bcasts_held_for_view"] += 1
                        self._hold_coord = not self._replaying
                    else:  # the old coordinator's, after the view without it: tails decide
                        self.counters["bcasts_not_from_coord"] += 1
                    continue
                if sender is None or seqno < 1:
                    self.counters["malformed"] += 1
                    continue
                if hview < epoch:  # our coordinator's, from before it was ours
                    self.counters["bcasts_other_order"] += 1
                    continue
                if self._hold_coord and not self.is_coord:  # ours may be stale (never our own)
                    self._early_bcasts.append(msg)
                    self.counters["bcasts_held_for_view"] += 1
                    continue
                received += 1
                if sender is not run:
                    if run is not None:
                        delivered[run] = high
                    run, high, own = sender, delivered.get(sender, 0), sender == me
                if seqno <= high:
                    dups += 1
                    continue
                high = seqno
                stamp = headers.get(_NAK, 0)  # a MSG's bare seqno, or an XMIT_RSP's header
                if type(stamp) is not int:
                    stamp = as_header(stamp).seqno  # type: ignore[union-attr]
                entry = (sender, seqno, msg.payload, msg.flags, headers.copy(), src, stamp)
                log_append(_tuple_new(Logged, entry))
                msg.src = sender
                if own and self._own_delivered(seqno):
                    continue  # DONT_LOOPBACK: ordered, not delivered to its sender
                out.append(msg)
                continue
            src = msg.src
            if src is not fwd:
                fwd, fwd_member = src, src in members
            if kind in (FORWARD, FLUSH) and fast_forward and fwd_member:
                # `_to_coordinator` and `_bcast`, in line: the coordinator's usual case. The
                # forward is ours now: it becomes the multicast, the lower layers' headers gone
                forwards += 1
                for key in lower.intersection(headers):
                    del headers[key]
                headers[_ID] = _tuple_new(SequencerHeader, (BCAST, seqno, src, 0, view_no))
                msg.dest = msg.src = None
                msg.flags &= ~_DONT_LOOPBACK
                down.append(msg)
            elif kind in (FORWARD, FLUSH, TAIL, TAIL_END):
                self._to_coordinator(msg, hdr, down)
            else:
                self.counters["malformed"] += 1
        if run is not None:
            delivered[run] = high
        if forwards:
            self.counters["received_forwards"] += forwards
            self.counters["bcast_msgs"] += forwards
        if received:
            counters = self.counters
            counters["received_bcasts"] += received
            counters["delivered_bcasts"] += received - dups
            if dups:
                counters["duplicates"] += dups
        self.send_down(down)
        if out:
            self.send_up(out)
        self._check_flushed()

    def _own_delivered(self, seqno: int) -> bool:
        """Our multicast ``seqno`` came back in the order: forget it (and any before it);
        True if it was sent DONT_LOOPBACK, so it is not delivered here."""
        original = forget_forwarded(self._forward_table, seqno)
        return original is not None and bool(original.flags & _DONT_LOOPBACK)

    def _to_coordinator(self, msg: Message, raw: SequencerHeader | int, out: list[Message]) -> None:
        """A FORWARD, FLUSH, TAIL or TAIL_END: for us as coordinator."""
        hdr = forward_or_header(raw)
        if not self.is_coord:
            if len(self._early) >= _EARLY_MAX:
                self.counters["early_dropped"] += 1
                return
            self._early.append(msg)  # we may be the next view's coordinator
            return
        src = msg.src
        if src is None or src not in self._members:
            if src is not None and len(self._early) < _EARLY_MAX:
                # A member our view left out while its own view kept it in (a pause, a
                # one-way split) goes on forwarding; a merge view takes it back later.
                # Dropped, its forwards would leave a gap its next ones skip: the order
                # of its messages would jump past them (campaign udp-total seed 2). So
                # they wait, in arrival order, for a view of ours that holds it.
                self._early.append(msg)
                self.counters["non_member_kept"] += 1
                return
            self.counters["non_member_dropped"] += 1
            return
        kind = hdr.type
        if kind in (FORWARD, FLUSH):
            self.counters["received_forwards"] += 1
            if self._leaving:
                self.counters["forwards_dropped_leaving"] += 1
                return
            rec = self._recovery
            if rec is not None and src in rec.awaiting:
                # Sent before it saw the change (we were its coordinator once, before
                # another's order took it: campaign udp-total seed 149). Ordered now, it
                # would come before its older messages its FLUSH, after its tail, sends
                # again: it would skip them as delivered. The FLUSH re-sends this too,
                # unless the member delivered it elsewhere.
                self.counters["forwards_before_tail"] += 1
                return
            self._ordered(self._bcast(msg, src, hdr.seqno), out)
            return
        rec = self._recovery
        if rec is None or src not in rec.awaiting:
            self.counters["tails_ignored"] += 1
            return
        if kind == TAIL:
            if hdr.sender is None:
                self.counters["malformed"] += 1
                return
            msg.headers.pop(_ID)
            rec.add(src, hdr.sender, hdr.seqno, msg, (hdr.view, hdr.trimmed))
        else:
            rec.end(src, (hdr.sender, hdr.trimmed), hdr.view)
            self._recovered_if_done(out)

    # --- view changes and the recovery -----------------------------------------------------

    def view_changed(self, view: View, now: float) -> None:
        old_view, old_coord = self.view, self.coord
        super().view_changed(view, now)
        me = self._me()
        self.coord = view.coord
        self._members = frozenset(view.members)
        was_coord, self.is_coord = self.is_coord, view.coord == me
        forget_departed(self._delivered, self._departed, view)
        out: list[Message] = []
        changed = old_coord is not None and view.coord != old_coord
        self._view_no = view.view_id.id
        if changed:
            # What the new coordinator multicast before this view is another order's (at
            # a merge view, its old subgroup's after the merge digest): delivered, a slice
            # of it jumped our delivery table past messages never ours (campaign
            # udp-total seed 50; `bcasts_other_order` in the module docstring).
            self._epoch = self._view_no
        early, self._early = list(self._early), deque()
        merged = isinstance(view, MergeView) and old_coord is not None
        if self.is_coord:
            groups = old_orders(view, old_view, changed, self._me())
            if groups:
                if self._recovery is None:
                    self._recovery = Recovery()
                    self.counters["recoveries"] += 1
                    if not changed:  # we coordinated: our log is of our own order
                        self._recovery.ours.add(me)
                        self._recovery.resend_ours = merged
                self._recovery.expect(groups, me)
            if self._recovery is not None:
                self._recovery.awaiting &= set(view.members)
            for seqno, msg in self._forward_table.items():  # ours first, in seqno order
                if changed or old_coord is None:
                    self._ordered(self._bcast(msg, me, seqno), out)
            for msg in early:
                self._to_coordinator(msg, msg.headers[_ID], out)
            self._recovered_if_done(out)
        elif was_coord:
            self.counters["early_dropped"] += len(early)  # non-members' forwards: theirs now
            self._recovery = None
            self._pending = []
        else:
            # Not the coordinator yet: what was sent to us as one may be for a view still
            # to come (campaign udp-total seed 40: a paused member installed two at once).
            self._early = deque(early)
        if not self.is_coord and (changed or old_coord is None or merged):
            # A joiner's log is empty, but the new coordinator may await it (we joined as
            # its previous view's coordinator crashed: campaign udp-total seed 66); at a
            # merge view it may await us though our coordinator stays. Merges are rare.
            self._send_tail(view.coord, changed, out)
            # A merge view under the same coordinator: our view may have kept us in
            # while the coordinator's left us out, and what we forwarded meanwhile it
            # dropped as a non-member's (chaos udp-total seed 4242: a paused member).
            for seqno, msg in self._forward_table.items():
                self._forward(msg, seqno, FLUSH if changed or merged else FORWARD, out)
        self.send_down(out)
        self._hold_coord = False
        if self._early_bcasts:  # delivered if this view made their sender our coordinator
            early_bcasts, self._early_bcasts = self._early_bcasts, []
            self._replaying = True  # held again, they hold nothing behind them
            self.up(early_bcasts, now)
            self._replaying = False

    def _send_tail(self, coord: Address, changed: bool, out: list[Message]) -> None:
        """Hand our log (what we delivered and is not known stable) to the new coordinator."""
        out.extend(self._log.tail(coord, self._lower_ids, changed))
        self.counters["tails_sent"] += 1

    def _recovered_if_done(self, out: list[Message]) -> None:
        if self._recovery is not None and self._recovery.done():
            self._recovered(out)

    def _recovered(self, out: list[Message]) -> None:
        """Every tail is in: multicast the furthest of each old order, then what waited."""
        rec = self._recovery
        assert rec is not None
        best, agreed = rec.choose(self._me(), self._log.as_tail(), self._log.trimmed)
        if not agreed:
            self.counters["recoveries_inconsistent"] += 1
        self._recovery = None
        for sender, seqno, msg, _ in best:
            out.append(self._bcast(msg, sender, seqno))
            self.counters["tail_msgs_resent"] += 1
        for bcast in self._pending:  # queued in an earlier view, maybe: stamped with ours
            bcast.headers[_ID] = bcast.headers[_ID]._replace(view=self._view_no)
        out.extend(self._pending)
        self.counters["bcast_msgs"] += len(self._pending)
        self._pending = []

    # --- events ----------------------------------------------------------------------

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, StableDigest):
            self._log.trim(event.digest)
            self.pass_down(event)
            self._check_flushed()
        elif isinstance(event, FlushRequest):
            self._leaving = True
            self.pass_down(event)
            self._check_flushed()
        elif isinstance(event, Disconnect):
            if self._forward_table:
                self.counters["left_undelivered"] += len(self._forward_table)
            self._forward_table.clear()
            self._log.clear()
            self._early.clear()
            self._early_bcasts = []
            self._hold_coord = False
            self._recovery = None
            self._pending = []
            self.coord, self.is_coord = None, False
            self.pass_down(event)
        else:
            super().down_event(event, now)

    def _check_flushed(self) -> None:
        """Answer GMS's `FlushRequest` once everything we sent was delivered here (the
        forward table is empty) and at every member: STABLE's digests trimmed from our log
        our messages the coordinator ordered (campaign udp-total 298: G left flushed while
        F, split off, lacked its message, and F's next view went on without G)."""
        if not self._leaving or self._flush_answered or self._forward_table:
            return
        if len(self._members) > 1 and self._log.holds(self._me(), self.coord):
            return
        self._flush_answered = True
        self.pass_up(FlushDone(self.name))

    # --- observation -----------------------------------------------------------------

    def gauges(self) -> dict[str, Any]:
        """The coordinator, the global seqno and the tables' sizes."""
        return {
            "coord": str(self.coord) if self.coord is not None else None,
            "is_coord": self.is_coord,
            "seqno": self._seqno,
            "forward_table": len(self._forward_table),
            "log": len(self._log),
            "recovering": self._recovery is not None,
            "pending": len(self._pending),
        }
