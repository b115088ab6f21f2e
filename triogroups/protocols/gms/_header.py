"""GMS's header and message types, and the rule a VIEW must meet to be installed (`follows`)."""

from __future__ import annotations

from typing import NamedTuple

from triogroups.address import Address
from triogroups.protocols import ids
from triogroups.view import Digest, View, ViewId
from triogroups.wire import register_header

JOIN_REQ = 1
JOIN_RSP = 2
LEAVE_REQ = 3
LEAVE_RSP = 4
VIEW = 5
VIEW_ACK = 6
MERGE_REQ = 7
MERGE_RSP = 8
INSTALL_MERGE_VIEW = 9
CANCEL_MERGE = 10

TYPE_NAMES = {
    JOIN_REQ: "JOIN_REQ",
    JOIN_RSP: "JOIN_RSP",
    LEAVE_REQ: "LEAVE_REQ",
    LEAVE_RSP: "LEAVE_RSP",
    VIEW: "VIEW",
    VIEW_ACK: "VIEW_ACK",
    MERGE_REQ: "MERGE_REQ",
    MERGE_RSP: "MERGE_RSP",
    INSTALL_MERGE_VIEW: "INSTALL_MERGE_VIEW",
    CANCEL_MERGE: "CANCEL_MERGE",
}


class GmsHeader(NamedTuple):
    """One header for every GMS message; unused fields stay empty.

    ``ref_view_id`` (VIEW only) names the view the coordinator made the new one from,
    JGroups' `DeltaView.ref_view_id` (see `follows`).
    """

    type: int
    view: View | None = None
    digest: Digest | None = None
    member: Address | None = None
    merge_id: int = 0
    ref_view_id: ViewId | None = None


def follows(hdr: GmsHeader, current: ViewId) -> bool:
    """Whether the VIEW in ``hdr`` is one a member holding the view ``current`` installs:
    newer, and made from ``current`` (its ``ref_view_id``) or from a newer view of
    ``current``'s coordinator.

    JGroups installs a VIEW with any higher id; its delta views (JGRP-1354, the default
    since 3.4) are dropped unless they refer to the view the member holds. Made from
    another view, a VIEW may come from another lineage than the one whose digest set this
    member's receive windows: campaign udp seed 72368: H joined through A's [A|6], split
    off from the views of D, which had admitted H earlier in [D|7] (its JOIN_RSP was
    lost). H fetched D's VIEW [D|7] by retransmission and installed it at once, so B1-20,
    sent in [D|7] but counted delivered in A's join digest, was never delivered at H,
    while H's STABLE reports told B, leaving, that it was. Such a member stays in its view
    until MERGE3 merges it, with a digest, as for a merge view that does not merge the
    view it holds (`_merger`). GMS and SEQUENCER (`changes_coordinator`) both ask this.

    A VIEW made from a newer view of the coordinator of the view held is installed too:
    that coordinator made its views one from another, from ours on, unless it installed
    another coordinator's (merge) view in between, so the member only missed views of its
    own lineage, as any member may under loss, and its windows came from that lineage (a
    missed merge view in between is not told apart: as before this rule). Campaign
    udp-total-blocks seed 72770: loss kept F's [F|4] (made from [F|3]) from A and C, F
    was killed 0.8 s later, so nobody retransmitted it, and B, F's heir, made [B|5] from
    [F|4]: A and C, holding [F|3], dropped [B|5], [B|6] and [B|7] and stayed behind until
    MERGE3's merge view 11 s after [F|4].
    """
    view, ref = hdr.view, hdr.ref_view_id
    if view is None or ref is None or view.view_id.id <= current.id:
        return False
    return ref == current or (ref.coord == current.coord and ref.id > current.id)


register_header(ids.GMS, GmsHeader)
