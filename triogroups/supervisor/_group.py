"""`open_process_group`: N member processes of one application, supervised like actors.

The supervisor is one trio task that owns every decision; the incarnations (`_process`) only
report. Exits, manual restarts and added members come to it through one inbox, so nothing races
with a restart in progress. Whether a member that ended comes back, which siblings go with it
and whether that is still within the intensity or the group escalates is decided by the same
rules as for actors (`triogroups.actors._policy`). Stopping is always graceful first: SIGTERM
(the member leaves the group and exits), then after ``stop_timeout`` SIGKILL.
"""

from __future__ import annotations

import math
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from triogroups.actors import CrashReport, Restart, Strategy
from triogroups.actors._policy import RestartIntensity, plan_restart, restarts_after
from triogroups.address import Address
from triogroups.config import StackConfig
from triogroups.supervisor._app import App, Payload, load_app, resolve_stack
from triogroups.supervisor._events import (
    GroupEvent,
    MemberCrashed,
    MemberExited,
    MemberJoined,
    MemberRestarted,
    MemberView,
    ProcessGroupFailed,
)
from triogroups.supervisor._logs import LOG_FORMATS
from triogroups.supervisor._members import (
    MemberInfo,
    MemberSlot,
    address_from_status,
    default_name,
    view_from_status,
)
from triogroups.supervisor._process import Incarnation, member_argv, member_env

__all__ = ["ProcessGroup", "open_process_group"]

Output = Callable[[str, str], None]

_VIEW_SETTLE = 2.0  # at a graceful stop, how long the others may take to see one member leave


