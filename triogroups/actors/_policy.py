"""The one place that decides "restart or escalate", for actors and for member processes.

The actor `Supervisor` and the OS-process supervisor (`triogroups.supervisor`) supervise
different things the same way: whether a child that ended is restarted (its `Restart` policy),
which siblings go with it (the `Strategy`), and whether the restart is still within the
intensity (at most ``max_restarts`` within ``restart_window`` seconds, with exponential backoff)
or the supervisor escalates. Those rules live here, as plain functions and one small object with no
trio, no clock of its own and no I/O: the caller passes ``now``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from ._spec import Restart, Strategy

__all__ = ["RestartIntensity", "plan_restart", "restarts_after"]

Child = TypeVar("Child")


def restarts_after(restart: Restart, *, crashed: bool) -> bool:
    """Whether a child with policy *restart* that ended (*crashed* or not) starts again."""
    if restart is Restart.PERMANENT:
        return True
    return crashed and restart is Restart.TRANSIENT


def plan_restart(
    strategy: Strategy,
    children: Sequence[Child],
    index: int,
    *,
    ended: Callable[[Child], bool],
    restart_of: Callable[[Child], Restart],
) -> tuple[list[Child], list[Child]]:
    """Who is stopped when ``children[index]`` ended, split into (start again, retire).

    Both lists are in start order. The group is the child alone (one_for_one), every child
    (one_for_all) or the child and those started after it (rest_for_one); children that
    already *ended* for good stay so, and TEMPORARY siblings stopped for the group's sake are
    retired instead of started again.
    """
    child = children[index]
    if strategy is Strategy.ONE_FOR_ONE:
        group = [child]
    else:
        start = 0 if strategy is Strategy.ONE_FOR_ALL else index
        group = [c for c in children[start:] if c is child or not ended(c)]
    again = [c for c in group if c is child or restart_of(c) is not Restart.TEMPORARY]
    retire = [c for c in group if c not in again]
    return again, retire


class RestartIntensity:
    """At most ``max_restarts`` restarts within ``restart_window`` seconds, each after its backoff.

    A sliding window over the times passed to `admit`. The k-th restart inside the window
    waits ``min(backoff_initial * backoff_factor**(k-1), backoff_max)`` seconds.
    """

    def __init__(
        self,
        *,
        max_restarts: int = 3,
        restart_window: float = 5.0,
        backoff_initial: float = 0.01,
        backoff_factor: float = 2.0,
        backoff_max: float = 1.0,
    ) -> None:
        if max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {max_restarts}")
        if not restart_window > 0:
            raise ValueError(f"restart_window must be > 0, got {restart_window}")
        if backoff_initial < 0:
            raise ValueError(f"backoff_initial must be >= 0, got {backoff_initial}")
        if backoff_factor < 1:
            raise ValueError(f"backoff_factor must be >= 1, got {backoff_factor}")
        if backoff_max < 0:
            raise ValueError(f"backoff_max must be >= 0, got {backoff_max}")
        self.max_restarts = max_restarts
        self.restart_window = restart_window
        self.backoff_initial = backoff_initial
        self.backoff_factor = backoff_factor
        self.backoff_max = backoff_max
        self._times: list[float] = []

    def horizon(self, now: float) -> float:
        """Restarts (and crashes) after this time are inside the window."""
        return now - self.restart_window

    def admit(self, now: float) -> float | None:
        """Record a restart at *now*: the backoff to wait before it, or None to escalate."""
        horizon = self.horizon(now)
        self._times = [t for t in self._times if t > horizon]
        self._times.append(now)
        k = len(self._times)
        if k > self.max_restarts:
            return None
        return float(min(self.backoff_initial * self.backoff_factor ** (k - 1), self.backoff_max))
