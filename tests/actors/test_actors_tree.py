"""Nested supervisor trees: escalation, crash reports, cancellation, refs across restarts."""

from __future__ import annotations

import traceback
from typing import Any

import pytest
import trio
import trio.testing

from triogroups.actors import (
    Actor,
    ActorGone,
    ChildSpec,
    CrashReport,
    PermanentError,
    RestartIntensityExceeded,
    Supervisor,
)


class Logged(Actor):
    """Logs hooks and messages into a shared list; "crash" raises from `explode_on_request`."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def started(self) -> None:
        self.log.append(f"start {self.name}")

    async def stopped(self) -> None:
        self.log.append(f"stop {self.name}")

    async def handle(self, message: Any) -> None:
        explode_on_request(message)
        self.log.append(f"{self.name} got {message}")


def explode_on_request(message: Any) -> None:
    if message == "crash":
        raise ZeroDivisionError("asked to crash")


class FailsAtStart(Actor):
    """Crashes in `started` while the shared budget of failures lasts."""

    def __init__(self, failures: list[int]) -> None:
        self.failures = failures

    async def started(self) -> None:
        if self.failures[0] > 0:
            self.failures[0] -= 1
            raise ConnectionError("layer failed to start")


async def test_child_supervisor_escalation_is_a_crash_the_parent_restarts(
    autojump_clock: trio.abc.Clock,
) -> None:
    failures = [2]
    inners: list[Supervisor] = []

    def make_inner() -> Supervisor:
        inner = Supervisor(
            "inner", [ChildSpec("w", lambda: FailsAtStart(failures))], max_restarts=1
        )
        inners.append(inner)
        return inner

    root = Supervisor("root", [ChildSpec("inner", make_inner)])
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        await trio.sleep(5)
        assert len(inners) == 2
        assert [report.actor for report in root.crash_reports] == ["root.inner"]
        escalation = root.crash_reports[0].exception
        assert isinstance(escalation, RestartIntensityExceeded)
        assert escalation.supervisor == "root.inner"
        assert [r.actor for r in escalation.reports] == ["root.inner.w", "root.inner.w"]
        assert inners[0].stats()["state"] == "failed"
        assert inners[1].stats()["children"]["w"]["state"] == "running"
        assert inners[1].ref("w").name == "root.inner.w"
        assert root.stats()["children"]["inner"]["state"] == "running"
        root.cancel()


async def test_parent_escalates_when_its_child_supervisor_keeps_escalating(
    autojump_clock: trio.abc.Clock,
) -> None:
    def make_inner() -> Supervisor:
        return Supervisor("inner", [ChildSpec("w", lambda: FailsAtStart([99]))], max_restarts=0)

    root = Supervisor("root", [ChildSpec("inner", make_inner)], max_restarts=1)
    with trio.fail_after(10), pytest.raises(RestartIntensityExceeded) as info:
        await root.run()
    assert info.value.supervisor == "root"
    assert [r.actor for r in info.value.reports] == ["root.inner", "root.inner"]
    assert all(isinstance(r.exception, RestartIntensityExceeded) for r in info.value.reports)


async def test_crash_report_keeps_the_name_the_original_exception_and_its_traceback(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    reports: list[CrashReport] = []
    supervisor = Supervisor("root", [ChildSpec("w", lambda: Logged(log))], on_crash=reports.append)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        await trio.sleep(2)
        await supervisor.ref("w").send("crash")
        await trio.sleep(1)
        await supervisor.ref("w").send("crash")
        await trio.sleep(1)
        supervisor.cancel()
    assert reports == supervisor.crash_reports
    first, second = reports
    assert first.actor == "root.w"
    assert type(first.exception) is ZeroDivisionError
    assert str(first.exception) == "asked to crash"
    assert "explode_on_request" in first.traceback
    assert "ZeroDivisionError: asked to crash" in first.traceback
    assert first.time == pytest.approx(2)
    assert (first.restart_count, second.restart_count) == (0, 1)
    assert first.exception is not second.exception


def test_crash_report_prints_readably_one_line_repr_and_multiline_str() -> None:
    """Issue 12 item 12: a report's repr is one line without the traceback's escaped
    newlines, and str() shows the traceback as Python prints it."""
    try:
        raise ZeroDivisionError("asked to crash")
    except ZeroDivisionError as exc:
        report = CrashReport("root.w", exc, "".join(traceback.format_exception(exc)), 2.0, 1)
    text = repr(report)
    assert "\\n" not in text and "\n" not in text
    assert text.startswith("CrashReport(actor='root.w', exception=ZeroDivisionError(")
    lines = str(report).splitlines()
    assert lines[0] == "actor 'root.w' crashed at 2.000 (restarted 1 times before):"
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-1] == "ZeroDivisionError: asked to crash"


async def test_crash_reports_are_bounded_to_the_last_hundred(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    supervisor = Supervisor(
        "root", [ChildSpec("w", lambda: Logged(log))], max_restarts=1000, backoff_initial=0
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        for _ in range(120):
            await supervisor.ref("w").send("crash")
        await trio.sleep(1)
        supervisor.cancel()
    assert supervisor.stats()["restarts"] == 120
    assert len(supervisor.crash_reports) == 100
    assert supervisor.crash_reports[-1].restart_count == 119


async def test_a_failing_factory_or_started_hook_is_a_crash(
    autojump_clock: trio.abc.Clock,
) -> None:
    attempts: list[int] = []
    failures = [1]

    def flaky_factory() -> Actor:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("no socket")
        return FailsAtStart(failures)

    supervisor = Supervisor("root", [ChildSpec("w", flaky_factory)])
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        await trio.sleep(1)
        assert [type(r.exception) for r in supervisor.crash_reports] == [
            OSError,
            ConnectionError,
        ]
        assert supervisor.ref("w").stats()["state"] == "running"
        supervisor.cancel()


class _NoPort(PermanentError):
    pass


async def test_a_permanent_error_at_the_first_start_fails_the_tree_at_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A child failing with a PermanentError while the tree first starts is never retried:
    the children started before it stop, and every supervisor up to the root raises that
    error itself (not RestartIntensityExceeded) before reporting started."""
    log: list[str] = []
    builds: list[int] = []

    class NoPort(Actor):
        async def started(self) -> None:
            builds.append(1)
            raise _NoPort("no free port in 7800..7850")

    def make_inner() -> Supervisor:
        return Supervisor("inner", [ChildSpec("a", lambda: Logged(log)), ChildSpec("t", NoPort)])

    root = Supervisor("root", [ChildSpec("inner", make_inner)])
    with trio.fail_after(10), pytest.raises(_NoPort, match="no free port"):
        await root.run()
    assert builds == [1]
    assert log == ["start root.inner.a", "stop root.inner.a"]
    assert [r.actor for r in root.crash_reports] == ["root.inner"]
    assert trio.current_time() == 0


