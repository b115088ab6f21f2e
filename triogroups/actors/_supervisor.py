"""Supervisors: restart strategies, restart intensity and backoff over a tree of actors.

A supervisor owns one nursery. Every child runs in its own task under its own *shielded* cancel
scope, so nothing but the supervisor stops a child: a crash is caught in the child's task and
reported to the supervisor loop, never raised into the nursery (siblings keep running), and on
shutdown the supervisor stops children one at a time in reverse start order instead of letting
one cancellation hit them all at once. A supervisor never reads or writes a message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from triogroups._renamed import renamed, warn_renamed

from ._actor import Actor, ActorRef, _Slot, run_incarnation
from ._errors import CrashReport, PermanentError, RestartIntensityExceeded, format_traceback
from ._policy import RestartIntensity, plan_restart, restarts_after
from ._spec import Restart, Strategy

__all__ = ["ChildSpec", "Supervisor"]

_MAX_CRASH_REPORTS = 100


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


class _Child:
    """Book-keeping for one child spec across its incarnations."""

    def __init__(self, spec: ChildSpec, index: int) -> None:
        self.spec = spec
        self.index = index
        self.state = "new"
        self.incarnation = 0
        self.restarts = 0
        self.slot: _Slot | None = None
        self.supervisor: Supervisor | None = None
        self.scope: trio.CancelScope | None = None
        self.done: trio.Event | None = None
        self.start_error: Exception | None = None  # the crash of the last start, if it failed

    def set_state(self, state: str) -> None:
        self.state = state
        if self.slot is not None:
            self.slot.state = state

    def stats(self) -> dict[str, Any]:
        if self.slot is not None:
            return {"kind": "actor", **self.slot.ref.stats()}
        if self.supervisor is not None:
            return {"kind": "supervisor", **self.supervisor.stats(), "state": self.state}
        return {"kind": None, "state": self.state, "restarts": self.restarts}


@dataclass(frozen=True, slots=True)
class _Exit:
    """A child task ended; ``crash`` is None when it returned or was cancelled."""

    child: _Child
    incarnation: int
    crash: Exception | None


class _StartedSignal(trio.TaskStatus["Supervisor"]):
    """Lets a nested supervisor report "started" to its parent without `Nursery.start`."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback

    def started(self, value: Supervisor | None = None) -> None:
        self._callback()


