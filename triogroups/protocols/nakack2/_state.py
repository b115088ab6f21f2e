"""NAKACK2's shared state: what the send, receive, retransmit and membership sides all read.

One object, created by `Nakack2` and handed to `Retransmitter` and
`Membership`, holds everything more than one of them changes: our seqno and
the messages we keep for retransmission, the receive window per member, the
counters (the protocol's own `Protocol.counters`, so every side counts into the
one mapping that `stats` reports and `reset_stats` zeroes), and the member's
lifecycle (`Phase`). Nothing else of NAKACK2
writes another object's fields; a question like "when is a member a
server?" is answered by the `Phase` transitions below.

Plain data and one transition function: it never awaits, reads no clock
and sends nothing.
"""

from __future__ import annotations

import enum

from triogroups.address import Address
from triogroups.message import Message
from triogroups.protocols._table import SeqnoTable

__all__ = ["COUNTERS", "LIFECYCLE", "Input", "NakState", "Phase", "Window"]

#: The counters of NAKACK2 (`Protocol.COUNTERS`), each reported from the start.
COUNTERS = (
    "msgs_sent",
    "msgs_received",
    "msgs_delivered",
    "duplicates",
    "non_member_dropped",
    "non_member_kept",
    "non_member_replayed",
    "malformed",
    "dropped_beyond_window",
    "xmit_reqs_sent",
    "xmit_reqs_capped",
    "xmits_capped",
    "xmit_seqnos_requested",
    "xmit_reqs_received",
    "xmit_reqs_not_mine",
    "xmit_not_found",
    "xmit_rsps_sent",
    "xmit_rsps_received",
    "highest_seqno_sent",
    "highest_seqno_received",
    "view_seqnos_sent",
    "view_seqnos_received",
    "view_seqnos_ignored",
    "windows_moved_by_view_seqno",
    "skipped_by_window_move",
    "merge_windows_kept",
    "xmit_reqs_for_purged",
    "windows_reopened",
    "become_server_queue_dropped",
    "become_server_queue_replayed",
    "digests_set",
    "stable_digests",
    "purged",
)

#: A receive window holds a message, or None for an OOB message that was
#: delivered when it arrived.
Window = SeqnoTable[Message | None]


class Phase(enum.Enum):
    """A member's lifecycle in NAKACK2.

    JOINING: multicasts wait in the become_server_queue, nothing is asked for.
    SERVER: multicasts are delivered, gaps are asked for.
    LEFT: GMS left the group; no windows, no retransmit task, every sender is
    a non-member. What we sent stays, so a late XMIT_REQ is still answered.
    """

    JOINING = "joining"
    SERVER = "server"
    LEFT = "left"


class Input(enum.Enum):
    """What moves a member between phases."""

    #: GMS's BecomeServer (a joiner got its digest and view).
    BECOME_SERVER = "become_server"
    #: The group's first view (view id 1) installed without a digest: nobody
    #: can have sent anything earlier, so every window starts at 0.
    FIRST_VIEW = "first_view"
    #: GMS's Disconnect: we left the group.
    DISCONNECT = "disconnect"


#: (phase, input) -> next phase, for every pair. LEFT is final.
LIFECYCLE: dict[tuple[Phase, Input], Phase] = {
    (Phase.JOINING, Input.BECOME_SERVER): Phase.SERVER,
    (Phase.JOINING, Input.FIRST_VIEW): Phase.SERVER,
    (Phase.JOINING, Input.DISCONNECT): Phase.LEFT,
    (Phase.SERVER, Input.BECOME_SERVER): Phase.SERVER,
    (Phase.SERVER, Input.FIRST_VIEW): Phase.SERVER,
    (Phase.SERVER, Input.DISCONNECT): Phase.LEFT,
    (Phase.LEFT, Input.BECOME_SERVER): Phase.LEFT,
    (Phase.LEFT, Input.FIRST_VIEW): Phase.LEFT,
    (Phase.LEFT, Input.DISCONNECT): Phase.LEFT,
}


class NakState:
    """The state NAKACK2's sides share (see the module docstring)."""

    __slots__ = ("counters", "phase", "sent", "sent_since_xmit", "seqno", "windows")

    def __init__(self, counters: dict[str, int]) -> None:
        #: The highest seqno we sent.
        self.seqno = 0
        #: What we sent and STABLE has not yet purged (only the original sender keeps it).
        self.sent: SeqnoTable[Message] = SeqnoTable()
        #: One receive window per member of the view but us.
        self.windows: dict[Address, Window] = {}
        self.phase = Phase.JOINING
        #: Whether we multicast since the retransmit task last ran (HIGHEST_SEQNO waits).
        self.sent_since_xmit = False
        #: The protocol's counters (`Protocol.counters`): the sides count here.
        self.counters = counters

    def move(self, event: Input) -> Phase:
        """Apply ``event`` to the lifecycle; returns the phase it left."""
        old = self.phase
        self.phase = LIFECYCLE[old, event]
        return old
