"""Restart intensity (sliding window on the trio clock), escalation and restart backoff."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from triogroups.actors import (
    Actor,
    ChildSpec,
    Restart,
    RestartIntensityExceeded,
    Strategy,
    Supervisor,
)


class Scheduled:
    """Factory of actors whose k-th incarnation crashes at absolute time ``crash_at[k]``.

    Incarnations beyond the schedule run until cancelled. Start times are recorded.
    """

    def __init__(self, *crash_at: float) -> None:
        self.crash_at = list(crash_at)
        self.starts: list[float] = []

    def __call__(self) -> Actor:
        k = len(self.starts)
        deadline = self.crash_at[k] if k < len(self.crash_at) else None
        return _Crasher(self.starts, deadline)


class _Crasher(Actor):
    def __init__(self, starts: list[float], deadline: float | None) -> None:
        self.starts = starts
        self.deadline = deadline

    async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
        self.starts.append(trio.current_time())
        if self.deadline is None:
            await trio.sleep_forever()
        await trio.sleep_until(self.deadline)
        raise RuntimeError(f"scheduled crash at {self.deadline}")


def no_backoff(**kwargs: Any) -> dict[str, Any]:
    return {"backoff_initial": 0.0, **kwargs}


async def run_for(supervisor: Supervisor, seconds: float) -> None:
    """Run *supervisor* for *seconds* of virtual time; it must not raise."""
    with trio.move_on_after(seconds):
        await supervisor.run()


async def test_exactly_max_restarts_within_the_window_are_allowed(
    autojump_clock: trio.abc.Clock,
) -> None:
    crasher = Scheduled(1, 2, 3)
    supervisor = Supervisor(
        "root", [ChildSpec("w", crasher)], **no_backoff(max_restarts=3, restart_window=5)
    )
    await run_for(supervisor, 10)
    assert supervisor.stats()["restarts"] == 3
    assert len(crasher.starts) == 4


async def test_one_restart_more_than_max_within_the_window_escalates(
    autojump_clock: trio.abc.Clock,
) -> None:
    crasher = Scheduled(1, 2, 3, 4)
    supervisor = Supervisor(
        "root", [ChildSpec("w", crasher)], **no_backoff(max_restarts=3, restart_window=5)
    )
    with pytest.raises(RestartIntensityExceeded, match="max_restarts=3") as info:
        await run_for(supervisor, 10)
    assert trio.current_time() == pytest.approx(4)
    assert info.value.supervisor == "root"
    assert [report.time for report in info.value.reports] == pytest.approx([1, 2, 3, 4])
    assert {report.actor for report in info.value.reports} == {"root.w"}
    assert supervisor.stats()["state"] == "failed"
    assert supervisor.stats()["children"]["w"]["state"] == "stopped"


async def test_zero_max_restarts_escalates_on_the_first_crash(
    autojump_clock: trio.abc.Clock,
) -> None:
    supervisor = Supervisor("root", [ChildSpec("w", Scheduled(1))], max_restarts=0)
    with pytest.raises(RestartIntensityExceeded):
        await run_for(supervisor, 10)
    assert trio.current_time() == pytest.approx(1)


async def test_restarts_spread_beyond_the_window_do_not_escalate(
    autojump_clock: trio.abc.Clock,
) -> None:
    crasher = Scheduled(1, 4, 7, 10, 13, 16)
    supervisor = Supervisor(
        "root", [ChildSpec("w", crasher)], **no_backoff(max_restarts=2, restart_window=5)
    )
    await run_for(supervisor, 20)
    assert supervisor.stats()["restarts"] == 6


async def test_the_same_restarts_closer_together_escalate(autojump_clock: trio.abc.Clock) -> None:
    """Control for the spread test: three restarts inside one 5 s window."""
    crasher = Scheduled(1, 3, 5)
    supervisor = Supervisor(
        "root", [ChildSpec("w", crasher)], **no_backoff(max_restarts=2, restart_window=5)
    )
    with pytest.raises(RestartIntensityExceeded):
        await run_for(supervisor, 20)
    assert trio.current_time() == pytest.approx(5)


async def test_a_group_restart_counts_once(autojump_clock: trio.abc.Clock) -> None:
    crasher = Scheduled(1, 2)
    bystanders = [ChildSpec(name, Scheduled()) for name in "abc"]
    supervisor = Supervisor(
        "root",
        [ChildSpec("w", crasher), *bystanders],
        strategy=Strategy.ONE_FOR_ALL,
        **no_backoff(max_restarts=2, restart_window=5),
    )
    await run_for(supervisor, 10)
    assert supervisor.stats()["restarts"] == 2


async def test_normal_returns_of_permanent_children_count_towards_intensity(
    autojump_clock: trio.abc.Clock,
) -> None:
    class Quitter(Actor):
        async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
            await trio.sleep(1)

    supervisor = Supervisor("root", [ChildSpec("q", Quitter)], **no_backoff(max_restarts=2))
    with pytest.raises(RestartIntensityExceeded) as info:
        await run_for(supervisor, 10)
    assert info.value.reports == []
    assert trio.current_time() == pytest.approx(3)


async def test_backoff_doubles_with_each_restart_in_the_window(
    autojump_clock: trio.abc.Clock,
) -> None:
    crasher = Scheduled(0, 0, 0, 0, 0)
    supervisor = Supervisor(
        "root",
        [ChildSpec("w", crasher)],
        max_restarts=10,
        restart_window=100,
        backoff_initial=0.01,
        backoff_factor=2.0,
        backoff_max=1.0,
    )
    await run_for(supervisor, 10)
    assert crasher.starts == pytest.approx([0, 0.01, 0.03, 0.07, 0.15, 0.31])


async def test_backoff_is_capped_at_backoff_max(autojump_clock: trio.abc.Clock) -> None:
    crasher = Scheduled(0, 0, 0, 0)
    supervisor = Supervisor(
        "root",
        [ChildSpec("w", crasher)],
        max_restarts=10,
        restart_window=100,
        backoff_initial=0.25,
        backoff_factor=3.0,
        backoff_max=1.0,
    )
    await run_for(supervisor, 10)
    assert crasher.starts == pytest.approx([0, 0.25, 1.0, 2.0, 3.0])


async def test_backoff_starts_over_once_the_window_is_empty(
    autojump_clock: trio.abc.Clock,
) -> None:
    crasher = Scheduled(0, 5)
    supervisor = Supervisor(
        "root",
        [ChildSpec("w", crasher)],
        restart_window=1,
        backoff_initial=0.01,
        backoff_factor=2.0,
    )
    await run_for(supervisor, 10)
    assert crasher.starts == pytest.approx([0, 0.01, 5.01])


async def test_escalation_stops_siblings_in_reverse_order_and_runs_their_stopped_hooks(
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []

    class Sibling(Actor):
        async def stopped(self) -> None:
            log.append(f"stop {self.name}")

    supervisor = Supervisor(
        "root",
        [ChildSpec("a", Sibling), ChildSpec("w", Scheduled(1)), ChildSpec("b", Sibling)],
        max_restarts=0,
    )
    with pytest.raises(RestartIntensityExceeded):
        await run_for(supervisor, 10)
    assert log == ["stop root.b", "stop root.a"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_restarts": -1}, "max_restarts must be >= 0, got -1"),
        ({"restart_window": 0}, "restart_window must be > 0, got 0"),
        ({"backoff_initial": -0.5}, "backoff_initial must be >= 0, got -0.5"),
        ({"backoff_factor": 0.5}, "backoff_factor must be >= 1, got 0.5"),
        ({"backoff_max": -1.0}, r"backoff_max must be >= 0, got -1.0"),
    ],
)
def test_supervisor_rejects_bad_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Supervisor("root", [], **kwargs)


def test_supervisor_rejects_duplicate_child_names() -> None:
    with pytest.raises(ValueError, match="child names must be unique, got 'w' twice"):
        Supervisor("root", [ChildSpec("w", Scheduled()), ChildSpec("w", Scheduled())])


def test_supervisor_rejects_a_strategy_that_is_not_a_strategy() -> None:
    with pytest.raises(TypeError, match="strategy must be a Strategy"):
        Supervisor("root", [], strategy="one_for_one")  # type: ignore[arg-type]


def test_strategy_and_restart_values_are_config_strings() -> None:
    assert Strategy("rest_for_one") is Strategy.REST_FOR_ONE
    assert [r.value for r in Restart] == ["permanent", "transient", "temporary"]


def test_child_spec_rejects_an_empty_name() -> None:
    with pytest.raises(ValueError, match="child name must not be empty"):
        ChildSpec("", Scheduled())
