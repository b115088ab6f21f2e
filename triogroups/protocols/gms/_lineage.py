"""The views this member installed, and whom each removed: what a merge leader knows of the past.

A merge leader builds the merge view from the views the subgroups' representatives
report, and a representative may hold a view that the leader's own subgroup moved on
from (it was cut off, paused, or excluded, and never installed the views after it).
Such a stale view still lists members that a later view of ours removed; one that left
gracefully is gone for good, and put back into the merge view it would be a member
that never acks, never answers and is only suspected and excluded seconds later,
while MCAST's senders wait for its acks (campaign udp-mcast 10609: a member that had
left came back through the stale view of a paused one, whose full send window then
waited for its acks until the paused member was killed).

JGroups never merges such a member back: each subgroup coordinator fetches the
digests of the members of its view and answers only with those that replied
(JGRP-948), and the leader keeps only members named in a digest. Here a
representative answers for its view without the members it suspects (see
`_merger`), and a member that left may not be suspected yet, so the leader also uses
what it saw itself:
a member that a view of ours newer than the reported one removed is left out, unless
it is the representative that answered for that view, or MERGE3 heard it holding that
view since its last check (`Merge.holders`): it is alive and holds that view, as a
member that answers a JGroups subgroup coordinator's digest request is, and bringing
it back is the point of the merge. Taking back only the representative merged such
members one per MERGE3 round (campaign udp-mcast 20310: six members of a stale view,
the last one back 13 s after the heal). A member of that stale view not heard since
the last check is merged by the next MERGE3 round, as one that did not answer is in
JGroups.

Owns no protocol state but this record; never sends anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from triogroups.address import Address
from triogroups.view import View, ViewId

__all__ = ["Lineage"]


class Lineage:
    """The last ``depth`` views installed here, and the last view that removed each member."""

    def __init__(self, depth: int = 64) -> None:
        self._depth = depth
        self._count = 0
        #: view id -> its installation number here (the newest ``depth``)
        self._installed: dict[ViewId, int] = {}
        #: member -> installation number of the view that last removed it
        self._removed: dict[Address, int] = {}
        self._members: frozenset[Address] = frozenset()

    def installed(self, view: View) -> None:
        """``view`` is now this member's view."""
        self._count += 1
        number = self._count
        for member in self._members - set(view.members):
            self._removed[member] = number
        for member in view.members:
            self._removed.pop(member, None)
        self._members = frozenset(view.members)
        self._installed[view.view_id] = number
        if len(self._installed) > self._depth:
            oldest = next(iter(self._installed))
            del self._installed[oldest]
            floor = min(self._installed.values())
            self._removed = {m: n for m, n in self._removed.items() if n > floor}

    def removed_since(self, view: View) -> set[Address]:
        """The members of ``view`` that a later view installed here removed (and no view
        since brought back); none if ``view`` is not one this member installed."""
        number = self._installed.get(view.view_id)
        if number is None:
            return set()
        return {m for m in view.members if self._removed.get(m, 0) > number}

    def forget(self) -> None:
        """This member left the group: its past views say nothing about the next one."""
        self._count = 0
        self._installed.clear()
        self._removed.clear()
        self._members = frozenset()


def still_members(view: View, lineage: Lineage, keep: Iterable[Address]) -> list[Address]:
    """``view``'s members without those ``lineage`` saw removed after it, except ``keep``."""
    gone = lineage.removed_since(view) - set(keep)
    return [m for m in view.members if m not in gone]
