"""Restart strategies, restart policies and the before_restart hook of a Supervisor."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from triogroups.actors import (
    Actor,
    ActorGone,
    ChildSpec,
    Restart,
    Strategy,
    Supervisor,
)


class Worker(Actor):
    """Logs its hooks; "crash" makes it raise, "exit" makes it return normally."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def started(self) -> None:
        self.log.append(f"start {self.name}")

    async def stopped(self) -> None:
        self.log.append(f"stop {self.name}")

    async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
        async for message in mailbox:
            if message == "crash":
                raise ValueError(f"{self.name} was told to crash")
            if message == "exit":
                return
            self.log.append(f"{self.name} got {message}")


def specs(
    log: list[str], names: str, restart: Restart = Restart.PERMANENT
) -> tuple[list[ChildSpec], dict[str, list[Worker]]]:
    """Child specs for *names*, and every instance each factory built, per name."""
    built: dict[str, list[Worker]] = {name: [] for name in names}

    def factory(name: str) -> Callable[[], Worker]:
        def make() -> Worker:
            worker = Worker(log)
            built[name].append(worker)
            return worker

        return make

    return [ChildSpec(name, factory(name), restart) for name in names], built


@asynccontextmanager
async def running(supervisor: Supervisor) -> AsyncIterator[Supervisor]:
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        yield supervisor
        supervisor.cancel()


