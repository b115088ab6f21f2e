"""The suite's wall-clock deadline for Trio tests (tests/_deadline.py)."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from tests._deadline import TestTimedOut, deadline_run


def test_a_hung_trio_function_is_cancelled_with_its_cleanup_run_and_fails(
    capfd: pytest.CaptureFixture[str],
) -> None:
    cleaned: list[str] = []

    async def hangs() -> None:
        async def waits_for_ever() -> None:
            await trio.sleep_forever()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(waits_for_ever, name="the-stuck-child")
        finally:
            cleaned.append("cleanup ran")

    with pytest.raises(TestTimedOut, match=r"cancelled after 0\.2 s of wall time"):
        deadline_run(0.2)(hangs)
    assert cleaned == ["cleanup ran"]
    listed = capfd.readouterr().err
    assert "still running after 0.2 s" in listed
    assert "the-stuck-child at " in listed and "waits_for_ever" in listed


def test_a_trio_function_that_returns_in_time_gives_its_result_and_leaves_no_timer() -> None:
    async def quick() -> str:
        await trio.sleep(0)
        return "done"

    assert deadline_run(60)(quick) == "done"
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    for timer in timers:
        timer.join(10)  # cancelled: it wakes and ends at once
    assert not any(t.is_alive() for t in timers)


def test_the_deadline_is_wall_time_not_the_virtual_clock_a_test_may_jump() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def sleeps_virtual_hours() -> float:
        await trio.sleep(10 * 3600)
        return trio.current_time()

    assert deadline_run(5)(sleeps_virtual_hours, clock=clock) >= 10 * 3600


def test_an_error_raised_in_time_is_raised_as_it_is() -> None:
    async def fails() -> None:
        raise ValueError("the test's own failure")

    with pytest.raises(ValueError, match="the test's own failure"):
        deadline_run(60)(fails)


async def test_this_suites_trio_tests_run_under_the_deadline(
    request: pytest.FixtureRequest,
) -> None:
    marker = request.node.get_closest_marker("trio")
    assert marker is not None and marker.kwargs["run"].__qualname__ == "deadline_run.<locals>.run"
    timeout = request.node.get_closest_marker("timeout")
    assert timeout is not None and timeout.kwargs["method"] == "thread"
