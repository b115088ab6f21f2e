"""`open_process_group` and `ProcessGroup`: what the application holds of a process group.

N member processes of one application, supervised like actors. This module checks the
arguments and answers the application; every decision is the supervisor task's
(`_supervisor`), the events go through its hub (`_hub`), and one process is `_process`.
"""

from __future__ import annotations

import logging
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from triogroups._renamed import renamed
from triogroups.actors import CrashReport, Restart, Strategy
from triogroups.actors._policy import RestartIntensity
from triogroups.config import StackConfig
from triogroups.supervisor._app import App, Payload, load_app, resolve_stack, stack_label
from triogroups.supervisor._commands import encode_command
from triogroups.supervisor._events import GroupEvent, MemberView
from triogroups.supervisor._host import buffer_shortfall, check_host
from triogroups.supervisor._intensity import MAX_RESTARTS, RESTART_WINDOW
from triogroups.supervisor._logs import check_log_options
from triogroups.supervisor._members import MemberInfo, MemberSlot, default_name
from triogroups.supervisor._supervisor import Output, Supervisor

__all__ = ["ProcessGroup", "open_process_group"]

_log = logging.getLogger("triogroups.supervisor")


def _print_output(name: str, line: str) -> None:
    print(f"{name} | {line}", file=sys.stderr, flush=True)


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
        restart_window: float,
        backoff_initial: float,
        backoff_factor: float,
        backoff_max: float,
        stop_timeout: float,
        tail_lines: int,
        output: Output | None,
        log_format: str,
        log_level: str = "WARNING",
        state: Any = None,
        bare: bool = False,
        launcher: Sequence[str] = (),
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
        check_log_options(log_format, log_level)
        if isinstance(app, str):
            load_app(app)
        elif not callable(app):
            raise TypeError(f"app must be a function or 'module:function', got {app!r}")
        if bare and state is not None:
            raise ValueError("state needs a channel, got bare=True")
        config = resolve_stack(stack, bare=bare)
        if not launcher:  # elsewhere, this host's addresses say nothing
            check_host(config, n, stack_label(stack))
        names = list(names) if names is not None else [default_name(i) for i in range(n)]
        if len(set(names)) != len(names):
            raise ValueError(f"member names must be unique, got {names}")
        self.name = cluster or f"group-{uuid.uuid4().hex[:8]}"
        self.cluster = self.name
        self.strategy = strategy
        self.restart_policy = restart
        self.stop_timeout = stop_timeout
        self.tail_lines = tail_lines
        self.log_format = log_format
        self._app = app
        self._args = tuple(args)
        self._stack: StackConfig | str = stack if isinstance(stack, str) else config
        self._state = state
        self._bare = bare
        intensity = RestartIntensity(
            max_restarts=max_restarts,
            restart_window=restart_window,
            backoff_initial=backoff_initial,
            backoff_factor=backoff_factor,
            backoff_max=backoff_max,
        )
        self._supervisor = Supervisor(
            self.name,
            strategy=strategy,
            intensity=intensity,
            stop_timeout=stop_timeout,
            tail_lines=tail_lines,
            log_format=log_format,
            log_level=log_level,
            output=output or _print_output,
            launcher=launcher,
        )
        payload = self._payload(self._args)
        for index, name in enumerate(names):
            self._supervisor.members.append(MemberSlot(name, index, restart, payload))
        self._done = trio.Event()
        self._buffer_shortfall = buffer_shortfall(config)

    # -- what the application sees ------------------------------------------------------

    @property
    def history(self) -> list[GroupEvent]:
        """Every event so far, oldest first."""
        return self._supervisor.hub.history

    @property
    def crash_reports(self) -> list[CrashReport]:
        """The last 100 crashes, oldest first."""
        return self._supervisor.crash_reports

    @property
    def members(self) -> list[MemberInfo]:
        """Every member, in start order, as a snapshot."""
        return [member.info() for member in self._supervisor.members]

    def member(self, name: str) -> MemberInfo:
        """A snapshot of the member called ``name`` (its current incarnation)."""
        return self._supervisor.member(name).info()

    def events(self) -> trio.MemoryReceiveChannel[GroupEvent]:
        """The members' events from now on (`history` has those before); ends with the group."""
        return self._supervisor.hub.subscribe()

    def kill(self, name: str, signal: int = signal.SIGKILL) -> None:
        """Send ``signal`` to member ``name``'s process; what follows is the restart policy's."""
        inc = self._supervisor.member(name).current
        if inc is not None:
            inc.send_signal(signal)

    async def send(self, name: str, command: Any) -> None:
        """Send ``command`` (plain JSON data) to member ``name``'s current incarnation, which
        reads it from `member_commands`.

        Commands to one member arrive in the order sent. Returns once the command is in the
        member's pipe, not once the member read it; waits while the pipe is full (a member
        that reads no commands pushes back). RuntimeError if the member is not running (not
        started yet, or ended); a command is never carried over to a later incarnation.
        TypeError if JSON cannot carry ``command``.
        """
        line = encode_command(command)
        inc = self._supervisor.member(name).current
        if inc is None:
            raise RuntimeError(f"member {name!r} has not started")
        await inc.send_command(line)

    async def restart(self, name: str) -> MemberInfo:
        """Stop member ``name`` gracefully and start it again as a new incarnation.

        Returns once the new incarnation joined (or ended). Asked for, so it does not count
        against the restart intensity.
        """
        member = self._supervisor.member(name)
        await self._supervisor.ask("restart", member)
        return member.info()

    async def add_member(
        self, name: str | None = None, *, args: Sequence[Any] | None = None
    ) -> MemberInfo:
        """Start one more member (named like the others unless ``name``), with the group's
        arguments unless ``args``; returns once it joined (or ended)."""
        supervisor = self._supervisor
        supervisor.check_running()
        members = supervisor.members
        taken = {m.name for m in members}
        if name is None:
            name = next(
                default_name(i) for i in range(len(taken) + 1) if default_name(i) not in taken
            )
        elif name in taken:
            raise ValueError(f"member name must be unique, got {name!r} twice")
        payload = self._payload(self._args if args is None else tuple(args))
        member = MemberSlot(name, len(members), self.restart_policy, payload)
        members.append(member)
        await supervisor.ask("add", member)
        return member.info()

    async def wait_for_view(self, n: int) -> MemberView:
        """Wait until every member that has not ended for good runs, and all of them installed
        one view (same id) of exactly n members, which are their current incarnations."""
        supervisor = self._supervisor
        while True:
            supervisor.check_running()
            view = supervisor.common_view()
            if view is not None and len(view.members) == n:
                return view
            await supervisor.hub.changed()

    async def wait(self) -> None:
        """Return once the group has ended: every member ended for good, or it escalated."""
        await self._done.wait()

    def stats(self) -> dict[str, Any]:
        """Restart and crash counts and a snapshot of every member."""
        supervisor = self._supervisor
        return {
            "name": self.name,
            "state": supervisor.state,
            "strategy": self.strategy.value,
            "restarts": supervisor.restarts,
            "crashes": len(supervisor.crash_reports),
            "members": {m.name: m.info() for m in supervisor.members},
        }

    def _payload(self, args: tuple[Any, ...]) -> bytes:
        return Payload(self._app, args, self._stack, self._state, self._bare).dumps()

    async def _run(self, *, task_status: trio.TaskStatus[None]) -> None:
        if self._buffer_shortfall is not None:  # once for the group; each member says it at INFO
            _log.warning("process group %s: %s", self.name, self._buffer_shortfall)
        try:
            await self._supervisor.run(task_status=task_status)
        finally:
            self._done.set()


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
    max_restarts: int = MAX_RESTARTS,
    restart_window: float = RESTART_WINDOW,
    backoff_initial: float = 0.1,
    backoff_factor: float = 2.0,
    backoff_max: float = 5.0,
    stop_timeout: float = 10.0,
    tail_lines: int = 20,
    output: Output | None = None,
    log_format: str = "text",
    log_level: str = "WARNING",
    state: Any = None,
    bare: bool = False,
    launcher: Sequence[str] = (),
    within: float | None = None,
) -> AsyncIterator[ProcessGroup]:
    """Start ``n`` member processes, each running ``await app(channel, *args)`` in the group.

    ``app`` is an async function (shipped with cloudpickle: one in ``__main__``, a notebook or
    a test module works) or a ``"module:function"`` / ``"path/to/file.py:function"`` string.
    Each member joins ``cluster`` (a fresh name by default) over ``stack`` (a preset, a TOML
    path or a `StackConfig`) as ``names[i]`` (A, B, C, ... by default) through `open_channel`.
    Returns once every member joined (or ended). Members are supervised like actors:
    ``strategy``, ``restart`` (PERMANENT: always, TRANSIENT: after a crash, TEMPORARY: never),
    at most ``max_restarts`` within ``restart_window`` seconds of running time (the time members
    spend starting, and the backoff before a start, do not count: a member that crashes as it starts
    is given up on after ``max_restarts`` restarts however slow its start) with exponential
    backoff; past that every member is stopped and `ProcessGroupFailed` (a
    `RestartIntensityExceeded`) is raised here, naming the member, why it ended and its last
    ``tail_lines`` of output. A member whose start fails with a `StartupError` (a taken port)
    is not restarted: every member is stopped and that `StartupError` is raised here, naming
    the member. A member's traceback is shown once: a crash that repeats it shows its last line
    only. Output lines go to
    ``output(name, line)`` (default: stderr, prefixed with the member's name); members write
    their log records from ``log_level`` up (DEBUG, INFO, WARNING, ERROR) as text or, with
    ``log_format="json"``, as JSON lines. ``state`` (an
    object with ``get_state``/``set_state``) is shipped to each member, which gets its own
    copy, and given to `open_channel`, so a member that joins gets the group's state; put the
    same object in ``args`` to reach it from ``app`` (one pickle keeps them one object).
    With ``bare=True`` each member runs ``await app(stack, *args)`` on a started `Stack`
    instead, without a channel: nobody joins a group (the stack needs no GMS), a member
    counts as joined once its stack runs, and no views are reported; for protocol-level
    members that tests and tools drive by hand. ``launcher`` goes before each member's
    command line: a command that runs the rest in another place, such as
    ``("ip", "netns", "exec", "ns1")`` (it must exec the member, not fork it: the supervisor
    watches that pid).

    Leaving the block (also by cancellation or Ctrl-C) stops the members in reverse start
    order: SIGTERM, on which each leaves the group and exits, then SIGKILL after
    ``stop_timeout`` seconds. A member whose supervisor dies (even by SIGKILL) leaves too.

    ``within`` is the deprecated name of ``restart_window`` (it still works for this release,
    with a `DeprecationWarning`).
    """
    restart_window = renamed(
        "open_process_group()",
        "within",
        within,
        "restart_window",
        restart_window,
        default=RESTART_WINDOW,
        stacklevel=3,
    )
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
        restart_window=restart_window,
        backoff_initial=backoff_initial,
        backoff_factor=backoff_factor,
        backoff_max=backoff_max,
        stop_timeout=stop_timeout,
        tail_lines=tail_lines,
        output=output,
        log_format=log_format,
        log_level=log_level,
        state=state,
        bare=bare,
        launcher=launcher,
    )
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
