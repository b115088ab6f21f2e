"""NAKACK2: reliable multicast with negative acks, per-sender FIFO (JGroups' NAKACK2).

Sans-IO, like every protocol here: it never awaits and never reads a clock;
its retransmit task is `tick` at `next_deadline`.

Every multicast gets the next seqno of its sender. Each member keeps a
receive window (a `SeqnoTable`) per member of the view and delivers each
sender's messages in seqno order, exactly once. A receiver that sees a gap
asks the original sender for the missing seqnos (XMIT_REQ); the sender
answers by multicasting the message again, or with a unicast XMIT_RSP when
``use_mcast_xmit`` is off. OOB multicasts are reliable too but are delivered
as soon as they arrive. A sender keeps what it sent until STABLE reports
(`StableDigest`) that every member has delivered it. Unicasts and
NO_RELIABILITY messages pass through untouched.

With ``xmit_interval <= 0`` (seed 003, JGRP-2675, for TCP) the seqnos only
order: no retransmit task, no HIGHEST_SEQNO task, stability never asks for
retransmission, and the become_server_queue is unbounded. A stack that can
lose a message below NAKACK2 (a lossy transport, a DISCARD layer) is then
refused at build time, and a run-time switch to it is refused the same way.

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
  subgroup out): a window we kept from an older view is moved forward, since
  what that member sent meanwhile in a view without us may be purged and
  could never be retransmitted (JGroups' mergeDigest resets such a window).
  As in JGroups, existing members give a member that is new in a view a
  window at 0.
- Our own multicasts are delivered here when they are sent (a copy) and go
  down with DONT_LOOPBACK, so local delivery never depends on the transport
  looping them back; a copy of ours that comes up anyway is a duplicate.
  Retransmitted multicasts carry the flag too. Receivers see it and ignore it.
- Only the original sender keeps delivered messages (XMIT_REQ goes only to
  it), in a second `SeqnoTable` purged by STABLE; receivers drop a message
  once delivered.
- The retransmit task asks only for gaps it already saw at its previous run
  (JGRP-1539), at most ``max_xmit_req_size`` seqnos (a count, as in JGroups)
  per member and run. HIGHEST_SEQNO and STABILITY ask for the whole range
  above what we received, capped the same way. STABILITY asks only when the
  previous stability digest too showed more than we have (JGRP-2678), so a
  message that is merely in flight is not requested.
- The become_server_queue drops its oldest entries when full (the seed's
  correction); it holds only MSG and XMIT_RSP messages.
- A member that left the group (`Disconnect` from GMS) drops its windows and
  its retransmit task: it asks nobody for anything any more.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import Any

from triogroups.address import Address
from triogroups.events import (
    BecomeServer,
    DigestReply,
    Disconnect,
    Event,
    GetDigest,
    MergeDigest,
    SetDigest,
    StableDigest,
)
from triogroups.message import Flag, Message
from triogroups.properties import Bool, Duration, Int, PropertyError, at_least
from triogroups.protocol import Protocol
from triogroups.protocols import ids
from triogroups.protocols._table import SeqnoTable
from triogroups.protocols.nakack2._header import (
    HIGHEST_SEQNO,
    MSG,
    XMIT_REQ,
    XMIT_RSP,
    NakAckHeader2,
    expand_ranges,
    to_ranges,
)
from triogroups.view import Digest, View

__all__ = ["NakAckHeader2", "Nakack2"]

_ID = ids.NAKACK2
_new = tuple.__new__  # a header without the NamedTuple's keyword-default call
_OOB = int(Flag.OOB)
_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
_NO_RELIABILITY = int(Flag.NO_RELIABILITY)
_CONTROL = int(Flag.OOB | Flag.INTERNAL)
_COUNTERS = (
    "msgs_sent",
    "msgs_received",
    "duplicates",
    "non_member_dropped",
    "malformed",
    "xmit_reqs_sent",
    "xmit_seqnos_requested",
    "xmit_reqs_received",
    "xmit_reqs_not_mine",
    "xmit_not_found",
    "xmit_rsps_sent",
    "xmit_rsps_received",
    "highest_seqno_sent",
    "highest_seqno_received",
    "become_server_queue_dropped",
    "become_server_queue_replayed",
    "digests_set",
    "stable_digests",
    "purged",
)

#: A receive window holds a message, or None for an OOB message that was
#: delivered when it arrived.
_Window = SeqnoTable[Message | None]


class Nakack2(Protocol):
    """Reliable per-sender FIFO multicast (see the module docstring)."""

    name = "NAKACK2"
    id = _ID

    xmit_interval = Duration(
        0.5, doc="how often missing messages are asked for; <= 0 turns retransmission off (TCP)"
    )
    use_mcast_xmit = Bool(True, doc="answer XMIT_REQ by multicasting the message again")
    max_xmit_req_size = Int(
        1024,
        doc="most seqnos asked for in one XMIT_REQ",
        check=at_least(1),
    )
    become_server_queue_size = Int(
        50,
        doc="multicasts a joiner queues before it is a server (unbounded if xmit_interval <= 0)",
        check=at_least(1),
    )
    resend_last_seqno = Bool(True, doc="multicast the highest seqno sent while nothing new is sent")
    resend_last_seqno_max_times = Int(
        1,
        doc="times the same highest seqno is resent",
        check=at_least(1),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._seqno = 0
        self._sent: SeqnoTable[Message] = SeqnoTable()
        self._windows: dict[Address, _Window] = {}
        self._server = False
        self._has_digest = False
        self._queue: deque[Message] = deque(maxlen=self._queue_bound())
        self._xmit_prev: dict[Address, int] = {}
        self._stable_xmit: dict[Address, int] = {}
        self._next_xmit = math.inf
        self._sent_since_xmit = False
        self._last_resent = 0
        self._resends = 0
        self._unsafe_without_xmit = ""
        self._xmit_interval_set = self.xmit_interval
        self._last_stable: Digest | None = None
        self._counters = Counter(dict.fromkeys(_COUNTERS, 0))

    # --- configuration ------------------------------------------------------------

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self._schedule_xmit(now)

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        """Refuse ``xmit_interval <= 0`` where a message can be lost below NAKACK2."""
        transport = below[0] if below else None
        if transport is not None and not getattr(transport, "lossless", False):
            self._unsafe_without_xmit = f"the transport {transport.name} can lose messages"
        elif any(p.name == "DISCARD" for p in below):
            self._unsafe_without_xmit = "DISCARD sits below NAKACK2"
        if self.xmit_interval <= 0 and self._unsafe_without_xmit:
            raise PropertyError(self._refusal(self.xmit_interval))

    def _refusal(self, value: float) -> str:
        return (
            f"NAKACK2.xmit_interval must be > 0 when {self._unsafe_without_xmit}, got {value}: "
            "without retransmission a message lost below NAKACK2 leaves a gap forever"
        )

    def property_changed(self, key: str, now: float) -> None:
        """``xmit_interval`` starts or stops the retransmit task and re-bounds the queue."""
        if key == "xmit_interval":
            if self.xmit_interval <= 0 and self._unsafe_without_xmit:
                value, self.xmit_interval = self.xmit_interval, self._xmit_interval_set
                raise PropertyError(self._refusal(value))
            self._xmit_interval_set = self.xmit_interval
            self._schedule_xmit(now)
        if key in ("xmit_interval", "become_server_queue_size"):
            bound = self._queue_bound()
            if bound != self._queue.maxlen:
                old = self._queue
                self._queue = deque(old, maxlen=bound)  # keeps the newest when shrinking
                self._counters["become_server_queue_dropped"] += len(old) - len(self._queue)

    def _queue_bound(self) -> int | None:
        return None if self.xmit_interval <= 0 else self.become_server_queue_size

    def _schedule_xmit(self, now: float) -> None:
        self._next_xmit = now + self.xmit_interval if self.xmit_interval > 0 else math.inf

    # --- sending ---------------------------------------------------------------------

    def down(self, batch: list[Message], now: float) -> None:
        """Number each multicast, keep it for retransmission, deliver our own at once.

        The multicast goes down with DONT_LOOPBACK: it was delivered here
        already, so the transport must not loop it back a second time. The
        kept message is the one sent (as UNICAST3 keeps its own): the layers
        below never change a message beyond stamping its source, and a
        retransmission sends a copy.
        """
        me = self._me()
        local: list[Message] = []
        kept: list[Message] = []
        seqno = self._seqno
        for msg in batch:
            if msg.dest is not None or msg.flags & _NO_RELIABILITY:
                continue
            seqno += 1
            msg.headers[_ID] = _new(NakAckHeader2, (MSG, seqno, None, ()))
            if not msg.flags & _DONT_LOOPBACK:
                mine = msg.copy()
                mine.src = me
                local.append(mine)
                msg.flags |= _DONT_LOOPBACK
            kept.append(msg)
        if kept:
            self._seqno = seqno
            self._sent.append_run(kept)
            self._counters["msgs_sent"] += len(kept)
            self._sent_since_xmit = True
        self.send_down(batch)
        if local:
            self.send_up(local)

    def _me(self) -> Address:
        assert self.local_address is not None, "NAKACK2 used before start()"
        return self.local_address

    # --- receiving ---------------------------------------------------------------------

    def up(self, batch: list[Message], now: float) -> None:
        out: list[Message] = []
        windows = self._windows
        received = 0
        for msg in batch:
            hdr = msg.headers.get(_ID)
            if hdr is None or msg.flags & _NO_RELIABILITY:
                out.append(msg)
                continue
            kind = hdr.type
            if kind == MSG and self._server:
                # The common case first: the next message of a member's window, nothing waiting.
                win = windows.get(msg.src)  # type: ignore[arg-type]
                if win is not None and not msg.flags & _OOB and win.deliver_next(hdr.seqno):
                    received += 1
                    out.append(msg)
                else:
                    self._receive(msg, hdr.seqno, out)
            elif kind in (MSG, XMIT_RSP):
                if not self._server:
                    self._enqueue(msg)
                    continue
                self._counters["xmit_rsps_received"] += 1
                if hdr.sender is None:
                    self._counters["malformed"] += 1
                    continue
                msg.src, msg.dest = hdr.sender, None
                self._receive(msg, hdr.seqno, out)
            elif kind == XMIT_REQ:
                self._handle_xmit_req(msg, hdr)
            elif kind == HIGHEST_SEQNO:
                self._handle_highest_seqno(msg.src, hdr.seqno)
            else:
                self._counters["malformed"] += 1
        if received:
            self._counters["msgs_received"] += received
        if out:
            self.send_up(out)

    def _receive(self, msg: Message, seqno: int, out: list[Message]) -> None:
        """Add to the sender's window; deliver an OOB message now, then the ready run."""
        if msg.src == self.local_address:
            self._counters["duplicates"] += 1  # ours, delivered when it was sent
            return
        win = self._windows.get(msg.src) if msg.src is not None else None
        if win is None:
            self._counters["non_member_dropped"] += 1
            return
        if seqno < 1:
            self._counters["malformed"] += 1
            return
        oob = msg.flags & _OOB
        if not win.add(seqno, None if oob else msg):
            self._counters["duplicates"] += 1
            return
        self._counters["msgs_received"] += 1
        if oob:
            out.append(msg)
        if win.has_ready():
            out.extend(m for m in win.remove_ready() if m is not None)

    def _enqueue(self, msg: Message) -> None:
        queue = self._queue
        if queue.maxlen is not None and len(queue) >= queue.maxlen:
            self._counters["become_server_queue_dropped"] += 1  # the oldest makes room
        queue.append(msg)

    # --- retransmission ------------------------------------------------------------------

    def _handle_xmit_req(self, msg: Message, hdr: NakAckHeader2) -> None:
        """Answer from what we sent and still keep; requests for others' messages are ignored."""
        self._counters["xmit_reqs_received"] += 1
        me = self._me()
        if hdr.sender != me or msg.src is None:
            self._counters["xmit_reqs_not_mine"] += 1
            return
        sent = self._sent
        seqnos = expand_ranges(hdr.ranges, sent.hd + 1, sent.hr, self.max_xmit_req_size)
        if seqnos is None:
            self._counters["malformed"] += 1
            return
        for seqno in seqnos:
            stored = sent.get(seqno)
            if stored is None:
                self._counters["xmit_not_found"] += 1
                continue
            copy = stored.copy()  # carries DONT_LOOPBACK: we delivered it when we sent it
            if not self.use_mcast_xmit:
                copy.dest = msg.src
                copy.headers[_ID] = NakAckHeader2(XMIT_RSP, seqno, me)
            self.send_down_one(copy)
            self._counters["xmit_rsps_sent"] += 1

    def _handle_highest_seqno(self, src: Address | None, seqno: int) -> None:
        """The sender's last message may be lost: ask for what lies above what we received."""
        self._counters["highest_seqno_received"] += 1
        if not self._server or self.xmit_interval <= 0 or src is None or src == self._me():
            return
        win = self._windows.get(src)
        if win is not None and seqno > win.hr:
            self._request_range(src, win.hr + 1, seqno)

    def _request_range(self, member: Address, first: int, last: int) -> None:
        last = min(last, first + self.max_xmit_req_size - 1)
        self._send_xmit_req(member, (first, last), last - first + 1)

    def _send_xmit_req(self, member: Address, ranges: tuple[int, ...], count: int) -> None:
        hdr = NakAckHeader2(XMIT_REQ, 0, member, ranges)
        self.send_down_one(Message(member, flags=_CONTROL, headers={_ID: hdr}))
        self._counters["xmit_reqs_sent"] += 1
        self._counters["xmit_seqnos_requested"] += count

    def next_deadline(self) -> float:
        return self._next_xmit

    def tick(self, now: float) -> None:
        if now < self._next_xmit:
            return
        self._schedule_xmit(now)
        if not self._server:
            return
        self._trigger_xmit()
        if self.resend_last_seqno:
            self._resend_last_seqno()

    def _trigger_xmit(self) -> None:
        """Ask each sender for the gaps that were already there at the previous run."""
        for member, win in self._windows.items():
            missing = win.missing(self.max_xmit_req_size)
            if not missing:
                self._xmit_prev.pop(member, None)
                continue
            prev = self._xmit_prev.get(member)
            self._xmit_prev[member] = max(missing[-1], prev or 0)
            if prev is None:
                continue
            ask = [s for s in missing if s <= prev]
            if ask:
                self._send_xmit_req(member, to_ranges(ask), len(ask))

    def _resend_last_seqno(self) -> None:
        """HIGHEST_SEQNO (JGRP-1904): skipped after new traffic, resent at most max_times."""
        seqno = self._seqno
        if seqno == 0 or self._sent_since_xmit:
            self._sent_since_xmit = False
            return
        if seqno == self._last_resent and self._resends >= self.resend_last_seqno_max_times:
            return
        if seqno > self._last_resent:
            self._last_resent, self._resends = seqno, 1
        else:
            self._resends += 1
        hdr = NakAckHeader2(HIGHEST_SEQNO, seqno)
        self.send_down_one(Message(None, flags=_CONTROL | _DONT_LOOPBACK, headers={_ID: hdr}))
        self._counters["highest_seqno_sent"] += 1

    # --- views, digests, stability ----------------------------------------------------------

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, GetDigest):
            self.pass_up(DigestReply(event.requester, self.digest()))
        elif isinstance(event, SetDigest):
            self._set_digest(event.digest)
        elif isinstance(event, MergeDigest):
            self._set_digest(event.digest, merge=True)
        elif isinstance(event, StableDigest):
            self._stable(event.digest)
        elif isinstance(event, BecomeServer):
            self._become_server(now)
            self.pass_down(event)
        elif isinstance(event, Disconnect):
            self._left_group()
            self.pass_down(event)
        else:
            super().down_event(event, now)

    def _left_group(self) -> None:
        """GMS left the group: no view, no windows, no retransmit task.

        Every member is a non-member from now on. A window kept from the last
        view would ask for what the others purged in views without us, for
        ever, and those requests would look like signs of life to their
        failure detectors. What we sent stays, so a late XMIT_REQ for our
        own last messages is still answered.
        """
        self.view = None
        self._windows.clear()
        self._xmit_prev.clear()
        self._stable_xmit.clear()
        self._next_xmit = math.inf

    def view_changed(self, view: View, now: float) -> None:
        super().view_changed(view, now)
        if self._server or self._has_digest:
            self._adjust_windows(view)
        elif view.view_id.id <= 1:
            self._become_server(now)  # the group's first view: every window starts at 0

    def _adjust_windows(self, view: View) -> None:
        """Drop the windows of members that left; members new in the view start at 0."""
        me = self._me()
        windows = self._windows
        for member in [m for m in windows if m not in view]:
            del windows[member]
        for member in view.members:
            if member not in windows and member != me:
                windows[member] = SeqnoTable()
        for table in (self._xmit_prev, self._stable_xmit):
            for member in [m for m in table if m not in view]:
                del table[member]

    def _set_digest(self, digest: Digest, *, merge: bool = False) -> None:
        """Windows start at the digest's highest delivered seqnos (never our own).

        An existing window moves forward (never back): SetDigest works whether
        it comes before or after the joiner's view, and a MergeDigest (the
        other subgroups only) catches up with a member we last saw in an
        older view.
        """
        me = self._me()
        out: list[Message] = []
        for member, (delivered, _received) in digest.items():
            if member == me:
                continue
            win = self._windows.get(member)
            if win is None:
                self._windows[member] = SeqnoTable(delivered)
            elif win.hd < delivered:
                win.purge(delivered)
                if self._server and win.has_ready():
                    out.extend(m for m in win.remove_ready() if m is not None)
        if out:
            self.send_up(out)
        if not merge:
            self._has_digest = True
        self._counters["digests_set"] += 1

    def _become_server(self, now: float) -> None:
        """Deliver from now on; replay the queued multicasts in arrival order."""
        self._server = True
        if self.view is not None:
            self._adjust_windows(self.view)
        if self._queue:
            queued = list(self._queue)
            self._queue.clear()
            self._counters["become_server_queue_replayed"] += len(queued)
            self.up(queued, now)

    def digest(self) -> Digest:
        """Per member: (highest delivered, highest received); ours: the highest sent, twice."""
        entries = {m: (w.hd, w.hr) for m, w in self._windows.items()}
        entries[self._me()] = (self._seqno, self._seqno)
        return Digest(entries)

    def _stable(self, digest: Digest) -> None:
        """Purge what everyone delivered; ask for what others have and we still lack."""
        self._last_stable = digest
        self._counters["stable_digests"] += 1
        me = self._me()
        for member, (delivered, received) in digest.items():
            if member == me:
                self._counters["purged"] += self._sent.purge(min(delivered, self._seqno))
                continue
            win = self._windows.get(member)
            if win is None or not self._server or self.xmit_interval <= 0:
                continue
            prev = self._stable_xmit.get(member)
            if prev is not None and prev > win.hr:
                self._request_range(member, win.hr + 1, prev)
            self._stable_xmit[member] = received

    # --- observation --------------------------------------------------------------------------

    def retained(self) -> int:
        """Messages held: sent and not yet stable, received and not yet delivered, queued."""
        undelivered = sum(len(w) for w in self._windows.values())
        return len(self._sent) + undelivered + len(self._queue)

    def stats(self) -> dict[str, Any]:
        windows = {
            str(m): {"hd": w.hd, "hr": w.hr, "size": len(w), "missing": w.hr - w.hd - len(w)}
            for m, w in self._windows.items()
        }
        return {
            **self._counters,
            "seqno": self._seqno,
            "is_server": self._server,
            "xmit_task_running": self._next_xmit != math.inf,
            "sent_retained": len(self._sent),
            "sent_low": self._sent.hd,
            "sent_high": self._sent.hr,
            "windows": windows,
            "become_server_queue": len(self._queue),
            "become_server_queue_bound": self._queue.maxlen,
            "retained": self.retained(),
            "last_stable_digest": None if self._last_stable is None else repr(self._last_stable),
        }
