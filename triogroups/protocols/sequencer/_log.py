"""SEQUENCER's log: what a member delivered in the total order and is not yet known stable.

A new coordinator needs it (the tail hand-over); STABLE's digest trims it. It never sends
anything: it makes the TAIL messages the protocol sends.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Set
from typing import Any, NamedTuple

from triogroups.address import Address
from triogroups.message import Flag, Message
from triogroups.protocols import ids
from triogroups.protocols.sequencer._header import TAIL, TAIL_END, SequencerHeader
from triogroups.protocols.sequencer._recovery import ENDS_IN_ORDER, OTHER_ORDER, Tail
from triogroups.view import Digest

__all__ = ["Log", "Logged"]


class Logged(NamedTuple):
    """A delivered message kept until every member delivered it (the receive path builds
    it with ``tuple.__new__``: one per delivery)."""

    sender: Address
    seqno: int
    payload: bytes
    flags: int
    headers: dict[int, Any]  # as delivered: the lower layers' are dropped when it is resent
    coord: Address  # who multicast it
    stamp: int  # its NAKACK2 seqno there


class Log:
    """The entries in delivery order, and the last one trimmed."""

    def __init__(self) -> None:
        self.entries: deque[Logged] = deque()
        #: (sender, seqno) of the last entry trimmed; (None, 0) before any
        self.trimmed: tuple[Address | None, int] = (None, 0)

    def __len__(self) -> int:
        return len(self.entries)

    def trim(self, digest: Digest) -> None:
        """Drop the entries up to the last one every member delivered (by the digest of
        the coordinator that multicast it). The members deliver one order, so everything
        before it was delivered everywhere too; scanning from the newest stops early. The
        digest is asked once per run of one coordinator's entries, not once per entry."""
        entries = self.entries
        keep = len(entries)  # entries after the last one delivered everywhere
        coord: Address | None = None
        hd: int | None = None
        for back, entry in enumerate(reversed(entries)):
            if entry.coord is not coord:
                coord = entry.coord
                hd = digest.highest_delivered(coord)
            if hd is not None and entry.stamp <= hd:
                keep = back
                break
        if keep == len(entries):
            return
        for _ in range(len(entries) - keep):
            entry = entries.popleft()
        self.trimmed = (entry.sender, entry.seqno)

    def holds(self, sender: Address, coord: Address | None) -> bool:
        """Whether an entry of ``sender``'s that ``coord`` multicast is not known stable
        (what other coordinators multicast, a recovery handed over)."""
        return any(e.sender == sender and e.coord == coord for e in self.entries)

    def as_tail(self) -> Tail:
        """The entries as a tail: (sender, seqno, message, stamp), as a member's TAILs
        arrive."""
        return [
            (
                e.sender,
                e.seqno,
                Message(None, e.payload, flags=e.flags, headers=e.headers),
                (_view_of(e), e.stamp),
            )
            for e in self.entries
        ]

    def tail(self, coord: Address, lower_ids: Set[int], changed: bool) -> list[Message]:
        """The log as TAILs to ``coord``, then the TAIL_END that counts them, names the
        last entry trimmed and says whether our coordinator ``changed`` (the log is of
        another order than ``coord``'s: `OTHER_ORDER`, or `ENDS_IN_ORDER` if its last entry
        is ``coord``'s all the same); the lower layers' headers (``lower_ids``) left out.
        Each TAIL carries its entry's stamp (``view``, and NAKACK2's seqno as ``trimmed``):
        the recovery merges tails that start at different places by it."""
        out = []
        for entry in self.entries:
            headers = {k: v for k, v in entry.headers.items() if k not in lower_ids}
            hdr = SequencerHeader(TAIL, entry.seqno, entry.sender, entry.stamp, _view_of(entry))
            headers[ids.SEQUENCER] = hdr
            flags = entry.flags & ~int(Flag.DONT_LOOPBACK)
            out.append(Message(coord, entry.payload, flags=flags, headers=headers))
        sender, seqno = self.trimmed
        order = OTHER_ORDER if changed else 0
        if changed and self.entries and self.entries[-1].coord == coord:
            order = ENDS_IN_ORDER
        end = SequencerHeader(TAIL_END, len(self.entries), sender, seqno, order)
        out.append(Message(coord, headers={ids.SEQUENCER: end}))
        return out

    def clear(self) -> None:
        self.entries.clear()


def _view_of(entry: Logged) -> int:
    """The view counter the coordinator stamped ``entry``'s BCAST with (0: unknown)."""
    hdr = entry.headers.get(ids.SEQUENCER)
    return hdr.view if isinstance(hdr, SequencerHeader) else 0