def _print_output(name: str, line: str) -> None:
    print(f"{name} | {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class _Exit:
    member: MemberSlot
    incarnation: Incarnation


@dataclass
class _Request:
    kind: str  # "restart" | "add"
    member: MemberSlot
    done: trio.Event
    error: BaseException | None = None


class ProcessGroup:
    """A supervised group of member processes; made by `open_process_group`."""

    def __init__(
        self,
        app: App | str,
        n: int,
        *,
        stack: StackConfig | str | Path,
        cluster: str | None,
        args: Sequence[Any],
        names: Sequence[str] | None,
        strategy: Strategy,
        restart: Restart,
        max_restarts: int,
        within: float,
        backoff_initial: float,
        backoff_factor: float,
        backoff_max: float,
        stop_timeout: float,
        tail_lines: int,
        output: Output | None,
        log_format: str,
    ) -> None:
        if names is not None:
            n = len(names)
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if not isinstance(strategy, Strategy):
            raise TypeError(f"strategy must be a Strategy, got {strategy!r}")
        if not isinstance(restart, Restart):
            raise TypeError(f"restart must be a Restart, got {restart!r}")
        if not stop_timeout > 0:
            raise ValueError(f"stop_timeout must be > 0, got {stop_timeout}")
        if log_format not in LOG_FORMATS:
            formats = ", ".join(LOG_FORMATS)
            raise ValueError(f"log_format must be one of {formats}, got {log_format!r}")
        if isinstance(app, str):
            load_app(app)
        elif not callable(app):
            raise TypeError(f"app must be a function or 'module:function', got {app!r}")
        config = resolve_stack(stack)
        self.name = cluster or f"group-{uuid.uuid4().hex[:8]}"
        self.cluster = self.name
        self.strategy = strategy
        self.restart_policy = restart
        self.stop_timeout = stop_timeout
        self.tail_lines = tail_lines
        self.log_format = log_format
        self.history: list[GroupEvent] = []
        self.crash_reports: list[CrashReport] = []
        self._app = app
        self._args = tuple(args)
        self._stack: StackConfig | str = stack if isinstance(stack, str) else config
        self._intensity = RestartIntensity(
            max_restarts=max_restarts,
            within=within,
            backoff_initial=backoff_initial,
            backoff_factor=backoff_factor,
            backoff_max=backoff_max,
        )
        self._output = output or _print_output
        self._names = list(names) if names is not None else [default_name(i) for i in range(n)]
        if len(set(self._names)) != len(self._names):
            raise ValueError(f"member names must be unique, got {self._names}")
        self._members: list[MemberSlot] = []
        self._state = "new"
        self._restarts = 0
        self._nursery: trio.Nursery | None = None
        self._inbox_send, self._inbox = trio.open_memory_channel[_Exit | _Request](math.inf)
        self._subscribers: list[trio.MemorySendChannel[GroupEvent]] = []
        self._changed = trio.Event()
        self._done = trio.Event()

    # -- what the application sees ------------------------------------------------------

    @property
    def members(self) -> list[MemberInfo]:
        """Every member, in start order, as a snapshot."""
        return [member.info() for member in self._members]

    def member(self, name: str) -> MemberInfo:
        """A snapshot of the member called ``name`` (its current incarnation)."""
        return self._member(name).info()

    def events(self) -> trio.MemoryReceiveChannel[GroupEvent]:
        """The members' events from now on (`history` has those before); ends with the group."""
        send, receive = trio.open_memory_channel[GroupEvent](math.inf)
        if self._state in ("stopped", "failed"):
            send.close()
        else:
            self._subscribers.append(send)
        return receive

    def kill(self, name: str, signal: int = signal.SIGKILL) -> None:
        """Send ``signal`` to member ``name``'s process; what follows is the restart policy's."""
        inc = self._member(name).current
        if inc is not None:
            inc.send_signal(signal)

    async def restart(self, name: str) -> MemberInfo:
        """Stop member ``name`` gracefully and start it again as a new incarnation.

        Returns once the new incarnation joined (or ended). Asked for, so it does not count
        against the restart intensity.
        """
        member = self._member(name)
        await self._ask("restart", member)
        return member.info()

    async def add_member(
        self, name: str | None = None, *, args: Sequence[Any] | None = None
    ) -> MemberInfo:
        """Start one more member (named like the others unless ``name``), with the group's
        arguments unless ``args``; returns once it joined (or ended)."""
        self._check_running()
        taken = {m.name for m in self._members}
        if name is None:
            name = next(
                default_name(i) for i in range(len(taken) + 1) if default_name(i) not in taken
            )
        elif name in taken:
            raise ValueError(f"member name must be unique, got {name!r} twice")
        payload = self._payload(self._args if args is None else tuple(args))
        member = MemberSlot(name, len(self._members), self.restart_policy, payload)
        self._members.append(member)
        await self._ask("add", member)
        return member.info()

    async def wait_for_view(self, n: int) -> MemberView:
        """Wait until every member that has not ended for good runs, and all of them installed
        one view (same id) of exactly n members, which are their current incarnations."""
        while True:
            self._check_running()
            view = self._common_view()
            if view is not None and len(view.members) == n:
                return view
            await self._wait_change()

    async def wait(self) -> None:
        """Return once the group has ended: every member ended for good, or it escalated."""
        await self._done.wait()

    def stats(self) -> dict[str, Any]:
        """Restart and crash counts and a snapshot of every member."""
        return {
            "name": self.name,
            "state": self._state,
            "strategy": self.strategy.value,
            "restarts": self._restarts,
            "crashes": len(self.crash_reports),
            "members": {m.name: m.info() for m in self._members},
        }

    # -- helpers -------------------------------------------------------------------------

    def _member(self, name: str) -> MemberSlot:
        for member in self._members:
            if member.name == name:
                return member
        raise KeyError(f"process group {self.name!r} has no member {name!r}")

    def _check_running(self) -> None:
        if self._state != "running":
            raise RuntimeError(f"process group {self.name!r} is {self._state}, not running")

    async def _ask(self, kind: str, member: MemberSlot) -> None:
        self._check_running()
        request = _Request(kind, member, trio.Event())
        self._inbox_send.send_nowait(request)
        await request.done.wait()
        if request.error is not None:
            raise request.error

    async def _wait_change(self) -> None:
        await self._changed.wait()

    def _pulse(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _publish(self, event: GroupEvent) -> None:
        self.history.append(event)
        for subscriber in self._subscribers:
            subscriber.send_nowait(event)
        self._pulse()

    def _common_view(self) -> MemberView | None:
        alive = [m for m in self._members if m.state != "stopped"]
        if not alive or any(m.state != "running" or m.view is None for m in alive):
            return None
        views = [m.view for m in alive if m.view is not None]
        wanted = {m.address for m in alive}
        first = views[0]
        if all(v.view_id == first.view_id and set(v.members) == wanted for v in views):
            return first
        return None

    def _payload(self, args: tuple[Any, ...]) -> bytes:
        return Payload(self._app, args, self._stack).dumps()

    # -- the supervisor ------------------------------------------------------------------

    async def _run(self, *, task_status: trio.TaskStatus[ProcessGroup]) -> None:
        error: BaseException | None = None
        self._state = "running"
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    await self._start_members(self._members)
                    task_status.started(self)
                    error = await self._supervise()
                finally:
                    with trio.CancelScope(shield=True):
                        for member in reversed(self._members):
                            gone = member.address
                            await self._stop_member(member)
                            member.state = "stopped"
                            await self._wait_views_without(gone)
                    for member in self._members:
                        if member.current is not None:
                            member.current.scope.cancel()
        finally:
            self._state = "failed" if error is not None else "stopped"
            for subscriber in self._subscribers:
                subscriber.close()
            self._done.set()
            self._pulse()
        if error is not None:
            raise error

    async def _supervise(self) -> ProcessGroupFailed | None:
        while any(member.state != "stopped" for member in self._members):
            item = await self._inbox.receive()
            if isinstance(item, _Request):
                await self._serve(item)
                continue
            member, inc = item.member, item.incarnation
            if inc is not member.current or inc.stopping or member.state == "stopped":
                continue  # stopped on purpose, or already replaced
            returncode = inc.returncode
            assert returncode is not None
            crash = MemberCrashed(member.name, returncode, inc.output)
            if returncode != 0:
                self._report(member, crash)
            if not restarts_after(member.restart, crashed=returncode != 0):
                member.state = "stopped"
                self._pulse()
                continue
            error = await self._restart(member, crash)
            if error is not None:
                return error
        return None

    async def _serve(self, request: _Request) -> None:
        member = request.member
        try:
            if request.kind == "restart":
                await self._stop_member(member)
            await self._start_members([member])
        except Exception as exc:
            request.error = exc
        finally:
            request.done.set()

    def _report(self, member: MemberSlot, crash: MemberCrashed) -> None:
        self.crash_reports.append(
            CrashReport(
                actor=f"{self.name}.{member.name}",
                exception=crash,
                traceback="\n".join(crash.output),
                time=trio.current_time(),
                restart_count=member.restarts,
            )
        )
        del self.crash_reports[:-100]

    async def _restart(self, member: MemberSlot, crash: MemberCrashed) -> ProcessGroupFailed | None:
        now = trio.current_time()
        backoff = self._intensity.admit(now)
        if backoff is None:
            horizon = self._intensity.horizon(now)
            reports = [r for r in self.crash_reports if r.time > horizon]
            return ProcessGroupFailed(
                self.name,
                crash,
                reports,
                self._intensity.max_restarts,
                self._intensity.within,
            )
        again, retire = plan_restart(
            self.strategy,
            self._members,
            member.index,
            ended=lambda m: m.state == "stopped",
            restart_of=lambda m: m.restart,
        )
        for other in sorted([*again, *retire], key=lambda m: -m.index):
            await self._stop_member(other)
        for other in retire:
            other.state = "stopped"
        for other in again:
            other.state = "restarting"
        await trio.sleep(backoff)
        await self._start_members(again)
        self._restarts += 1
        return None

    async def _start_members(self, members: Sequence[MemberSlot]) -> None:
        """Start ``members``; when no other member runs, the first alone until it joined (it
        becomes the coordinator, so the others find it at once instead of forming views of
        their own). Returns once each joined or ended."""
        others_run = any(m.state == "running" and m not in members for m in self._members)
        first, rest = ([], list(members)) if others_run else (list(members[:1]), list(members[1:]))
        for batch in (first, rest):
            incarnations = [await self._start(member) for member in batch]
            for inc in incarnations:
                await inc.settled.wait()

    async def _start(self, member: MemberSlot) -> Incarnation:
        assert self._nursery is not None
        number = 1 if member.current is None else member.current.number + 1
        inc = Incarnation(member.name, number, self.tail_lines)
        member.current = inc
        member.address = None
        member.view = None
        member.state = "starting"
        if number > 1:
            member.restarts += 1

        def argv(status_fd: int) -> list[str]:
            return member_argv(member.name, self.cluster, status_fd, self.log_format)

        def on_output(line: str) -> None:
            self._output(member.name, line)

        def on_status(event: dict[str, Any]) -> None:
            self._on_status(member, inc, event)

        await self._nursery.start(self._run_incarnation, member, inc, argv, on_output, on_status)
        if number > 1:
            self._publish(MemberRestarted(member.name, number, inc.pid))
        return inc

    async def _run_incarnation(
        self,
        member: MemberSlot,
        inc: Incarnation,
        argv: Callable[[int], list[str]],
        on_output: Callable[[str], None],
        on_status: Callable[[dict[str, Any]], None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            env = member_env(member.name)
            with inc.scope:  # shielded: only the supervisor stops a member, gracefully first
                await inc.run(
                    argv, member.payload, env, on_output, on_status, task_status=task_status
                )
        finally:
            if inc.process is not None and inc.returncode is not None:
                self._publish(
                    MemberExited(
                        member.name,
                        inc.number,
                        inc.pid,
                        inc.returncode,
                        tuple(inc.output),
                        expected=inc.stopping,
                    )
                )
                self._inbox_send.send_nowait(_Exit(member, inc))

    def _on_status(self, member: MemberSlot, inc: Incarnation, event: dict[str, Any]) -> None:
        if inc is not member.current:
            return
        if event["event"] == "joined":
            member.address = address_from_status(event["address"])
            if member.state == "starting":
                member.state = "running"
            inc.settled.set()
            self._publish(MemberJoined(member.name, inc.number, member.address, inc.pid))
        elif event["event"] == "view" and member.address is not None:
            member.view = view_from_status(member.name, member.address, event)
            self._publish(member.view)

    async def _wait_views_without(self, gone: Address | None) -> None:
        """Give the members still running up to ``_VIEW_SETTLE`` seconds to install a view
        without ``gone``, so that a stop shows as views that shrink one leave at a time."""
        with trio.move_on_after(_VIEW_SETTLE):
            while gone is not None and any(
                m.state == "running" and m.view is not None and gone in m.view.members
                for m in self._members
            ):
                await self._wait_change()

    async def _stop_member(self, member: MemberSlot) -> None:
        """SIGTERM (the member leaves and exits), SIGKILL after ``stop_timeout``."""
        inc = member.current
        if inc is None or inc.ended.is_set():
            return
        inc.stopping = True
        member.state = "stopping"
        inc.send_signal(signal.SIGTERM)
        with trio.move_on_after(self.stop_timeout):
            await inc.ended.wait()
        if not inc.ended.is_set():
            inc.send_signal(signal.SIGKILL)
            await inc.ended.wait()


def _unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    if len(group.exceptions) == 1:
        inner = group.exceptions[0]
        return _unwrap(inner) if isinstance(inner, BaseExceptionGroup) else inner
    return group


@asynccontextmanager
async def open_process_group(
    app: App | str,
    n: int = 3,
    *,
    stack: StackConfig | str | Path = "udp",
    cluster: str | None = None,
    args: Sequence[Any] = (),
    names: Sequence[str] | None = None,
    strategy: Strategy = Strategy.ONE_FOR_ONE,
    restart: Restart = Restart.PERMANENT,
    max_restarts: int = 3,
    within: float = 5.0,
    backoff_initial: float = 0.1,
    backoff_factor: float = 2.0,
    backoff_max: float = 5.0,
    stop_timeout: float = 10.0,
    tail_lines: int = 20,
    output: Output | None = None,
    log_format: str = "text",
) -> AsyncIterator[ProcessGroup]:
    """Start ``n`` member processes, each running ``await app(channel, *args)`` in the group.

    ``app`` is an async function (shipped with cloudpickle: one in ``__main__``, a notebook or
    a test module works) or a ``"module:function"`` / ``"path/to/file.py:function"`` string.
    Each member joins ``cluster`` (a fresh name by default) over ``stack`` (a preset, a TOML
    path or a `StackConfig`) as ``names[i]`` (A, B, C, ... by default) through `open_channel`.
    Returns once every member joined (or ended). Members are supervised like actors:
    ``strategy``, ``restart`` (PERMANENT: always, TRANSIENT: after a crash, TEMPORARY: never),
    at most ``max_restarts`` within ``within`` seconds with exponential backoff; past that every
    member is stopped and `ProcessGroupFailed` (a `RestartIntensityExceeded`) is raised here,
    naming the member, why it ended and its last ``tail_lines`` of output. Output lines go to
    ``output(name, line)`` (default: stderr, prefixed with the member's name); members write
    their log records as text or, with ``log_format="json"``, as JSON lines.

    Leaving the block (also by cancellation or Ctrl-C) stops the members in reverse start
    order: SIGTERM, on which each leaves the group and exits, then SIGKILL after
    ``stop_timeout`` seconds. A member whose supervisor dies (even by SIGKILL) leaves too.
    """
    group = ProcessGroup(
        app,
        n,
        stack=stack,
        cluster=cluster,
        args=args,
        names=names,
        strategy=strategy,
        restart=restart,
        max_restarts=max_restarts,
        within=within,
        backoff_initial=backoff_initial,
        backoff_factor=backoff_factor,
        backoff_max=backoff_max,
        stop_timeout=stop_timeout,
        tail_lines=tail_lines,
        output=output,
        log_format=log_format,
    )
    payload = group._payload(group._args)
    for index, name in enumerate(group._names):
        group._members.append(MemberSlot(name, index, restart, payload))
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(group._run)
            try:
                yield group
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as exc:
        error = _unwrap(exc)
        if error is exc:
            raise
        raise error from error.__cause__
