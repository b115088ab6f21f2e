"""SEQUENCER's header and message types (JGroups' SequencerHeader, plus the tail hand-over).

FORWARD, FLUSH and BCAST keep JGroups' names and meanings; TAIL and TAIL_END
are additions: the new coordinator's recovery after the old one crashed or
left (see the package docstring).
"""

from __future__ import annotations

from typing import NamedTuple

from triogroups.address import Address
from triogroups.protocols import ids
from triogroups.wire import register_header

__all__ = [
    "BCAST",
    "FLUSH",
    "FORWARD",
    "TAIL",
    "TAIL_END",
    "TYPE_NAMES",
    "SequencerHeader",
    "as_header",
]

FORWARD = 1
FLUSH = 2
BCAST = 3
TAIL = 4
TAIL_END = 5

TYPE_NAMES = {
    FORWARD: "FORWARD",
    FLUSH: "FLUSH",
    BCAST: "BCAST",
    TAIL: "TAIL",
    TAIL_END: "TAIL_END",
}


class SequencerHeader(NamedTuple):
    """One header for every SEQUENCER message.

    FORWARD (a member's multicast, unicast to the coordinator) and FLUSH (the
    same, forwarded again to a new coordinator): ``seqno`` is the forwarder's
    own. BCAST (the coordinator's multicast in the global order) and TAIL (a
    delivered message handed to a new coordinator): ``sender`` and ``seqno``
    name the forwarder and its seqno; a TAIL's ``view`` and ``trimmed`` are its
    entry's stamp (the BCAST's ``view`` and its NAKACK2 seqno). TAIL_END closes a member's tail:
    ``seqno`` counts its TAILs, ``sender``/``trimmed`` name the last message it
    dropped from its log as delivered everywhere (None, 0: none yet), and ``view``
    is 1 if its coordinator changed at the view (its log is another order's), 2 if it
    changed but the log's last entry is the new coordinator's, 0 if it stays. A
    BCAST's ``view`` is the counter of the coordinator's view when it multicast it: a
    member whose coordinator changed at a later view drops it, as another order's.

    A FORWARD travels as its bare seqno, an int (``bare_int``, as NAKACK2's MSG does): the
    message a coordinator receives most, it has no tuple to build, encode, decode or check
    (0.4 us to encode and 0.9 to decode per message: benchmarks/HISTORY.md, issue 42).
    """

    type: int
    seqno: int = 0
    sender: Address | None = None
    trimmed: int = 0
    view: int = 0


register_header(ids.SEQUENCER, SequencerHeader, bare_int=True)


def as_header(raw: SequencerHeader | int) -> SequencerHeader:
    """A SEQUENCER header as found in ``Message.headers``, as the NamedTuple: a bare seqno
    is a FORWARD's."""
    if type(raw) is int:
        return SequencerHeader(FORWARD, raw)
    return raw  # type: ignore[return-value]