class Supervisor:
    """Runs child actors and supervisors, restarting them by strategy and restart policy.

    More than ``max_restarts`` restarts within ``restart_window`` seconds (a sliding window on
    the trio clock; ``within`` is its deprecated name) stop all children and make `run` raise
    RestartIntensityExceeded. A child that crashes with a `PermanentError` is never restarted:
    the children stop and `run` raises that error (during the first start, before `run`
    reports started). The k-th restart
    inside the window first waits ``min(backoff_initial * backoff_factor**(k-1), backoff_max)``
    seconds. ``before_restart`` is called with the child names about to start again, just before
    their factories; ``on_crash`` with every crash report.
    """

    def __init__(
        self,
        name: str,
        children: Sequence[ChildSpec],
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        restart_window: float = 5.0,
        backoff_initial: float = 0.01,
        backoff_factor: float = 2.0,
        backoff_max: float = 1.0,
        before_restart: Callable[[list[str]], None] | None = None,
        on_crash: Callable[[CrashReport], None] | None = None,
        within: float | None = None,
    ) -> None:
        restart_window = renamed(
            "Supervisor()", "within", within, "restart_window", restart_window, default=5.0
        )
        if not name:
            raise ValueError("supervisor name must not be empty")
        if not isinstance(strategy, Strategy):
            raise TypeError(f"strategy must be a Strategy, got {strategy!r}")
        self._intensity = RestartIntensity(
            max_restarts=max_restarts,
            restart_window=restart_window,
            backoff_initial=backoff_initial,
            backoff_factor=backoff_factor,
            backoff_max=backoff_max,
        )
        self.name = name
        self.strategy = strategy
        self.max_restarts = max_restarts
        self.restart_window = restart_window
        self.backoff_initial = backoff_initial
        self.backoff_factor = backoff_factor
        self.backoff_max = backoff_max
        self.before_restart = before_restart
        self.on_crash = on_crash
        self.crash_reports: list[CrashReport] = []
        self._children = [_Child(spec, index) for index, spec in enumerate(children)]
        self._by_name: dict[str, _Child] = {}
        for child in self._children:
            if child.spec.name in self._by_name:
                raise ValueError(f"child names must be unique, got {child.spec.name!r} twice")
            self._by_name[child.spec.name] = child
        self._path = name
        self._state = "new"
        self._scope = trio.CancelScope()
        self._restarts = 0
        self._nursery: trio.Nursery | None = None
        self._exits: trio.MemorySendChannel[_Exit] | None = None

    @property
    def within(self) -> float:
        """Deprecated: the old name of ``restart_window`` (warns; goes in the next release)."""
        warn_renamed("Supervisor.within", "within", "restart_window", stacklevel=2)
        return self.restart_window

    @property
    def path(self) -> str:
        """Dotted name through the parent supervisors ("root.stack"); the name at the top."""
        return self._path

    def ref(self, name: str) -> ActorRef:
        """The ref of direct child actor *name*; valid across its restarts."""
        child = self._by_name.get(name)
        if child is None:
            raise KeyError(f"supervisor {self._path!r} has no child {name!r}")
        if child.slot is None:
            if child.supervisor is not None:
                raise TypeError(f"child {name!r} is a supervisor, not an actor")
            raise RuntimeError(f"child {name!r} has not been started yet")
        return child.slot.ref

    def cancel(self) -> None:
        """Stop the whole tree, children in reverse start order; `run` then returns.

        For a nested supervisor that is a normal end, which its parent treats by the child's
        restart policy (a PERMANENT child supervisor is started again).
        """
        self._scope.cancel()

    def stats(self) -> dict[str, Any]:
        """Restart counters, crash count and a snapshot of every child."""
        return {
            "name": self._path,
            "state": self._state,
            "strategy": self.strategy.value,
            "restarts": self._restarts,
            "crashes": len(self.crash_reports),
            "children": {child.spec.name: child.stats() for child in self._children},
        }

    async def run(
        self, *, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start the children in order, report started, and supervise them.

        Returns when every child has ended for good, or after `cancel`; raises
        RestartIntensityExceeded when it escalates. Cancelling the enclosing scope stops the
        tree cleanly, with no crash reports. A supervisor runs once.
        """
        if self._state != "new":
            raise RuntimeError(f"supervisor {self._path!r} can only run once")
        self._state = "running"
        self._exits, exits = trio.open_memory_channel[_Exit](math.inf)
        error: Exception | None = None
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                with self._scope:
                    error = await self._supervise(exits, task_status)
            except Exception as exc:
                error = exc
            finally:
                with trio.CancelScope(shield=True):
                    for child in reversed(self._children):
                        await self._stop_child(child)
                for child in self._children:
                    self._retire(child)
                self._state = "stopped" if error is None else "failed"
        if error is not None:
            raise error

    async def _supervise(
        self, exits: trio.MemoryReceiveChannel[_Exit], task_status: trio.TaskStatus[Supervisor]
    ) -> Exception | None:
        await trio.lowlevel.checkpoint_if_cancelled()
        for child in self._children:
            await self._start(child)
            if isinstance(child.start_error, PermanentError):
                self._report(child, child.start_error)
                return child.start_error
        task_status.started(self)
        while any(child.state != "stopped" for child in self._children):
            event = await exits.receive()
            child = event.child
            if event.incarnation != child.incarnation or child.state not in ("starting", "running"):
                continue  # an incarnation we stopped ourselves, or one already replaced
            if event.crash is not None:
                self._report(child, event.crash)
                if isinstance(event.crash, PermanentError):
                    return event.crash
            if not restarts_after(child.spec.restart, crashed=event.crash is not None):
                self._retire(child)
                continue
            error = await self._restart(child)
            if error is not None:
                return error
        return None

    def _report(self, child: _Child, exception: Exception) -> None:
        report = CrashReport(
            actor=f"{self._path}.{child.spec.name}",
            exception=exception,
            traceback=format_traceback(exception),
            time=trio.current_time(),
            restart_count=child.restarts,
        )
        self.crash_reports.append(report)
        del self.crash_reports[:-_MAX_CRASH_REPORTS]
        if self.on_crash is not None:
            self.on_crash(report)

    async def _restart(self, child: _Child) -> RestartIntensityExceeded | None:
        now = trio.current_time()
        backoff = self._intensity.admit(now)
        if backoff is None:
            horizon = self._intensity.horizon(now)
            reports = [report for report in self.crash_reports if report.time > horizon]
            return RestartIntensityExceeded(
                self._path, reports, self.max_restarts, self.restart_window
            )
        again, retire = plan_restart(
            self.strategy,
            self._children,
            child.index,
            ended=lambda c: c.state == "stopped",
            restart_of=lambda c: c.spec.restart,
        )
        group = sorted([*again, *retire], key=lambda c: c.index)
        for other in reversed(group):
            await self._stop_child(other)
        for member in again:
            member.set_state("restarting")
        for member in retire:
            self._retire(member)
        await trio.sleep(backoff)
        if self.before_restart is not None:
            self.before_restart([member.spec.name for member in again])
        for member in again:
            member.restarts += 1
            if member.slot is not None:
                member.slot.restarts = member.restarts
            await self._start(member)
        self._restarts += 1
        return None

    def _retire(self, child: _Child) -> None:
        child.set_state("stopped")
        if child.slot is not None:
            child.slot.close()

    async def _start(self, child: _Child) -> None:
        """Start one incarnation and wait until it has started (or already ended)."""
        assert self._nursery is not None
        child.incarnation += 1
        started = trio.Event()
        child.scope = trio.CancelScope(shield=True)
        child.done = trio.Event()
        child.start_error = None
        child.set_state("starting")
        self._nursery.start_soon(
            self._run_child,
            child,
            child.incarnation,
            child.scope,
            started,
            child.done,
            name=f"{self._path}.{child.spec.name}",
        )
        await started.wait()

    async def _stop_child(self, child: _Child) -> None:
        if child.scope is None or child.done is None or child.done.is_set():
            return
        child.set_state("stopping")
        child.scope.cancel()
        await child.done.wait()

    async def _run_child(
        self,
        child: _Child,
        incarnation: int,
        scope: trio.CancelScope,
        started: trio.Event,
        done: trio.Event,
    ) -> None:
        def on_started() -> None:
            child.set_state("running")
            started.set()

        crash: Exception | None = None
        try:
            with scope:
                try:
                    await self._run_target(child, child.spec.factory(), on_started)
                except Exception as exc:
                    crash = exc
                    if not started.is_set():
                        child.start_error = exc
        finally:
            started.set()
            done.set()
            assert self._exits is not None
            self._exits.send_nowait(_Exit(child, incarnation, crash))

    async def _run_target(
        self, child: _Child, target: Actor | Supervisor, on_started: Callable[[], None]
    ) -> None:
        path = f"{self._path}.{child.spec.name}"
        if isinstance(target, Supervisor):
            target._path = path
            child.supervisor = target
            await target.run(task_status=_StartedSignal(on_started))
        elif isinstance(target, Actor):
            if child.slot is None:
                child.slot = _Slot(path, target.mailbox_size)
                child.slot.state = child.state
            await run_incarnation(target, child.slot, on_started)
        else:
            raise TypeError(
                f"factory of child {child.spec.name!r} must return an Actor or a Supervisor, "
                f"got {type(target).__name__}"
            )
