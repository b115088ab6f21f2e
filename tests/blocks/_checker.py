"""A small history checker for the lock tests: who held which lock when, in which view."""

from __future__ import annotations

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


@dataclass
class LockHistory:
    """Holds as their owners saw them: from the grant's arrival until the release was
    asked for, so each recorded hold lies inside the coordinator's."""

    holds: list[Hold] = field(default_factory=list)

    def acquired(self, owner: str, name: str, token: int, view: ViewId) -> Hold:
        hold = Hold(owner, name, token, view, trio.current_time())
        self.holds.append(hold)
        return hold

    @staticmethod
    def released(hold: Hold) -> None:
        hold.end = trio.current_time()

    def violations(self) -> list[str]:
        """No two owners of one lock at once in one view; per lock, each grant's token
        is larger than every earlier grant's."""
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
                    if overlaps and g.view == h.view:
                        found.append(f"{name}: {g.owner} and {h.owner} at once in {h.view}")
        return found