async def test_children_start_in_order_each_after_the_previous_started(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []

    class Slow(Worker):
        async def started(self) -> None:
            await trio.sleep(1)
            await super().started()

    def make(name: str) -> Callable[[], Worker]:
        def factory() -> Worker:
            log.append(f"make {name}")
            return Slow(log)

        return factory

    supervisor = Supervisor("root", [ChildSpec(n, make(n)) for n in "ab"])
    async with running(supervisor):
        assert log == ["make a", "start root.a", "make b", "start root.b"]
        assert trio.current_time() == pytest.approx(2.0)


async def test_one_for_one_restarts_only_the_crashed_child(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    children, built = specs(log, "abc")
    async with running(Supervisor("root", children)) as supervisor:
        log.clear()
        await supervisor.ref("b").send("crash")
        await trio.sleep(1)
        assert log == ["start root.b"]
        assert [len(built[n]) for n in "abc"] == [1, 2, 1]
        await supervisor.ref("a").send("ping")
        await supervisor.ref("c").send("ping")
        await trio.sleep(1)
        assert log[1:] == ["root.a got ping", "root.c got ping"]
        assert supervisor.ref("b").stats()["restarts"] == 1
        assert supervisor.ref("a").stats()["restarts"] == 0


async def test_one_for_all_stops_the_others_in_reverse_order_then_starts_all_in_order(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    children, built = specs(log, "abc")
    supervisor = Supervisor("root", children, strategy=Strategy.ONE_FOR_ALL)
    async with running(supervisor):
        log.clear()
        await supervisor.ref("b").send("crash")
        await trio.sleep(1)
        assert log == [
            "stop root.c",
            "stop root.a",
            "start root.a",
            "start root.b",
            "start root.c",
        ]
        assert [len(built[n]) for n in "abc"] == [2, 2, 2]


async def test_rest_for_one_restarts_the_crashed_child_and_those_started_after_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    children, built = specs(log, "abcd")
    supervisor = Supervisor("root", children, strategy=Strategy.REST_FOR_ONE)
    async with running(supervisor):
        log.clear()
        await supervisor.ref("b").send("crash")
        await trio.sleep(1)
        assert log == [
            "stop root.d",
            "stop root.c",
            "start root.b",
            "start root.c",
            "start root.d",
        ]
        assert [len(built[n]) for n in "abcd"] == [1, 2, 2, 2]


async def test_rest_for_one_crash_of_the_last_child_restarts_only_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    children, built = specs(log, "abc")
    supervisor = Supervisor("root", children, strategy=Strategy.REST_FOR_ONE)
    async with running(supervisor):
        log.clear()
        await supervisor.ref("c").send("crash")
        await trio.sleep(1)
        assert log == ["start root.c"]
        assert [len(built[n]) for n in "abc"] == [1, 1, 2]


@pytest.mark.parametrize(
    ("strategy", "crashing", "expected"),
    [
        (Strategy.ONE_FOR_ONE, "b", ["b"]),
        (Strategy.ONE_FOR_ALL, "b", ["a", "b", "c"]),
        (Strategy.REST_FOR_ONE, "b", ["b", "c"]),
    ],
)
async def test_before_restart_gets_the_names_about_to_start_before_any_factory_runs(
    autojump_clock: trio.abc.Clock, strategy: Strategy, crashing: str, expected: list[str]
) -> None:
    log: list[str] = []
    children, _ = specs(log, "abc")
    calls: list[list[str]] = []

    def before_restart(names: list[str]) -> None:
        calls.append(names)
        log.append("before_restart")

    supervisor = Supervisor("root", children, strategy=strategy, before_restart=before_restart)
    async with running(supervisor):
        assert calls == []
        log.clear()
        await supervisor.ref(crashing).send("crash")
        await trio.sleep(1)
        assert calls == [expected]
        first_start = next(i for i, line in enumerate(log) if line.startswith("start"))
        assert log.index("before_restart") == first_start - 1


async def test_one_for_all_does_not_restart_a_temporary_sibling(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    children, built = specs(log, "ab")
    temporary, temp_built = specs(log, "t", Restart.TEMPORARY)
    supervisor = Supervisor("root", [*children, *temporary], strategy=Strategy.ONE_FOR_ALL)
    async with running(supervisor):
        await supervisor.ref("a").send("crash")
        await trio.sleep(1)
        assert [len(built[n]) for n in "ab"] == [2, 2]
        assert len(temp_built["t"]) == 1
        with pytest.raises(ActorGone):
            await supervisor.ref("t").send("ping")


async def test_permanent_child_is_restarted_after_a_normal_return(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    children, built = specs(log, "a")
    async with running(Supervisor("root", children)) as supervisor:
        await supervisor.ref("a").send("exit")
        await trio.sleep(1)
        assert len(built["a"]) == 2
        assert supervisor.crash_reports == []
        assert supervisor.ref("a").stats()["state"] == "running"


async def test_transient_child_is_restarted_after_a_crash_but_not_after_a_return(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    children, built = specs(log, "ab", Restart.TRANSIENT)
    async with running(Supervisor("root", children)) as supervisor:
        await supervisor.ref("a").send("crash")
        await supervisor.ref("b").send("exit")
        await trio.sleep(1)
        assert len(built["a"]) == 2
        assert len(built["b"]) == 1
        assert supervisor.ref("b").stats()["state"] == "stopped"
        with pytest.raises(ActorGone):
            await supervisor.ref("b").send("ping")


async def test_temporary_child_is_never_restarted(autojump_clock: trio.abc.Clock) -> None:
    log: list[str] = []
    children, built = specs(log, "ab", Restart.TEMPORARY)
    async with running(Supervisor("root", children)) as supervisor:
        await supervisor.ref("a").send("crash")
        await trio.sleep(1)
        assert len(built["a"]) == 1
        assert len(supervisor.crash_reports) == 1
        with pytest.raises(ActorGone):
            supervisor.ref("a").send_nowait("ping")
        await supervisor.ref("b").send("ping")
        await trio.sleep(1)
        assert "root.b got ping" in log


async def test_run_returns_when_every_child_ended_for_good(autojump_clock: trio.abc.Clock) -> None:
    log: list[str] = []
    children, _ = specs(log, "ab", Restart.TRANSIENT)
    supervisor = Supervisor("root", children)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run)
            await supervisor.ref("a").send("exit")
            await supervisor.ref("b").send("exit")
    assert supervisor.stats()["state"] == "stopped"
