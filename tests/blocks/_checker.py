"""A small history checker for the lock tests: who held which lock when, in which view."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import trio

from triogroups import ViewId


@dataclass
class Hold:
    owner: str
    name: str
    token: int
    view: ViewId
    start: float
    end: float | None = None
    members: frozenset[str] = frozenset()  # names in the owner's view at the grant


@dataclass
class LockHistory:
    """Holds as their owners saw them: from the grant's arrival until the release was
    asked for, so each recorded hold lies inside the coordinator's."""

    holds: list[Hold] = field(default_factory=list)

    def acquired(
        self, owner: str, name: str, token: int, view: ViewId, members: Iterable[str] = ()
    ) -> Hold:
        hold = Hold(owner, name, token, view, trio.current_time(), None, frozenset(members))
        self.holds.append(hold)
        return hold

    @staticmethod
    def released(hold: Hold) -> None:
        hold.end = trio.current_time()

    def violations(self) -> list[str]:
        """No two owners of one lock at once in one view, nor while the earlier owner is
        still in the later owner's view (its lock was given away while it was a member:
        only leaving or being excluded frees it); per lock, each grant's token is larger
        than every earlier grant's."""
        found = []
        by_name: dict[str, list[Hold]] = {}
        for hold in sorted(self.holds, key=lambda h: h.start):
            by_name.setdefault(hold.name, []).append(hold)
        for name, holds in by_name.items():
            for i, h in enumerate(holds):
                for g in holds[:i]:
                    if g.token >= h.token:
                        found.append(f"{name}: token {h.token} of {h.owner} after {g.token}")
                    overlaps = g.end is None or g.end > h.start
                    if overlaps and (g.view == h.view or g.owner in h.members):
                        found.append(f"{name}: {g.owner} and {h.owner} at once in {h.view}")
        return found
