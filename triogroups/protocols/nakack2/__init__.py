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
TCP counts as lossless although it drops frames for a member it cannot
reach: as in JGroups, that member is suspected, excluded, and rejoins
through a merge whose digest starts its windows afresh (an outage too short
to be suspected leaves a gap nothing repairs).

This module holds the `Nakack2` layer: its properties, the send and
receive paths, event dispatch and stats. The state the sides share (seqno,
sent messages, windows, counters, the member's `Phase`) is one `NakState`
in `_state`; the retransmit side (XMIT_REQ, XMIT_RSP, HIGHEST_SEQNO,
stability) is in `_retransmit`; the windows across views (the
become_server_queue, digests, view changes, VIEW_SEQNO, leaving) in
`_membership`; the header in `_header`. Each module lists its own decisions.

Decisions where the seed and JGroups leave a choice:

- Our own multicasts are delivered here when they are sent (a copy) and go
  down with DONT_LOOPBACK, so local delivery never depends on the transport
  looping them back; a copy of ours that comes up anyway is a duplicate.
  Retransmitted multicasts carry the flag too. Receivers see it and ignore it.
- Only the original sender keeps delivered messages (XMIT_REQ goes only to
  it), in a second `SeqnoTable` purged by STABLE; receivers drop a message
  once delivered.

An addition beyond JGroups: VIEW_SEQNO. Seed 003's join scenario assumes
that every multicast of B after the joiner's digest reaches the joiner C.
Over TCP a multicast is one send to each member of the sender's current
view, and the coordinator takes C's digest before B has installed the view
with C: what B sends in between (seqnos above the digest) goes to A only.
JGroups' C would ask B for it; with ``xmit_interval <= 0`` nothing does, so
C's window for B would wait for ever and only grow. So a member without
retransmission that installs a view with new members unicasts each of them
its highest seqno, and they skip what it sent before (details in
`_membership`); with retransmission C asks for it, as in JGroups. The handling
is a branch beside XMIT_REQ and HIGHEST_SEQNO: the send and receive paths
of MSG do no extra work.

Leaving (issue 37): GMS's `FlushRequest` is answered with `FlushDone` once
STABLE's digest shows that every member delivered our highest seqno (our
sent messages are purged up to it), at once if we sent nothing or are alone.
Meanwhile HIGHEST_SEQNO goes out at once and at every retransmit run,
whatever ``resend_last_seqno`` says: a lost last message is invisible to
its receivers otherwise, and the flush would wait for ``leave_timeout``. A
`Disconnect` that comes first (the flush timed out) logs at WARNING the
seqnos still unstable.
"""

from __future__ import annotations

import logging
import math
from types import ModuleType
from typing import Any

from triogroups import _compiled
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
    StableDigest,
    TmpView,
)
from triogroups.message import Flag, Message
from triogroups.properties import Bool, Duration, Int, PropertyError, at_least
from triogroups.protocol import Passes, Protocol
from triogroups.protocols import ids
from triogroups.protocols._stats import reliable_stats
from triogroups.protocols._view_digest import ViewDigest
from triogroups.protocols.nakack2._header import (
    HIGHEST_SEQNO,
    MSG,
    TYPE_NAMES,
    VIEW_SEQNO,
    XMIT_REQ,
    XMIT_RSP,
    NakAckHeader2,
    position,
)
from triogroups.protocols.nakack2._membership import Membership
from triogroups.protocols.nakack2._retransmit import Retransmitter
from triogroups.protocols.nakack2._state import COUNTERS as _COUNTERS
from triogroups.protocols.nakack2._state import Input, NakState, Phase, Window
from triogroups.view import Digest, View
from triogroups.wire import MAX_DATAGRAM

__all__ = [
    "HIGHEST_SEQNO",
    "MSG",
    "TYPE_NAMES",
    "VIEW_SEQNO",
    "XMIT_REQ",
    "XMIT_RSP",
    "NakAckHeader2",
    "Nakack2",
]

_log = logging.getLogger(__name__)
_ID = ids.NAKACK2
_OOB = int(Flag.OOB)
_NO_RELIABILITY = int(Flag.NO_RELIABILITY)
_CONTROL = int(Flag.OOB | Flag.INTERNAL)
#: NAKACK2's send loop (`_down_loops.number_multicasts`) in the form this process runs: compiled
#: where the build made it, unless ``TRIOGROUPS_PURE_PYTHON`` is set.
DOWN_LOOPS: ModuleType = _compiled.load("protocols._down_loops")
_JOINING = Phase.JOINING
_SERVER = Phase.SERVER
_LEFT = Phase.LEFT


class Nakack2(Protocol):
    """Reliable per-sender FIFO multicast (see the module docstring)."""

    name = "NAKACK2"
    COUNTERS = _COUNTERS
    passes_up: Passes | None = "all"  # its data and control messages carry its header
    passes_down: Passes | None = "unicasts"  # it numbers multicasts only
    id = _ID

    xmit_interval = Duration(
        0.5, doc="how often missing messages are asked for; <= 0 turns retransmission off (TCP)"
    )
    use_mcast_xmit = Bool(True, doc="answer XMIT_REQ by multicasting the message again")
    max_xmit_req_size = Int(
        1024,
        doc="most seqnos asked for in one XMIT_REQ (fewer if they would not fit one bundle)",
        check=at_least(1),
    )
    become_server_queue_size = Int(
        50,
        doc="multicasts a joiner queues before it is a server (unbounded if xmit_interval <= 0)",
        check=at_least(1),
    )
    non_member_queue_size = Int(
        1024,
        doc="multicasts from senders not in our view kept until a view or merge view "
        "gives them a window (the newest are kept; 0: drop them at once)",
        check=at_least(0),
    )
    max_xmits_per_interval = Int(
        5000,
        doc="messages resent for one member's XMIT_REQs per xmit_interval (per second "
        "if xmit_interval <= 0); the rest of its requests is ignored and counted",
        check=at_least(1),
    )
    max_receive_window = Int(
        100_000,
        doc="seqnos kept per member ahead of its next one to deliver; a message "
        "beyond is dropped and counted (a sender that never fills its gaps)",
        check=at_least(1),
    )
    resend_last_seqno = Bool(
        True,
        doc="multicast the highest seqno sent while nothing new is sent and it is not stable",
    )
    resend_last_seqno_max_times = Int(
        0,
        doc="times the same highest seqno is resent (0: until STABLE shows everyone has it)",
        check=at_least(0),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        # What more than one side changes lives in `_state`; `_xmit` and `_membership` share it.
        self._state = NakState(self.counters)
        self._next_xmit = math.inf
        self._unsafe_without_xmit = ""
        self._xmit_interval_set = self.xmit_interval
        #: The largest bundle the transport sends (an XMIT_REQ must fit one).
        self.bundle_size = MAX_DATAGRAM  # until check_stack learns the transport's
        self._xmit = Retransmitter(self, self._state)
        self._membership = Membership(self, self._state)
        self._view_digest = ViewDigest()
        self._replaying = False  # `up` receives a queue `_replay` hands it
        self._flushing = False  # GMS's FlushRequest is not answered yet

    # --- configuration ------------------------------------------------------------

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self._schedule_xmit(now)

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        """Refuse ``xmit_interval <= 0`` where a message can be lost below NAKACK2.

        Also learns the transport's bundle limit (``max_bundle_size``, and
        TCP's ``max_frame_size`` if smaller), which caps an XMIT_REQ.
        """
        transport = below[0] if below else None
        limits = [getattr(transport, k, None) for k in ("max_bundle_size", "max_frame_size")]
        sizes = [size for size in limits if isinstance(size, int) and size > 0]
        if sizes:
            self.bundle_size = min(sizes)
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
            self._membership.apply_queue_bound()
        if key == "non_member_queue_size":
            self._membership.apply_early_bound()

    def _schedule_xmit(self, now: float) -> None:
        """The next retransmit run; none without retransmission or once we left."""
        if self.xmit_interval > 0 and self._state.phase is not _LEFT:
            self._next_xmit = now + self.xmit_interval
        else:
            self._next_xmit = math.inf

    # --- sending ---------------------------------------------------------------------

    def down(self, batch: list[Message], now: float) -> None:
        """Number each multicast, keep it for retransmission, deliver our own at once.

        The multicast goes down with DONT_LOOPBACK: it was delivered here
        already, so the transport must not loop it back a second time. The
        kept message is the one sent (as UNICAST3 keeps its own): the layers
        below never change a message beyond stamping its source, and a
        retransmission sends a copy. The loop over the batch is
        `triogroups.protocols._down_loops.number_multicasts` (compiled where built).
        """
        state = self._state
        kept, local = DOWN_LOOPS.number_multicasts(batch, state.seqno, self._me(), _ID)
        if kept:
            state.seqno += len(kept)
            state.sent.append_run(kept)
            state.counters["msgs_sent"] += len(kept)
            state.sent_since_xmit = True
        self.send_down(batch)
        if local:
            state.counters["msgs_delivered"] += len(local)
            self.send_up(local)

    def _me(self) -> Address:
        assert self.local_address is not None, "NAKACK2 used before start()"
        return self.local_address

    def _send_control(self, dest: Address | None, hdr: NakAckHeader2, flags: int = 0) -> None:
        """Send a NAKACK2 control message (XMIT_REQ, HIGHEST_SEQNO, VIEW_SEQNO)."""
        self.send_down_one(self._control(dest, hdr, flags))

    def _control(self, dest: Address | None, hdr: NakAckHeader2, flags: int = 0) -> Message:
        """A control message: not numbered, OOB and INTERNAL, plus ``flags``."""
        return Message(dest, flags=_CONTROL | flags, headers={_ID: hdr})

    # --- receiving ---------------------------------------------------------------------

    def up(self, batch: list[Message], now: float) -> None:
        out: list[Message] = []
        state = self._state
        windows = state.windows
        # A joiner queues multicasts; a server (or a member that left, which has no
        # windows and drops them as from non-members) receives them.
        receiving = state.phase is not _JOINING
        received = passed = 0
        # A batch holds runs from one sender: one window lookup per run, not per message.
        run_src: Address | None = None
        win: Window | None = None
        hdr: Any  # a NakAckHeader2, or a MSG's bare seqno
        for msg in batch:
            hdr = msg.headers.get(_ID)
            flags = msg.flags
            if hdr is None or flags & _NO_RELIABILITY:
                out.append(msg)
                passed += 1
                continue
            if type(hdr) is int:  # a MSG: its bare seqno (see `NakAckHeader2`)
                kind, seqno = MSG, hdr
            else:
                kind, seqno = hdr.type, hdr.seqno
            if kind == MSG and receiving:
                # The common case first: the next message of a member's window, nothing waiting.
                src = msg.src
                if src is not run_src:
                    run_src = src
                    win = windows.get(src)  # type: ignore[arg-type]
                if win is not None and not flags & _OOB and win.deliver_next(seqno):
                    received += 1
                    out.append(msg)
                else:
                    self._receive(msg, seqno, out)
            elif kind in (MSG, XMIT_RSP):
                if not receiving:
                    self._membership.enqueue(msg)
                    continue
                state.counters["xmit_rsps_received"] += 1
                if hdr.sender is None:
                    state.counters["malformed"] += 1
                    continue
                msg.src, msg.dest = hdr.sender, None
                self._receive(msg, seqno, out)
            elif kind == XMIT_REQ:
                self._xmit.on_xmit_req(msg, hdr, now)
            elif kind == HIGHEST_SEQNO:
                self._xmit.on_highest_seqno(msg.src, hdr.seqno)
            elif kind == VIEW_SEQNO:
                self._membership.on_view_seqno(msg.src, hdr.seqno)
            else:
                state.counters["malformed"] += 1
        if received:
            state.counters["msgs_received"] += received
        if out:
            state.counters["msgs_delivered"] += len(out) - passed
            # The digest at a VIEW in the batch, for a rejoiner (`ViewDigest`, as MCAST's).
            self._view_digest.at_controls(out, self.digest, position, replayed=self._replaying)
            self.send_up(out)

    def _receive(self, msg: Message, seqno: int, out: list[Message]) -> None:
        """Add to the sender's window; deliver an OOB message now, then the ready run."""
        counters = self._state.counters
        if msg.src == self.local_address:
            counters["duplicates"] += 1  # ours, delivered when it was sent
            return
        win = self._state.windows.get(msg.src) if msg.src is not None else None
        if win is None:
            if msg.src is not None and self._state.phase is _SERVER:
                self._membership.keep_early(msg)  # its view may be on its way
            else:
                counters["non_member_dropped"] += 1
            return
        if seqno < 1:
            counters["malformed"] += 1
            return
        if seqno - win.hd > self.max_receive_window:
            counters["dropped_beyond_window"] += 1
            return
        oob = msg.flags & _OOB
        if not win.add(seqno, None if oob else msg):
            counters["duplicates"] += 1
            return
        counters["msgs_received"] += 1
        if oob:
            out.append(msg)
        if win.has_ready():
            out.extend(m for m in win.remove_ready() if m is not None)

    # --- the retransmit task -------------------------------------------------------------

    def next_deadline(self) -> float:
        return self._next_xmit

    def tick(self, now: float) -> None:
        if now < self._next_xmit:
            return
        self._schedule_xmit(now)
        if self._state.phase is not _SERVER:
            return
        self._xmit.ask_for_gaps()
        if self.resend_last_seqno or self._flushing:
            self._xmit.resend_last_seqno(force=self._flushing)

    # --- views, digests, stability ----------------------------------------------------------

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, GetDigest):
            self.pass_up(DigestReply(event.requester, self._view_digest.answer(event, self.digest)))
        elif isinstance(event, SetDigest):
            self._membership.set_digest(event.digest)
        elif isinstance(event, MergeDigest):
            for member, first, last in self._membership.set_digest(event.digest, merge=True):
                self._xmit.request_range(member, first, last)
        elif isinstance(event, StableDigest):
            self._xmit.on_stable_digest(event.digest)
            self._check_flushed()
        elif isinstance(event, FlushRequest):
            self.pass_down(event)
            self._flushing = True
            if self.xmit_interval > 0 and self._state.phase is _SERVER:
                self._xmit.resend_last_seqno(force=True)
            self._check_flushed()
        elif isinstance(event, BecomeServer):
            self._replay(self._membership.become_server(Input.BECOME_SERVER), now)
            self.pass_down(event)
        elif isinstance(event, Disconnect):
            self._unflushed()
            self._membership.left_group()
            self._view_digest.forget()
            self._xmit.forget(None)
            self._schedule_xmit(now)
            self.pass_down(event)
        elif isinstance(event, TmpView):
            self._membership.tmp_view = event.view
            self.pass_down(event)
        else:
            super().down_event(event, now)

    def view_changed(self, view: View, now: float) -> None:
        old = self.view
        super().view_changed(view, now)
        queued = self._membership.view_changed(old, view)
        # before what was queued is received: it came from members that installed this
        # view before us, and may have been multicast in it
        self._view_digest.record(view.view_id, self.digest())
        self._replay(queued, now)
        self._xmit.forget(view)
        self._check_flushed()

    # --- leaving: the flush -----------------------------------------------------------------

    def _check_flushed(self) -> None:
        """Answer GMS's `FlushRequest` once every member delivered our highest seqno."""
        if not self._flushing:
            return
        state, view = self._state, self.view
        alone = view is None or list(view.members) == [self.local_address]
        if alone or state.sent.hd >= state.seqno:
            self._flushing = False
            self.pass_up(FlushDone(self.name))

    def _unflushed(self) -> None:
        """We leave before the flush ended: say what some member may never get."""
        if self._flushing:
            self._flushing = False
            state = self._state
            _log.warning(
                "%s: left with multicasts %d..%d not known to be delivered by every member",
                self.local_address,
                state.sent.hd + 1,
                state.seqno,
            )

    def _replay(self, queued: list[Message], now: float) -> None:
        """Receive what the become_server_queue held, in arrival order."""
        if queued:
            self._replaying = True
            try:
                self.up(queued, now)
            finally:
                self._replaying = False

    def digest(self) -> Digest:
        """Per member: (highest delivered, highest received); ours: the highest sent, twice."""
        state = self._state
        entries = {m: (w.hd, w.hr) for m, w in state.windows.items()}
        entries[self._me()] = (state.seqno, state.seqno)
        return Digest(entries)

    # --- observation --------------------------------------------------------------------------

    def retained(self) -> int:
        """Messages held: sent and not yet stable, received and not yet delivered, queued."""
        state = self._state
        undelivered = sum(len(w) for w in state.windows.values())
        return len(state.sent) + undelivered + len(self._membership.queue)

    def gauges(self) -> dict[str, Any]:
        """Windows and queues; the keys every reliable protocol shares (``sent``,
        ``received``, ``delivered``, ``xmit_reqs_sent``, ``xmit_reqs_received``,
        ``retransmitted``, ``peer_windows``) repeat NAKACK2's counters under those names."""
        state = self._state
        windows = {
            str(m): {"hd": w.hd, "hr": w.hr, "size": len(w), "missing": w.hr - w.hd - len(w)}
            for m, w in state.windows.items()
        }
        queue, last_stable = self._membership.queue, self._xmit.last_stable
        counters = state.counters
        return {
            **reliable_stats(
                sent=counters["msgs_sent"],
                received=counters["msgs_received"],
                delivered=counters["msgs_delivered"],
                xmit_reqs_sent=counters["xmit_reqs_sent"],
                xmit_reqs_received=counters["xmit_reqs_received"],
                retransmitted=counters["xmit_rsps_sent"],
                peer_windows={str(m): (w.hd, w.hd, w.hr) for m, w in state.windows.items()},
            ),
            "seqno": state.seqno,
            "phase": state.phase.value,
            "is_server": state.phase is _SERVER,
            "xmit_task_running": self._next_xmit != math.inf,
            "sent_retained": len(state.sent),
            "sent_low": state.sent.hd,
            "sent_high": state.sent.hr,
            "windows": windows,
            "become_server_queue": len(queue),
            "become_server_queue_bound": queue.maxlen,
            "retained": self.retained(),
            "last_stable_digest": None if last_stable is None else repr(last_stable),
        }
