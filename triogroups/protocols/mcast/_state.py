"""MCAST's shared state: what the send side, the receive side and the membership side read.

One object, created by `Mcast` and handed to `Sender` (`_sender`), `Receiver`
(`_receiver`) and `Membership` (`_membership`), holds everything more than one
of them reads or changes: the send window and the multicasts waiting for room
in it, the ack map, the receive window per member, the acks we owe, the
joiner's queue, the flags of the member's lifecycle (joining, flushing, left),
and the counters and durations (the protocol's own `Protocol.counters` and
`Protocol.durations`, so every side counts into the one mapping that ``stats``
reports and ``reset_stats`` zeroes). Each field says which side writes it; the
others only read it. `forget_group` is the one place that clears it all.

Plain data: it never awaits, reads no clock and sends nothing.
"""

from __future__ import annotations

from collections import deque

from triogroups.address import Address
from triogroups.message import Message
from triogroups.protocols._retired import RetiredWindows
from triogroups.protocols._ring import RingBuffer

__all__ = ["COUNTERS", "DELIVERED", "DURATIONS", "McastState", "doubled", "window_stats"]

#: The counters of MCAST (`Protocol.COUNTERS`), each reported from the start.
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
#: MCAST's durations (`Protocol.DURATIONS`): seconds a sender waited for room.
DURATIONS = ("time_blocked",)

#: Marks a slot whose OOB message was delivered on arrival.
DELIVERED = Message()


def window_stats(win: RingBuffer[Message]) -> dict[str, int]:
    """A window as the gauges show it."""
    return {"low": win.low, "high": win.high, "size": len(win)}


def doubled(win: RingBuffer[Message]) -> RingBuffer[Message]:
    """``win`` with twice the slots, holding the same messages at the same seqnos."""
    bigger: RingBuffer[Message] = RingBuffer(win.capacity * 2, win.low)
    for seqno in range(win.low + 1, win.high + 1):
        msg = win.get(seqno)
        if msg is not None:
            bigger.add(seqno, msg)
    bigger.high = win.high
    return bigger


class McastState:
    """The state MCAST's sides share (see the module docstring)."""

    __slots__ = (
        "ack_due",
        "acks",
        "blocked_since",
        "counters",
        "durations",
        "flushing",
        "has_left",
        "high_at_tick",
        "joining",
        "pending",
        "progress",
        "purge_due",
        "queue",
        "retired",
        "send",
        "unacked",
        "windows",
    )

    def __init__(
        self,
        capacity: int,
        queue_size: int,
        counters: dict[str, int],
        durations: dict[str, float],
    ) -> None:
        # --- the send side (`Sender`) writes these ---
        #: What we sent and not every member acked yet (`Sender` may replace it by a
        #: bigger one, `doubled`, for control multicasts past ``capacity``).
        self.send: RingBuffer[Message] = RingBuffer(capacity)
        #: The application's multicasts waiting for room in ``send``, in order.
        self.pending: deque[Message] = deque()
        #: Per other member of the view (and joiner on its way): the highest seqno it
        #: acked. `Membership` adds and removes members as views come.
        self.acks: dict[Address, int] = {}
        #: Members whose ack moved since the last tick (no last-seqno resend for them).
        self.progress: set[Address] = set()
        #: An ack moved: purge the send window once the batch is through.
        self.purge_due = False
        #: Our highest seqno at the last tick (an ack below it a whole interval is stuck).
        self.high_at_tick = 0
        #: When the application's sends started waiting for room (None: not blocked).
        self.blocked_since: float | None = None
        #: GMS's FlushRequest is not answered yet.
        self.flushing = False
        # --- the receive side (`Receiver`) writes these ---
        #: Per member that sent us something: its seqnos delivered since our last ACK.
        self.unacked: dict[Address, int] = {}
        #: Members to ack once the batch is through.
        self.ack_due: set[Address] = set()
        # --- the membership side (`Membership`) writes these ---
        #: One receive window per other member of the view (`Receiver` fills them).
        self.windows: dict[Address, RingBuffer[Message]] = {}
        #: Per member that left our view: its window's ``low`` and the OOB seqnos above it
        #: already delivered, so a window opened for it again delivers nothing twice.
        self.retired = RetiredWindows()
        #: True until our first view is the group's first, or a digest or BecomeServer
        #: came: a joiner keeps what it receives in ``queue`` (`Receiver` appends).
        self.joining = True
        self.queue: deque[Message] = deque(maxlen=queue_size)
        #: GMS left the group (`Disconnect`): final.
        self.has_left = False
        # --- every side counts here (the protocol's own dicts) ---
        self.counters = counters
        self.durations = durations

    def forget_group(self) -> None:
        """We left the group: no receive windows, no acks owed or awaited, nothing kept for
        a digest. What we sent stays (a late XMIT_REQ for it is still answered)."""
        self.has_left = True
        self.joining = False
        self.queue.clear()
        self.windows.clear()
        self.retired.clear()
        self.acks.clear()
        self.unacked.clear()
        self.ack_due.clear()
        self.progress.clear()
