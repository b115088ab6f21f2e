"""MCAST: reliable multicast with a fixed-capacity window per member (seed 004, JGRP-2780).

Unlike NAKACK2, MCAST's windows never grow: each member keeps one
`RingBuffer` of ``capacity`` slots for what it sent and one per other member
for what it received. A full send window blocks the sender (MCAST holds
what it cannot send and answers True from `blocks_down`, so new sends wait at
the top of the stack while acks and view changes keep flowing); a receiver
drops what lies beyond its window. The window
is the flow control: no MFC is needed above MCAST.

The seed's rules, as implemented here:

- *Send*: the next seqno ``S``, adding the message to the send window and
  handing it down happen in one synchronous handler call, so concurrent
  senders can never put seqnos on the wire out of order (the seed's "Misc"
  lock, free here). If ``S - low >= capacity`` the message waits, in order,
  with every later multicast. Control multicasts (INTERNAL: a VIEW, anything
  GMS sends) never wait behind the application's: they are stamped and sent at
  once, past ``capacity`` if the window is full (``controls_past_capacity``; the
  send window gets more slots when it has none left), and the waiting
  application multicasts follow them. A full window whose acks never come (a
  member that does not ack) must not keep a coordinator's leave VIEW from
  going out; a receiver whose window it does not fit yet gets it again later.
- *Receive*: messages outside ``[low, low + capacity)`` are dropped; new ones
  are stored and delivered up to the first gap. A message past the window
  says its sender sent every seqno below it, so the window's empty slots
  become gaps (`RingBuffer.expect`) that the next tick asks for, answered by
  retransmissions or PURGED: dropped silently, it revealed nothing, and a
  window opened below what its sender still holds for us (a merge digest taken
  seconds before the merge view, while that sender's own subgroup acked and
  it purged) waited for ever, every later multicast and resend landing past
  it (campaign udp-mcast 2145: a restarted member's multicasts never reached
  the other subgroup). OOB messages are delivered as
  soon as they arrive (they may overtake) and leave a marker so ``low`` can
  pass them without delivering them twice.
- *Ack*: receivers ack the highest delivered seqno to the sender after
  ``ack_threshold`` deliveries (default ``capacity // 4``) and otherwise every
  ``xmit_interval``. The sender keeps an ack map over the view's other members,
  purges its window up to the minimum, and sends what was waiting. Acks from
  non-members are ignored; a view change recomputes the minimum, so a member
  that left cannot block senders forever.
- *Retransmit*: every ``xmit_interval`` a receiver sends XMIT_REQ with the
  missing seqnos of each window to their sender, which answers each with the
  original message as a unicast to the requester (XMIT_RSP, original sender
  in the header).
- *Views and digests*: windows are removed for members that left and created
  for new ones; `SetDigest` (a joiner) and `MergeDigest` (the members of the
  other subgroups after a merge) move a member's window to the digest's
  delivered seqno (creating it if needed, never moving it back), whichever of
  the view and the digest arrives first. `GetDigest` is answered with a
  `DigestReply`. A window moved past a gap delivers, in order, what it held at
  or below its new start (JGroups resets it and drops that), as NAKACK2 does:
  only the gap is lost, counted in ``skipped_by_window_move`` and said in a
  warning.

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
- The sender delivers its own multicasts itself, a copy each, when it sends
  them (unless DONT_LOOPBACK), and sends them down with DONT_LOOPBACK (as
  NAKACK2 does), so the transport does not copy them back up; a copy that
  comes back anyway is dropped. So a layer below that loses the outgoing
  message (DISCARD) cannot lose the local delivery, and nothing is delivered
  twice. The ack map holds the
  *other* members; alone in a view (and with no joiner on its way, see
  below), a member purges what it sent at once.
- A new member's ack starts at the send window's ``low``, so joining never
  moves the minimum backwards.
- A digest must agree with what the senders still hold (issue 12: a
  coordinator alone in its view purged its VIEW multicast at once, below the
  digest it had just handed the joiner, whose window then waited for it for
  ever). Two rules, as JGroups holds back stability while a member joins:

  * The coordinator's `TmpView` (sent down just before it takes the joiners'
    digest) puts each joiner in the ack map at the highest seqno sent, the
    digest's entry for us: from there on nothing the joiner's window will
    ask for is purged until the joiner acks it or leaves the view.
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
- Unicasts and NO_RELIABILITY messages pass through untouched. `StableDigest`
  is passed on and otherwise ignored: acks, not STABLE, purge MCAST's window.
- ``capacity`` cannot change at run time (JGroups: not writable).

Leaving (issue 37): GMS's `FlushRequest` is answered with `FlushDone` once
every other member of the view acked our highest seqno (at once if so
already). What waits for room goes at once when the flush begins, and so do
multicasts that come down during it, past ``capacity`` as control multicasts
do (``sent_past_capacity_at_flush``): the application's send returned, so
the message is ours to deliver here and to get to the others while the flush
lasts; waiting for room a member that does not ack may never give, it was
dropped at the leave, never delivered even by its sender (campaign udp-mcast
5135: a multicast parked 10 s behind a deaf member). Meanwhile the highest message goes to
every member whose ack is behind it, at once and at every tick, beside the
tail-loss resend above (which waits a whole interval without progress): a
receiver that had it answers with an ACK. A `Disconnect` that comes first
(the flush timed out) logs at WARNING who had not acked what.

Never awaits, never reads a clock: ``now`` is passed in.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import Any, NamedTuple

from triogroups.address import Address
from triogroups.events import (
    BecomeServer,
    DigestReply,
    Disconnect,
    Event,
    FlushDone,
    FlushRequest,
    GetDigest,
    MergeDigest,
    SetDigest,
    TmpView,
)
from triogroups.message import Flag, Message
from triogroups.properties import Duration, Int, PropertyError, at_least, positive
from triogroups.protocol import Protocol
from triogroups.protocols import ids
from triogroups.protocols._budget import PeerBudget
from triogroups.protocols._retired import RetiredWindows
from triogroups.protocols._ring import RingBuffer
from triogroups.protocols._stats import reliable_stats
from triogroups.protocols._view_digest import ViewDigest
from triogroups.view import Digest, View
from triogroups.wire import register_header

__all__ = ["ACK", "MSG", "PURGED", "XMIT_REQ", "XMIT_RSP", "Mcast", "McastHeader", "as_header"]

_log = logging.getLogger(__name__)

#: Header types.
MSG = 0
XMIT_REQ = 1
XMIT_RSP = 2
ACK = 3
PURGED = 4

_OOB = int(Flag.OOB)
_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
_NO_RELIABILITY = int(Flag.NO_RELIABILITY)
_INTERNAL = int(Flag.INTERNAL)
_CONTROL_FLAGS = int(Flag.OOB | Flag.INTERNAL)


class McastHeader(NamedTuple):
    """On ACK, XMIT_REQ, PURGED and retransmissions. A regular multicast (MSG) carries
    its bare seqno instead, an int (``bare_int`` in `register_header`): every multicast
    would pay for building, encoding, decoding and checking the tuple. The tuple form of
    MSG is still understood.

    ``seqno``: the message's seqno (MSG, XMIT_RSP), the highest delivered
    (ACK), or the highest purged from the send window (PURGED). ``sender``:
    the original sender of a retransmission. ``missing``: the seqnos an
    XMIT_REQ asks for.
    """

    type: int
    seqno: int
    sender: Address | None = None
    missing: tuple[int, ...] = ()


register_header(ids.MCAST, McastHeader, per_message=True, bare_int=True)


def as_header(raw: McastHeader | int | None) -> McastHeader | None:
    """An MCAST header as found in ``Message.headers``, as the NamedTuple: a bare seqno
    is a MSG's. For code that looks at MCAST's messages from outside (tests,
    diagnostics), and for the protocol's slower paths; its in-order path reads the
    int itself."""
    if type(raw) is int:
        return McastHeader(MSG, raw)
    return raw  # type: ignore[return-value]


#: Marks a slot whose OOB message was delivered on arrival.
_DELIVERED = Message()


def _window_stats(win: RingBuffer[Message]) -> dict[str, int]:
    return {"low": win.low, "high": win.high, "size": len(win)}


def _doubled(win: RingBuffer[Message]) -> RingBuffer[Message]:
    """``win`` with twice the slots, holding the same messages at the same seqnos."""
    bigger: RingBuffer[Message] = RingBuffer(win.capacity * 2, win.low)
    for seqno in range(win.low + 1, win.high + 1):
        msg = win.get(seqno)
        if msg is not None:
            bigger.add(seqno, msg)
    bigger.high = win.high
    return bigger


class Mcast(Protocol):
    """Reliable multicast over fixed-size windows; see the module docstring."""

    name = "MCAST"
    id = ids.MCAST
    COUNTERS = (
        "msgs_sent",
        "msgs_received",
        "msgs_delivered",
        "acks_sent",
        "acks_received",
        "acks_from_non_members",
        "xmit_reqs_sent",
        "xmit_reqs_received",
        "retransmissions",
        "xmit_rsps_received",
        "xmit_not_found",
        "xmits_capped",
        "purged_sent",
        "windows_moved_by_purged",
        "windows_reopened",
        "purged_ignored",
        "last_seqno_resends",
        "dropped_outside_window",
        "dropped_no_window",
        "duplicates",
        "loopbacks_dropped",
        "bad_headers",
        "blockings",
        "become_server_queue_dropped",
        "become_server_queue_replayed",
        "skipped_by_window_move",
        "merge_windows_kept",
        "controls_past_capacity",
        "sent_past_capacity_at_flush",
        "dropped_after_leave",
    )
    DURATIONS = ("time_blocked",)

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
        self._send: RingBuffer[Message] = RingBuffer(self.capacity)
        self._budget = PeerBudget()
        self._pending: deque[Message] = deque()
        #: True until our first view is the group's first, or a digest or BecomeServer
        #: came: a joiner keeps what it receives in ``_queue`` (see `_end_joining`).
        self._joining = True
        self._queue: deque[Message] = deque(maxlen=self.become_server_queue_size)
        self._has_left = False  # GMS left the group (`Disconnect`): final
        self._windows: dict[Address, RingBuffer[Message]] = {}
        #: Per member that left our view: its window's ``low`` and the OOB seqnos above it
        #: already delivered, so a window opened for it again delivers nothing twice.
        self._retired = RetiredWindows()
        self._view_digest = ViewDigest()
        self._acks: dict[Address, int] = {}
        self._unacked: dict[Address, int] = {}
        self._ack_due: set[Address] = set()
        self._progress: set[Address] = set()
        self._purge_due = False
        self._high_at_tick = 0
        self._next_tick = math.inf
        self._blocked_since: float | None = None
        self._ack_every = self._threshold()
        self._flushing = False  # GMS's FlushRequest is not answered yet

    def _threshold(self) -> int:
        return self.ack_threshold or max(1, self.capacity // 4)

    # --- configuration -----------------------------------------------------------

    def set_property(self, key: str, value: Any, now: float) -> None:
        if key == "capacity":
            raise PropertyError(f"MCAST.capacity cannot change at run time, got {value!r}")
        super().set_property(key, value, now)

    def property_changed(self, key: str, now: float) -> None:
        if key == "ack_threshold":
            self._ack_every = self._threshold()
        elif key == "become_server_queue_size":
            queue = deque(self._queue, maxlen=self.become_server_queue_size)
            self.counters["become_server_queue_dropped"] += len(self._queue) - len(queue)
            self._queue = queue
        elif key == "xmit_interval":
            self._next_tick = now + self.xmit_interval

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        if any(p.name == "NAKACK2" for p in (*below, *above)):
            raise PropertyError("MCAST replaces NAKACK2: a stack cannot have both")

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self._next_tick = now + self.xmit_interval

    # --- sending ---------------------------------------------------------------------

    def down(self, batch: list[Message], now: float) -> None:
        if self._has_left:
            self._down_after_leave(batch)
            return
        out: list[Message] = []
        local: list[Message] = []
        pending = self._pending
        send, capacity = self._send, self.capacity
        stamped = 0
        for msg in batch:
            if msg.dest is not None or msg.flags & _NO_RELIABILITY:
                out.append(msg)
            elif msg.flags & _INTERNAL or self._flushing:  # control traffic, or leaving
                out.append(self._stamp_control(msg, local))
                send = self._send  # it may have made room for itself
                stamped += 1
            elif pending or send.high + 1 - send.low >= capacity:  # no room: wait
                pending.append(msg)
            else:
                out.append(self._stamp(msg, local))
                stamped += 1
        self._count_sent(stamped, len(local))
        self.send_down(out)
        self.send_up(local)
        if pending and self._blocked_since is None:
            self._blocked_since = now
            self.counters["blockings"] += 1

    def _down_after_leave(self, batch: list[Message]) -> None:
        """We left the group: our multicasts reach nobody's window any more, so they are
        dropped (counted) rather than kept for acks that never come; the rest passes."""
        out = [m for m in batch if m.dest is not None or m.flags & _NO_RELIABILITY]
        self.counters["dropped_after_leave"] += len(batch) - len(out)
        self.send_down(out)

    def _has_room(self) -> bool:
        send = self._send
        return send.high + 1 - send.low < self.capacity

    def _stamp_control(self, msg: Message, local: list[Message]) -> Message:
        """`_stamp` for a control multicast (INTERNAL: a VIEW, anything GMS sends), at
        once even when the window is full: it never waits behind the application's
        multicasts, which wait for room and follow it. Past ``capacity`` it counts as
        ``controls_past_capacity``; the window gets more slots when it has none left
        (its ``capacity`` still bounds the application's multicasts). Also for the
        application's multicasts while the leave flushes (``sent_past_capacity_at_flush``)."""
        send = self._send
        if send.high + 1 - send.low >= self.capacity:
            key = (
                "controls_past_capacity" if msg.flags & _INTERNAL else "sent_past_capacity_at_flush"
            )
            self.counters[key] += 1
            if send.high + 1 - send.low >= send.capacity:
                self._send = _doubled(send)
        return self._stamp(msg, local)

    def _stamp(self, msg: Message, local: list[Message]) -> Message:
        """Seqno, window and send in one step: what makes concurrent senders safe.

        Appends the local delivery (a copy from us) to ``local``. The caller
        counts both (`_count_sent`): once per batch, not per message.
        """
        seqno = self._send.high + 1
        msg.headers[ids.MCAST] = seqno  # a MSG: its bare seqno
        self._send.add(seqno, msg)
        if self.view is not None and not self._acks:
            self._send.purge(seqno)  # alone in the view: nobody will ever ask for it
        if not msg.flags & _DONT_LOOPBACK:
            copy = msg.copy()
            copy.src = self.local_address
            local.append(copy)
            msg.flags |= _DONT_LOOPBACK  # delivered here: the transport must not loop it back
        return msg

    def _count_sent(self, sent: int, delivered_here: int) -> None:
        if sent:
            self.counters["msgs_sent"] += sent
            self.counters["msgs_delivered"] += delivered_here

    def _drain(self, now: float) -> None:
        """Send what waited for room, in order (all of it while flushing, past ``capacity``
        if need be); unblock the senders when all went."""
        pending = self._pending
        if not pending:
            return
        out: list[Message] = []
        local: list[Message] = []
        while pending and self._flushing:
            out.append(self._stamp_control(pending.popleft(), local))
        while pending and self._has_room():
            out.append(self._stamp(pending.popleft(), local))
        self._count_sent(len(out), len(local))
        self.send_down(out)
        self.send_up(local)
        if not pending and self._blocked_since is not None:
            self.durations["time_blocked"] += now - self._blocked_since
            self._blocked_since = None

    def blocks_down(self) -> bool:
        return bool(self._pending)

    # --- receiving --------------------------------------------------------------------

    def up(self, batch: list[Message], now: float) -> None:
        deliver: list[Message] = []
        windows = self._windows
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
                if win is not None and not msg.flags & _OOB and win.deliver_next(seqno):
                    deliver.append(msg)
                    in_order += 1
                    self.counters["msgs_delivered"] += 1
                    self._count_for_ack(msg.src, 1)  # type: ignore[arg-type]
                else:
                    self._receive(msg, as_header(hdr), deliver)  # type: ignore[arg-type]  # not None
            elif kind == XMIT_RSP:
                self._receive(msg, hdr, deliver)
            elif kind == ACK:
                self._on_ack(msg.src, hdr.seqno)
            elif kind == XMIT_REQ:
                self._on_xmit_req(msg.src, hdr.missing, now)
            elif kind == PURGED:
                self._on_purged(msg.src, hdr.seqno, deliver)
            else:
                self.counters["bad_headers"] += 1
        if in_order:
            self.counters["msgs_received"] += in_order
        self.send_up(deliver)
        if self._ack_due:
            self._send_acks_due()
        if self._purge_due:
            self._purge(now)

    def _send_acks_due(self) -> None:
        for sender in self._ack_due:
            self._send_ack(sender)
        self._ack_due.clear()

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
        queue = self._queue
        if len(queue) == queue.maxlen:
            self.counters["become_server_queue_dropped"] += 1
        queue.append(msg)

    def _end_joining(self) -> None:
        """A digest or BecomeServer came: windows for every member of our view (at 0 for
        those the digest did not name), then what the joiner kept, in arrival order;
        what lies at or below a window's start was sent in a view without us and is
        dropped as a duplicate."""
        if not self._joining:
            return
        self._joining = False
        me = self.local_address
        if self.view is not None:
            for member in self.view.members:
                if member != me and member not in self._windows:
                    self._open(member, 0)
        queued = list(self._queue)
        self._queue.clear()
        if not queued:
            return
        self.counters["become_server_queue_replayed"] += len(queued)
        deliver: list[Message] = []
        for msg in queued:
            hdr = as_header(msg.headers.get(ids.MCAST))
            assert hdr is not None  # only MSG and XMIT_RSP are kept
            self._receive(msg, hdr, deliver)
        self.send_up(deliver)
        self._send_acks_due()

    def _receive(self, msg: Message, hdr: McastHeader, deliver: list[Message]) -> None:
        sender = hdr.sender if hdr.type == XMIT_RSP and hdr.sender is not None else msg.src
        seqno = hdr.seqno
        if sender is None or seqno < 1:
            self.counters["bad_headers"] += 1
            return
        if sender == self.local_address:
            self.counters["loopbacks_dropped"] += 1  # delivered when it was sent
            return
        win = self._windows.get(sender)
        if win is None:
            if self._joining:
                self._keep(msg)
            else:
                self.counters["dropped_no_window"] += 1
            return
        if seqno <= win.low:
            self.counters["duplicates"] += 1
            self._ack_due.add(sender)  # the sender may be probing for a lost ack
            return
        if win.beyond(seqno):
            self.counters["dropped_outside_window"] += 1
            win.expect(seqno)  # its whole window was sent: the next tick asks for the gaps
            return
        if hdr.type == XMIT_RSP:
            self.counters["xmit_rsps_received"] += 1
            msg.dest = None  # a retransmitted multicast is still a multicast
        oob = msg.flags & _OOB
        if not win.add(seqno, _DELIVERED if oob else msg):
            self.counters["duplicates"] += 1
            return
        self.counters["msgs_received"] += 1
        if oob:
            deliver.append(msg)
            self.counters["msgs_delivered"] += 1
        if seqno != win.low + 1:
            return
        ready = win.remove_ready()
        for m in ready:
            if m is not _DELIVERED:
                deliver.append(m)
                self.counters["msgs_delivered"] += 1
        self._count_for_ack(sender, len(ready))

    def _count_for_ack(self, sender: Address, count: int) -> None:
        """``count`` more of ``sender``'s seqnos are delivered: ack once enough piled up."""
        count += self._unacked.get(sender, 0)
        self._unacked[sender] = count
        if count >= self._ack_every:
            self._ack_due.add(sender)

    def _send_ack(self, sender: Address) -> None:
        win = self._windows.get(sender)
        if win is None:
            return
        self._unacked[sender] = 0
        self.counters["acks_sent"] += 1
        header = McastHeader(ACK, win.low)
        self.send_down_one(Message(sender, flags=_CONTROL_FLAGS, headers={ids.MCAST: header}))

    def _on_ack(self, member: Address | None, ack: int) -> None:
        if member is None or member not in self._acks:
            self.counters["acks_from_non_members"] += 1
            return
        self.counters["acks_received"] += 1
        ack = min(ack, self._send.high)
        if ack > self._acks[member]:
            self._acks[member] = ack
            self._progress.add(member)
            self._purge_due = True

    def _purge(self, now: float) -> None:
        """Purge the send window up to the minimum ack, then send what waited."""
        self._purge_due = False
        if self.view is None:
            return
        lowest = min(self._acks.values(), default=self._send.high)
        if lowest > self._send.low:
            self._send.purge(lowest)
        self._drain(now)
        self._check_flushed()

    def _on_xmit_req(self, requester: Address | None, missing: tuple[int, ...], now: float) -> None:
        """Resend what ``requester`` misses, at most ``max_xmits_per_interval`` messages
        per requester per interval (`PeerBudget`); the rest counts as ``xmits_capped``."""
        if requester is None:
            self.counters["bad_headers"] += 1
            return
        self.counters["xmit_reqs_received"] += 1
        send = self._send
        out: list[Message] = []
        purged = False
        missing = missing[: self.capacity]
        granted = self._budget.take(
            requester, len(missing), self.max_xmits_per_interval, self.xmit_interval, now
        )
        if granted < len(missing):
            self.counters["xmits_capped"] += len(missing) - granted
            missing = missing[:granted]
        for seqno in missing:
            msg = send.get(seqno)
            if msg is not None:
                out.append(self._retransmission(msg, seqno, requester))
            elif seqno <= send.low:
                purged = True
            else:
                self.counters["xmit_not_found"] += 1
        self.counters["retransmissions"] += len(out)
        if purged:
            self.counters["purged_sent"] += 1
            header = McastHeader(PURGED, send.low)
            out.append(Message(requester, flags=_CONTROL_FLAGS, headers={ids.MCAST: header}))
        self.send_down(out)

    def _on_purged(self, sender: Address | None, low: int, deliver: list[Message]) -> None:
        """``sender`` purged up to ``low`` in a view without us: our window starts there."""
        win = self._windows.get(sender) if sender is not None else None
        if win is None or low <= win.low:
            self.counters["purged_ignored"] += 1  # a stranger's, or late: nothing to move
            return
        assert sender is not None
        self.counters["windows_moved_by_purged"] += 1
        win.purge(low)
        ready = [m for m in win.remove_ready() if m is not _DELIVERED]
        self.counters["msgs_delivered"] += len(ready)
        deliver.extend(ready)
        self._ack_due.add(sender)

    def _retransmission(self, msg: Message, seqno: int, to: Address) -> Message:
        copy = msg.copy()
        copy.dest = to
        copy.headers[ids.MCAST] = McastHeader(XMIT_RSP, seqno, self.local_address)
        return copy

    # --- the retransmission timer ------------------------------------------------------

    def next_deadline(self) -> float:
        return self._next_tick

    def tick(self, now: float) -> None:
        """XMIT_REQ for every gap, acks not yet sent, and last-seqno resends."""
        for sender, win in self._windows.items():
            missing = win.missing(limit=self.capacity)
            if missing:
                self.counters["xmit_reqs_sent"] += 1
                header = McastHeader(XMIT_REQ, 0, None, tuple(missing))
                self.send_down_one(
                    Message(sender, flags=_CONTROL_FLAGS, headers={ids.MCAST: header})
                )
        for sender, count in list(self._unacked.items()):
            if count:
                self._send_ack(sender)
        self._resend_last()
        if self._flushing:
            self._flush_probe()
        self._next_tick = now + self.xmit_interval

    def _resend_last(self) -> None:
        """Resend the highest message to members stuck below it for a whole interval."""
        high = self._send.high
        if self.view is not None:
            msg = self._send.get(high)
            for member, ack in self._acks.items():
                if ack < self._high_at_tick and member not in self._progress and msg is not None:
                    self.counters["last_seqno_resends"] += 1
                    self.send_down_one(self._retransmission(msg, high, member))
        self._progress.clear()
        self._high_at_tick = high

    # --- views and digests --------------------------------------------------------------

    def view_changed(self, view: View, now: float) -> None:
        super().view_changed(view, now)
        if self._joining and view.view_id.id <= 1:
            self._end_joining()  # the group's first view: nobody multicast before it
        me = self.local_address
        for member in [m for m in self._windows if m not in view]:
            self._retire(member, self._windows.pop(member))
            self._unacked.pop(member, None)
        for member in [m for m in self._acks if m not in view]:
            del self._acks[member]
        for member in view.members:
            if member == me:
                continue
            if member not in self._windows and not self._joining:  # a joiner: its digest
                self._open(member, 0)
            if member not in self._acks:
                self._acks[member] = self._send.low
        self._view_digest.record(view.view_id, self.digest())
        self._purge(now)

    def _retire(self, member: Address, win: RingBuffer[Message]) -> None:
        """Remember where ``member``'s window was (what it held undelivered is dropped:
        a window opened again asks for it)."""
        oob = [s for s in range(win.low + 1, win.high + 1) if win.get(s) is _DELIVERED]
        self._retired.remember(member, win.low, oob)

    def _open(self, member: Address, start: int) -> None:
        """A window for ``member`` from ``start``, or from where it was when ``member`` left
        our view if that is further: its seqnos never restart within one incarnation."""
        back = self._retired.take(member)
        if back is None:
            self._windows[member] = RingBuffer(self.capacity, start)
            return
        low, oob = back
        win: RingBuffer[Message] = RingBuffer(self.capacity, max(start, low))
        for seqno in oob:
            win.add(seqno, _DELIVERED)  # at or below the start, or too far: not added
        win.remove_ready()  # markers right after the start: passed, nothing to deliver
        self._windows[member] = win
        self.counters["windows_reopened"] += 1

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, GetDigest):
            self.pass_up(DigestReply(event.requester, self._view_digest.answer(event, self.digest)))
            return
        if isinstance(event, SetDigest):
            self._set_digest(event.digest, "a digest")
            self._end_joining()
        elif isinstance(event, MergeDigest):
            self._set_digest(event.digest, "a merge digest")
        elif isinstance(event, BecomeServer):
            self._end_joining()
        elif isinstance(event, TmpView):
            self._hold_for_joiners(event.view)
        elif isinstance(event, FlushRequest):
            self._flushing = True
            self._drain(now)
            self._flush_probe()
            self._check_flushed()
        elif isinstance(event, Disconnect):
            self._unflushed()
            self._left_group(now)
        super().down_event(event, now)

    # --- leaving: the flush ---------------------------------------------------------------

    def _lagging(self) -> dict[Address, int]:
        """The members whose ack is below our highest seqno, with their ack."""
        high = self._send.high
        return {m: ack for m, ack in self._acks.items() if ack < high}

    def _check_flushed(self) -> None:
        """Answer GMS's `FlushRequest` once every member acked our highest seqno."""
        if self._flushing and not self._pending and not self._lagging():
            self._flushing = False
            self.pass_up(FlushDone(self.name))

    def _flush_probe(self) -> None:
        """Send our highest message to each member behind it: it delivers it or acks it."""
        high = self._send.high
        msg = self._send.get(high)
        if msg is None:
            return
        for member in self._lagging():
            self.counters["last_seqno_resends"] += 1
            self.send_down_one(self._retransmission(msg, high, member))

    def _unflushed(self) -> None:
        """We leave before the flush ended: say who may never get what."""
        if self._flushing:
            self._flushing = False
            _log.warning(
                "%s: left with multicasts up to %d not acked by %s (pending %d)",
                self.local_address,
                self._send.high,
                ", ".join(f"{m} (acked {a})" for m, a in self._lagging().items()) or "nobody",
                len(self._pending),
            )

    def _left_group(self, now: float) -> None:
        """GMS left the group: fall silent towards the old view, as NAKACK2 does.

        No view, no receive windows, no acks owed or awaited, no retransmission
        timer: otherwise a member that left would resend its last message to its
        old members and ask for retransmissions for ever. What we sent stays, so
        a late XMIT_REQ for our own last messages is still answered.

        Multicasts still waiting for room were never sent and never will be (no
        ack comes any more): they are dropped and counted (``dropped_after_leave``),
        as are those that come down later, so no sender stays blocked (a
        channel's own waiting sends raise ChannelClosed when it closes).
        """
        parked = len(self._pending)
        if parked:
            self._pending.clear()
            self.counters["dropped_after_leave"] += parked
            _log.warning(
                "%s: MCAST left the group with %d multicasts still waiting for room in "
                "the window: they were never sent and are dropped",
                self.local_address,
                parked,
            )
        if self._blocked_since is not None:
            self.durations["time_blocked"] += now - self._blocked_since
            self._blocked_since = None
        self._has_left = True
        self._joining = False
        self._queue.clear()
        self.view = None
        self._windows.clear()
        self._retired.clear()
        self._view_digest.forget()
        self._acks.clear()
        self._unacked.clear()
        self._ack_due.clear()
        self._progress.clear()
        self._next_tick = math.inf

    def _hold_for_joiners(self, view: View) -> None:
        """Keep what we send from here on until the joiners of ``view`` ack it.

        The coordinator's digest for them, taken next, says we sent up to
        ``high``: their windows start there and will ask for what follows.
        """
        for member in view.members:
            if member != self.local_address and member not in self._acks:
                self._acks[member] = self._send.high

    def _set_digest(self, digest: Digest, why: str) -> None:
        """Open or move windows to a join or merge digest.

        A merge digest never moves the window of a member of our own view (our
        subgroup: the merge view is not installed yet): that member is still with
        us and keeps what we did not ack, so its last-message resends and our
        XMIT_REQs fill the gap; if it did purge (it went on in a view without us)
        it answers PURGED and the window moves then (`_on_purged`). Moving it here
        skipped messages a merge could still get (campaign udp-mcast 2145, 5013:
        a flushed leaver's last multicasts never reached a member of its view).
        """
        deliver: list[Message] = []
        merge = why == "a merge digest"
        for member, (delivered, _received) in digest.items():
            if member == self.local_address:
                continue
            win = self._windows.get(member)
            if win is None:
                self._open(member, delivered)
            elif win.low < delivered:
                if merge and self.view is not None and member in self.view:
                    self.counters["merge_windows_kept"] += 1
                    continue
                self._move(win, delivered, member, why, deliver)
        self.counters["msgs_delivered"] += len(deliver)
        self.send_up(deliver)

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
            ready = [m for _, m in held if m is not _DELIVERED]
            deliver.extend(ready)
            skipped = held[-1][0] - win.low - len(held)
            if skipped:
                self.counters["skipped_by_window_move"] += skipped
                _log.warning(
                    "%s: MCAST %s moved the window for %s from %d to %d: %d of its "
                    "messages never came and are skipped, %d held behind them are delivered",
                    self.local_address,
                    why,
                    member,
                    win.low,
                    seqno,
                    skipped,
                    len(ready),
                )
        win.purge(seqno)
        deliver.extend(m for m in win.remove_ready() if m is not _DELIVERED)

    def digest(self) -> Digest:
        """Per member: (highest delivered, highest received); ours: highest sent twice."""
        entries = {m: (w.low, w.high) for m, w in self._windows.items()}
        if self.local_address is not None:
            entries[self.local_address] = (self._send.high, self._send.high)
        return Digest(entries)

    # --- observability --------------------------------------------------------------------

    def gauges(self) -> dict[str, Any]:
        """Windows, acks and the blocked sender; with the keys every reliable protocol
        shares (`reliable_stats`; ``pending_acks``: senders owed an ack)."""
        lowest = min(self._acks.values(), default=self._send.high)
        counters = self.counters
        return {
            **reliable_stats(
                sent=counters["msgs_sent"],
                received=counters["msgs_received"],
                delivered=counters["msgs_delivered"],
                xmit_reqs_sent=counters["xmit_reqs_sent"],
                xmit_reqs_received=counters["xmit_reqs_received"],
                retransmitted=counters["retransmissions"],
                peer_windows={str(m): (w.low, w.low, w.high) for m, w in self._windows.items()},
                pending_acks=sum(1 for n in self._unacked.values() if n),
            ),
            "blocked_since": self._blocked_since,
            "seqno": self._send.high,
            "send_window": _window_stats(self._send),
            "receive_windows": {str(m): _window_stats(w) for m, w in self._windows.items()},
            "ack_map": {str(m): a for m, a in self._acks.items()},
            "min_ack": lowest,
            "blocked": bool(self._pending),
            "parked_messages": len(self._pending),
            "become_server_queue": len(self._queue),
        }