async def test_a_permanent_error_of_a_running_child_is_not_restarted(
    autojump_clock: trio.abc.Clock,
) -> None:
    class Breaks(Logged):
        async def handle(self, message: Any) -> None:
            raise _NoPort("the network is gone")

    log: list[str] = []
    root = Supervisor("root", [ChildSpec("w", lambda: Breaks(log))], max_restarts=5)
    with trio.fail_after(10), pytest.raises(ExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            await root.ref("w").send("go")
    assert info.group_contains(_NoPort, depth=1)
    assert log == ["start root.w"]
    assert root.stats()["restarts"] == 0 and len(root.crash_reports) == 1


def nested_tree(log: list[str]) -> Supervisor:
    def make_inner() -> Supervisor:
        return Supervisor("inner", [ChildSpec(n, lambda: Logged(log)) for n in "xy"])

    return Supervisor(
        "root",
        [
            ChildSpec("a", lambda: Logged(log)),
            ChildSpec("inner", make_inner),
            ChildSpec("b", lambda: Logged(log)),
        ],
    )


def all_tasks() -> set[trio.lowlevel.Task]:
    """Every task alive in this trio run."""
    found: set[trio.lowlevel.Task] = set()
    pending = [trio.lowlevel.current_root_task()]
    while pending:
        task = pending.pop()
        if task is not None:
            found.add(task)
            pending.extend(t for n in task.child_nurseries for t in n.child_tasks)
    return found


EXPECTED_STOPS = ["stop root.b", "stop root.inner.y", "stop root.inner.x", "stop root.a"]


async def test_cancel_stops_a_nested_tree_in_reverse_start_order(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    root = nested_tree(log)
    before = all_tasks()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            assert log == [
                "start root.a",
                "start root.inner.x",
                "start root.inner.y",
                "start root.b",
            ]
            log.clear()
            ref = root.ref("a")
            assert len(all_tasks()) == len(before) + 6  # root.run, a, inner, x, y, b
            root.cancel()
    assert all_tasks() == before
    assert log == EXPECTED_STOPS
    assert root.crash_reports == []
    assert root.stats()["state"] == "stopped"
    assert {c["state"] for c in root.stats()["children"].values()} == {"stopped"}
    with pytest.raises(ActorGone):
        await ref.send("late")


async def test_cancelling_the_enclosing_scope_stops_a_nested_tree_cleanly(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    root = nested_tree(log)
    with trio.move_on_after(3) as scope:
        await root.run()
    assert scope.cancelled_caught
    assert log[4:] == EXPECTED_STOPS
    assert root.crash_reports == []
    assert root.stats()["state"] == "stopped"


async def test_ref_stays_valid_across_a_restart_and_queued_messages_survive(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    built: list[Logged] = []

    def factory() -> Logged:
        built.append(Logged(log))
        return built[-1]

    supervisor = Supervisor("root", [ChildSpec("w", factory)], backoff_initial=1.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        ref = supervisor.ref("w")
        await ref.send("crash")
        await ref.send("m1")
        await trio.testing.wait_all_tasks_blocked()
        assert ref.stats()["state"] == "restarting"
        await ref.send("m2")
        assert ref.stats()["mailbox_depth"] == 2
        await trio.sleep(2)
        assert supervisor.ref("w") is ref
        assert len(built) == 2
        assert log[-2:] == ["root.w got m1", "root.w got m2"]
        assert ref.stats()["processed"] == 2
        assert ref.stats()["restarts"] == 1
        supervisor.cancel()


async def test_closing_the_mailbox_ends_only_that_incarnation(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []

    class Closer(Logged):
        async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
            with mailbox:
                self.log.append(f"got {await mailbox.receive()}")

    supervisor = Supervisor("root", [ChildSpec("w", lambda: Closer(log))])
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        await supervisor.ref("w").send(1)
        await trio.sleep(1)
        await supervisor.ref("w").send(2)
        await trio.sleep(1)
        assert [line for line in log if line.startswith("got")] == ["got 1", "got 2"]
        supervisor.cancel()


async def test_ref_of_unknown_or_supervisor_children_is_an_error(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    root = nested_tree(log)
    with pytest.raises(RuntimeError, match="has not been started yet"):
        root.ref("a")
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        with pytest.raises(KeyError, match="no child 'nope'"):
            root.ref("nope")
        with pytest.raises(TypeError, match="'inner' is a supervisor"):
            root.ref("inner")
        root.cancel()


async def test_a_factory_returning_something_else_is_a_crash(
    autojump_clock: trio.abc.Clock,
) -> None:
    def not_an_actor() -> Any:
        return object()

    supervisor = Supervisor("root", [ChildSpec("w", not_an_actor)], max_restarts=0)
    with pytest.raises(RestartIntensityExceeded) as info:
        await supervisor.run()
    (report,) = info.value.reports
    assert isinstance(report.exception, TypeError)
    assert "must return an Actor or a Supervisor, got object" in str(report.exception)


async def test_a_supervisor_runs_only_once(autojump_clock: trio.abc.Clock) -> None:
    supervisor = Supervisor("root", [])
    await supervisor.run()
    with pytest.raises(RuntimeError, match="can only run once"):
        await supervisor.run()


async def test_supervisor_stats_show_restarts_crashes_and_children(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    root = nested_tree(log)
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        await root.ref("b").send("crash")
        await trio.sleep(1)
        stats = root.stats()
        root.cancel()
    assert stats["name"] == "root"
    assert stats["strategy"] == "one_for_one"
    assert (stats["restarts"], stats["crashes"]) == (1, 1)
    children = stats["children"]
    assert children["b"]["kind"] == "actor"
    assert children["b"]["restarts"] == 1
    assert children["inner"]["kind"] == "supervisor"
    assert children["inner"]["children"]["x"]["state"] == "running"
