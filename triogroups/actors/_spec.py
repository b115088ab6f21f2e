"""What a supervisor is told: restart strategies and restart policies.

Plain values only; the behaviour lives in `_supervisor` (and `ChildSpec` beside it, since a
child's factory may return a nested `Supervisor`). The enum values are the strings a
configuration file uses (``Strategy("one_for_all")``).
"""

from __future__ import annotations

import enum

__all__ = ["Restart", "Strategy"]


class Strategy(enum.Enum):
    """Which children a supervisor restarts when one of them ends."""

    ONE_FOR_ONE = "one_for_one"
    """Only the child that ended."""
    ONE_FOR_ALL = "one_for_all"
    """All children: the others are stopped in reverse start order, then all start in order."""
    REST_FOR_ONE = "rest_for_one"
    """The child that ended and the children started after it."""


class Restart(enum.Enum):
    """When a child is restarted (Erlang semantics)."""

    PERMANENT = "permanent"
    """Always, also after a normal return."""
    TRANSIENT = "transient"
    """Only after a crash."""
    TEMPORARY = "temporary"
    """Never; its slot is stopped for good once it ends."""
