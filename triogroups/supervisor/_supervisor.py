"""The supervisor of a process group: one trio task that owns every decision.

The incarnations (`_process`) only report. Exits, manual restarts and added members come to
it through one inbox, so nothing races with a restart in progress. Whether a member that
ended comes back, which siblings go with it and whether that is still within the intensity or
the group escalates is decided by the same rules as for actors (`triogroups.actors._policy`),
with the window counted on the group's running time (`_intensity`: a start costs seconds). A
member that could not start (it reported a `StartupError`: a taken port) is not restarted: the
group ends with that error. A member's traceback is shown once per group.
Stopping is always graceful first: SIGTERM (the member leaves the group and exits), then after
``stop_timeout`` SIGKILL. `ProcessGroup` is its public face.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import trio

from triogroups._layer import StartupError
from triogroups.actors import CrashReport, Strategy
from triogroups.actors._policy import RestartIntensity, plan_restart, restarts_after
from triogroups.address import Address
from triogroups.supervisor._events import (
    MemberCrashed,
    MemberExited,
    MemberJoined,
    MemberRestarted,
    MemberView,
    ProcessGroupFailed,
)
from triogroups.supervisor._hub import EventHub
from triogroups.supervisor._intensity import GroupIntensity
from triogroups.supervisor._members import MemberSlot, address_from_status, view_from_status
from triogroups.supervisor._process import Incarnation, member_argv, member_env

__all__ = ["Output", "Supervisor"]

Output = Callable[[str, str], None]

_VIEW_SETTLE = 2.0  # at a graceful stop, how long the others may take to see one member leave


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


class Supervisor:
    """Starts, watches, restarts and stops the members of group ``name`` (see the module)."""

    def __init__(
        self,
        name: str,
        *,
        strategy: Strategy,
        intensity: RestartIntensity,
        stop_timeout: float,
        tail_lines: int,
        log_format: str,
        output: Output,
        launcher: Sequence[str] = (),
        log_level: str = "WARNING",
    ) -> None:
        self.name = name
        self.launcher = tuple(launcher)
        self.strategy = strategy
        self.intensity = GroupIntensity(intensity)
        self.stop_timeout = stop_timeout
        self.tail_lines = tail_lines
        self.log_format = log_format
        self.log_level = log_level
        self.output = output
        self.members: list[MemberSlot] = []
        self.state = "new"
        self.restarts = 0
        self.crash_reports: list[CrashReport] = []
        self.hub = EventHub()
        self._tracebacks_shown: set[str] = set()
        self._nursery: trio.Nursery | None = None
        self._inbox_send, self._inbox = trio.open_memory_channel[_Exit | _Request](math.inf)

    def member(self, name: str) -> MemberSlot:
        for member in self.members:
            if member.name == name:
                return member
        raise KeyError(f"process group {self.name!r} has no member {name!r}")

    def check_running(self) -> None:
        if self.state != "running":
            raise RuntimeError(f"process group {self.name!r} is {self.state}, not running")

    async def ask(self, kind: str, member: MemberSlot) -> None:
        """Have the supervisor task ``restart`` or ``add`` (start) ``member``; returns once
        it joined or ended."""
        self.check_running()
        request = _Request(kind, member, trio.Event())
        self._inbox_send.send_nowait(request)
        await request.done.wait()
        if request.error is not None:
            raise request.error

    def common_view(self) -> MemberView | None:
        """The view every member that has not ended for good installed, if they agree on one
        that holds exactly their current incarnations."""
        alive = [m for m in self.members if m.state != "stopped"]
        if not alive or any(m.state != "running" or m.view is None for m in alive):
            return None
        views = [m.view for m in alive if m.view is not None]
        wanted = {m.address for m in alive}
        first = views[0]
        if all(v.view_id == first.view_id and set(v.members) == wanted for v in views):
            return first
        return None

    # -- the supervisor task -------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Start every member, report started, supervise until all ended for good or the
        group escalates (raised here), and stop every member on the way out."""
        error: BaseException | None = None
        self.state = "running"
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    await self._start_members(self.members)
                    task_status.started()
                    error = await self._supervise()
                finally:
                    with trio.CancelScope(shield=True):
                        for member in reversed(self.members):
                            gone = member.address
                            await self._stop_member(member)
                            member.state = "stopped"
                            await self._wait_views_without(gone)
                    for member in self.members:
                        if member.current is not None:
                            member.current.scope.cancel()
        finally:
            self.state = "failed" if error is not None else "stopped"
            self.hub.close()
        if error is not None:
            raise error

    async def _supervise(self) -> ProcessGroupFailed | StartupError | None:
        while any(member.state != "stopped" for member in self.members):
            item = await self._inbox.receive()
            if isinstance(item, _Request):
                await self._serve(item)
                continue
            member, inc = item.member, item.incarnation
            if inc is not member.current or inc.stopping or member.state == "stopped":
                continue  # stopped on purpose, or already replaced
            returncode = inc.returncode
            assert returncode is not None
            now = trio.current_time()
            crash = MemberCrashed(member.name, returncode, inc.output)
            if returncode != 0:
                self._report(member, crash, now)
            if inc.startup_error is not None:  # a restart would meet the same error
                return StartupError(f"member {member.name!r} cannot start: {inc.startup_error}")
            if not restarts_after(member.restart, crashed=returncode != 0):
                member.state = "stopped"
                self.hub.pulse()
                continue
            error = await self._restart(member, crash, now)
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

    def _report(self, member: MemberSlot, crash: MemberCrashed, now: float) -> None:
        inc = member.current
        traceback = inc.traceback if inc is not None and inc.traceback else None
        self.crash_reports.append(
            CrashReport(
                actor=f"{self.name}.{member.name}",
                exception=crash,
                traceback=traceback or "\n".join(crash.output),
                time=now,
                restart_count=member.restarts,
            )
        )
        del self.crash_reports[:-100]

    async def _restart(
        self, member: MemberSlot, crash: MemberCrashed, now: float
    ) -> ProcessGroupFailed | None:
        backoff = self.intensity.admit(now)
        if backoff is None:
            horizon = self.intensity.horizon()
            reports = [r for r in self.crash_reports if r.time >= horizon]
            return ProcessGroupFailed(
                self.name,
                crash,
                reports,
                self.intensity.max_restarts,
                self.intensity.restart_window,
            )
        with self._starting():
            await self._replace(member, backoff)
        self.restarts += 1
        return None

    async def _replace(self, member: MemberSlot, backoff: float) -> None:
        """Stop the siblings the strategy takes along, wait ``backoff``, start them again."""
        again, retire = plan_restart(
            self.strategy,
            self.members,
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

    @contextmanager
    def _starting(self) -> Iterator[None]:
        """The restart window does not run meanwhile (`GroupIntensity`)."""
        self.intensity.starting(trio.current_time())
        try:
            yield
        finally:
            self.intensity.started(trio.current_time())

    # -- starting and stopping incarnations ------------------------------------------------

    async def _start_members(self, members: Sequence[MemberSlot]) -> None:
        """Start ``members``; when no other member runs, the first alone until it joined (it
        becomes the coordinator, so the others find it at once instead of forming views of
        their own). Returns once each joined or ended."""
        others_run = any(m.state == "running" and m not in members for m in self.members)
        first, rest = ([], list(members)) if others_run else (list(members[:1]), list(members[1:]))
        with self._starting():
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

        def argv(status_fd: int, command_fd: int) -> list[str]:
            return member_argv(
                member.name,
                self.name,
                status_fd,
                command_fd,
                self.log_format,
                self.launcher,
                self.log_level,
            )

        def on_output(line: str) -> None:
            self.output(member.name, line)

        def on_status(event: dict[str, Any]) -> None:
            self._on_status(member, inc, event)

        await self._nursery.start(self._run_incarnation, member, inc, argv, on_output, on_status)
        if number > 1:
            self.hub.publish(MemberRestarted(member.name, number, inc.pid))
        return inc

    async def _run_incarnation(
        self,
        member: MemberSlot,
        inc: Incarnation,
        argv: Callable[[int, int], list[str]],
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
                self.hub.publish(
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
            self.hub.publish(MemberJoined(member.name, inc.number, member.address, inc.pid))
        elif event["event"] == "view" and member.address is not None:
            member.view = view_from_status(member.name, member.address, event)
            self.hub.publish(member.view)
        elif event["event"] == "crashed":
            self._on_crashed(member, inc, event)

    def _on_crashed(self, member: MemberSlot, inc: Incarnation, event: dict[str, Any]) -> None:
        """The member's application (or its start) raised: it sent its traceback here instead
        of printing it. A traceback is shown once per group; a crash that repeats one shows as
        its last line only, so a crash loop does not print the same 20 lines per restart. A
        start-up error (a taken port: a restart would meet it again) is its one line."""
        summary, traceback = str(event["error"]), str(event["traceback"])
        inc.traceback = traceback
        if event.get("startup"):
            inc.startup_error = summary
            return
        if traceback in self._tracebacks_shown:
            shown = [f"{summary} (its traceback is shown above)"]
        else:
            self._tracebacks_shown.add(traceback)
            shown = traceback.rstrip("\n").splitlines() or [summary]
        for line in shown:
            self.output(member.name, line)
        inc.output.append(shown[-1])

    async def _wait_views_without(self, gone: Address | None) -> None:
        """Give the members still running up to ``_VIEW_SETTLE`` seconds to install a view
        without ``gone``, so that a stop shows as views that shrink one leave at a time."""
        with trio.move_on_after(_VIEW_SETTLE):
            while gone is not None and any(
                m.state == "running" and m.view is not None and gone in m.view.members
                for m in self.members
            ):
                await self.hub.changed()

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
