"""A cluster singleton: one actor that runs on the coordinator of the view only.

`open_singleton` in the manner of Akka's cluster singleton, with the view's coordinator
in the place of the oldest member. Every member runs it with the same actor; the member
that is the coordinator of its current view runs the actor under a supervisor of its
own, the others run nothing and know where it runs (`Singleton.location`). This module
follows the channel's views and starts and stops; it never sends a message of its own
and never decides a restart of the actor (its supervisor does).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from triogroups._channel import Channel
from triogroups.actors import Actor, ActorRef, ChildSpec, Supervisor
from triogroups.address import Address
from triogroups.view import View

__all__ = ["LocationIterator", "Singleton", "open_singleton"]


class Singleton:
    """One member's side of a cluster singleton (made by `open_singleton`).

    The actor runs on a member while it is the coordinator of the view it installed
    last, and only then: each installed view is acted on before the next, a member
    that stops being the coordinator (another member joined ahead of it in a merge)
    stops the actor before it starts anything else, and a member leaving the block
    stops the actor before its channel leaves the group. So the members of one view
    never run it twice at once (a partition is two views: each side runs one, and the
    merge leaves one).
    """

    def __init__(self, channel: Channel, spec: ChildSpec) -> None:
        self._channel = channel
        self.name = spec.name
        self._spec = spec
        self._view: View | None = None
        self._supervisor: Supervisor | None = None
        self._done: trio.Event | None = None
        self._ended = False  # the actor ended for good during this member's term
        self._closed = False
        self._changed = trio.Event()
        self._version = 0
        self._nursery: trio.Nursery | None = None
        self._counters = {"starts": 0, "stops": 0}

    @property
    def location(self) -> Address | None:
        """Where the actor runs, as this member's view says: the view's coordinator (None
        once the block has ended). Right after a crash this is the crashed member until
        failure detection excludes it and the next view names the next coordinator."""
        view = self._view
        return None if view is None or self._closed else view.coord

    @property
    def running(self) -> bool:
        """True while the actor runs on this member (between its start and its stop)."""
        return self._supervisor is not None

    @property
    def ref(self) -> ActorRef | None:
        """The running actor's ref on this member (valid across its restarts), or None:
        it runs elsewhere, or the spec's factory makes a supervisor, not an actor."""
        supervisor = self._supervisor
        if supervisor is None:
            return None
        try:
            return supervisor.ref(self.name)
        except (TypeError, RuntimeError):
            return None

    def locations(self) -> LocationIterator:
        """An async iterator over `location`: the current one, then each new one."""
        return LocationIterator(self)

    def stats(self) -> dict[str, Any]:
        """A plain snapshot: where it runs, whether here, starts and stops on this member,
        and the supervisor's snapshot while it runs here."""
        supervisor = self._supervisor
        location = self.location
        return {
            "name": self.name,
            "location": str(location) if location is not None else None,
            "running": supervisor is not None,
            "ended": self._ended,
            **self._counters,
            "supervisor": supervisor.stats() if supervisor is not None else None,
        }

    # --- following the views -------------------------------------------------------

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Act on each view until the channel closes (the singleton's one task)."""
        started = False
        try:
            async for view in self._channel.views():
                await self._install(view)
                if not started:
                    started = True
                    task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                await self._stop()
            self._close()
        if not started:
            task_status.started()

    async def _install(self, view: View) -> None:
        was = self._view
        self._view = view
        here = view.coord == self._channel.address
        if not here:
            self._ended = False
            await self._stop()
        elif self._supervisor is None and not self._ended:
            await self._start()
        if was is None or was.coord != view.coord:
            self._moved()

    async def _start(self) -> None:
        assert self._nursery is not None
        supervisor = Supervisor(f"singleton-{self.name}", [self._spec])
        done = trio.Event()
        self._supervisor, self._done = supervisor, done
        self._counters["starts"] += 1
        await self._nursery.start(self._supervise, supervisor, done)

    async def _supervise(
        self,
        supervisor: Supervisor,
        done: trio.Event,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run one term's supervisor; RestartIntensityExceeded ends the block with it."""
        reported = False

        def started() -> None:
            nonlocal reported
            reported = True
            task_status.started()

        try:
            await supervisor.run(task_status=_Started(started))
            if self._supervisor is supervisor:  # it ended for good by itself
                self._ended = True
        finally:
            if self._supervisor is supervisor:
                self._supervisor = None
                self._counters["stops"] += 1
            done.set()
            if not reported:
                task_status.started()

    async def _stop(self) -> None:
        supervisor, done = self._supervisor, self._done
        if supervisor is None or done is None:
            return
        self._supervisor = None
        self._counters["stops"] += 1
        supervisor.cancel()
        await done.wait()

    def _moved(self) -> None:
        self._version += 1
        self._changed.set()
        self._changed = trio.Event()

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self._moved()


class _Started(trio.TaskStatus[Supervisor]):
    """Passes the supervisor's "started" on to a callback (it reports itself)."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback

    def started(self, value: Supervisor | None = None) -> None:
        self._callback()


class LocationIterator:
    """`Singleton.locations`: the current location, then each new one (a consumer that
    falls behind sees the latest only). Ends when the singleton's block ends."""

    def __init__(self, singleton: Singleton) -> None:
        self._singleton = singleton
        self._version = -1

    def __aiter__(self) -> LocationIterator:
        return self

    async def __anext__(self) -> Address | None:
        singleton = self._singleton
        while self._version == singleton._version:
            if singleton._closed:
                raise StopAsyncIteration
            await singleton._changed.wait()
        self._version = singleton._version
        if singleton._closed:
            raise StopAsyncIteration
        return singleton.location


def _child_spec(actor: ChildSpec | Callable[[], Actor | Supervisor], name: str | None) -> ChildSpec:
    if isinstance(actor, ChildSpec):
        if name is not None and name != actor.name:
            raise ValueError(f"name {name!r} differs from the ChildSpec's name {actor.name!r}")
        return actor
    if isinstance(actor, Actor | Supervisor):
        raise TypeError(
            "actor must be a factory (a class or a function that returns a new Actor), "
            f"not an instance: a singleton starts a new one on each coordinator, got {actor!r}"
        )
    if not callable(actor):
        raise TypeError(
            f"actor must be a ChildSpec or a factory of an Actor, got {type(actor).__name__}"
        )
    default: str = getattr(actor, "__name__", "singleton")
    return ChildSpec(name or default, actor)


@asynccontextmanager
async def open_singleton(
    channel: Channel,
    actor: ChildSpec | Callable[[], Actor | Supervisor],
    *,
    name: str | None = None,
) -> AsyncIterator[Singleton]:
    """Run ``actor`` as a cluster singleton for the block; every member should.

    ``actor`` is a `ChildSpec` or a factory (an `Actor` subclass, or a function returning
    a new `Actor` or `Supervisor`), called at each start: on the coordinator of the view
    when the block begins, on the next coordinator when it crashes or leaves, and by the
    supervisor around it to restart a crashed actor by its restart policy. An actor that
    ends for good (a TEMPORARY one, a TRANSIENT one that returned) is not started again
    until another member has been coordinator. ``name`` names the child (default: the
    spec's or the factory's name).

    Returns once the first view is acted on: on the coordinator the actor has started.
    On exit the actor stops here before the block ends, so a coordinator that leaves
    stops it before its leave lets the next coordinator start it. After a crash the next
    coordinator starts it once the view without the crashed member is installed:
    within failure detection plus the view's installation (see the how-to). A supervisor
    that gives up (RestartIntensityExceeded) raises out of this block.
    """
    spec = _child_spec(actor, name)
    singleton = Singleton(channel, spec)
    async with trio.open_nursery() as nursery:
        singleton._nursery = nursery
        await nursery.start(singleton._run)
        try:
            yield singleton
        finally:
            nursery.cancel_scope.cancel()
