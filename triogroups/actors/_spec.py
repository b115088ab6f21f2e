"""What a supervisor is told: restart strategies, restart policies and child specs.

Plain values only; the behaviour lives in `_supervisor`. The enum values are the strings a
configuration file uses (``Strategy("one_for_all")``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._actor import Actor
    from ._supervisor import Supervisor

__all__ = ["ChildSpec", "Restart", "Strategy"]


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


@dataclass(frozen=True)
class ChildSpec:
    """A supervised child: its name and a factory called at every (re)start.

    A factory that returns a `Supervisor` makes a nested tree.
    """

    name: str
    factory: Callable[[], Actor | Supervisor]
    restart: Restart = Restart.PERMANENT

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("child name must not be empty")
        if not isinstance(self.restart, Restart):
            raise TypeError(f"restart must be a Restart, got {self.restart!r}")
