"""The majority rule of the lock service's majority mode: does a view hold a majority?

Pure bookkeeping on the views a member installs, no I/O. An addition beyond
JGroups: CENTRAL_LOCK grants in every partition, so both halves of a split can hold
the same lock.
"""

from __future__ import annotations

from collections.abc import Iterable

from triogroups.address import Address

__all__ = ["Quorum"]


class Quorum:
    """The last full view, and whether each newly installed view holds a majority of it.

    The last full view is the last view this member installed that held a majority of
    the one before it (the first view a member installs counts as full). A view with
    more than half of the last full view's members is a majority and becomes the new
    last full view, so a group can shrink one failure at a time (5, then 3, then 2
    members) and keep granting; a view with half or less does not, and stays refused
    until a view with a majority comes (a heal and merge). Of two sides of a split at
    most one holds a majority of the same full view, so at most one side grants.
    """

    def __init__(self) -> None:
        self.full: frozenset[Address] | None = None
        self.has_majority = False

    def install(self, members: Iterable[Address]) -> bool:
        """Take a newly installed view; returns whether it holds a majority."""
        view = frozenset(members)
        full = self.full
        self.has_majority = full is None or 2 * len(view & full) > len(full)
        if self.has_majority:
            self.full = view
        return self.has_majority
