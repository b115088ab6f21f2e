"""A process group's restart intensity, counted on its running time, not the wall clock.

Erlang counts restarts over a period that fits its restart cost: a process restarts in
microseconds, so "1 restart in 5 s" catches a crash loop. A member process costs seconds to
restart (interpreter start-up, imports, discovery and the join: ~3.5 s on a busy 2-core
machine), so on the wall clock a member that crashes as soon as it starts is restarted at most
once or twice per 5 s and "3 restarts within 5 s" never trips: it loops for ever. Here the
window runs only while no member is being started (and not during the backoff before a
start): a crash loop then counts as restarts in next to no time, and gives up after
``max_restarts`` + 1 crashes however slow a start is, while a member that ran longer than the
window between its crashes is restarted each time. The rules of the window and the backoff
stay `RestartIntensity`'s; this object only owns the clock it is read on.

Sans-IO: no trio, no clock of its own; the caller passes ``now``.
"""

from __future__ import annotations

from triogroups.actors._policy import RestartIntensity

__all__ = ["MAX_RESTARTS", "RESTART_WINDOW", "GroupIntensity"]

MAX_RESTARTS = 3  # restarts allowed within the window; one more and the group gives up
RESTART_WINDOW = 30.0  # seconds of running time (starts and backoffs do not count)


class GroupIntensity:
    """`RestartIntensity` read on the group's running time: the time since the group was
    made, minus every stretch between `starting` and `started` (nested stretches count once).
    """

    def __init__(self, intensity: RestartIntensity) -> None:
        self.intensity = intensity
        self.max_restarts = intensity.max_restarts
        self.restart_window = intensity.restart_window
        self._paused = 0.0  # running time not counted, from stretches that ended
        self._since: float | None = None  # when the open stretch began
        self._depth = 0
        self._origin: float | None = None
        self._admitted: list[tuple[float, float]] = []  # (running time, now) of each admit

    def running_time(self, now: float) -> float:
        """Seconds the group ran with no member starting, up to ``now``."""
        if self._origin is None:
            self._origin = now
        open_stretch = 0.0 if self._since is None else now - self._since
        return now - self._origin - self._paused - open_stretch

    def starting(self, now: float) -> None:
        """A member is about to start (or wait its backoff): the window stops running."""
        self.running_time(now)
        if self._depth == 0:
            self._since = now
        self._depth += 1

    def started(self, now: float) -> None:
        """The start that `starting` announced has joined or ended."""
        if self._depth == 0:
            raise RuntimeError("started() without starting()")
        self._depth -= 1
        if self._depth == 0 and self._since is not None:
            self._paused += now - self._since
            self._since = None

    def admit(self, now: float) -> float | None:
        """Record a restart at ``now``: the backoff to wait before it, or None to give up."""
        running = self.running_time(now)
        horizon = self.intensity.horizon(running)
        self._admitted = [(r, t) for r, t in self._admitted if r > horizon]
        self._admitted.append((running, now))
        return self.intensity.admit(running)

    def horizon(self) -> float:
        """The caller's time of the oldest restart inside the window at the last `admit`:
        crashes from then on are the ones the give-up reports."""
        return self._admitted[0][1] if self._admitted else float("inf")
