"""GMS's header and message types."""

from __future__ import annotations

from typing import NamedTuple

from triogroups.address import Address
from triogroups.protocols import ids
from triogroups.view import Digest, View
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
    """One header for every GMS message; unused fields stay empty."""

    type: int
    view: View | None = None
    digest: Digest | None = None
    member: Address | None = None
    merge_id: int = 0


register_header(ids.GMS, GmsHeader)
