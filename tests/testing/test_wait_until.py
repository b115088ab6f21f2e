"""`triogroups.testing.wait_until`: it returns once the condition holds, polls on Trio's
clock, and on its deadline fails with a message that names what was still false."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from triogroups.testing import wait_until


async def test_wait_until_returns_once_the_predicate_becomes_true(autojump_clock: Any) -> None:
    """A task sets the flag at virtual 5 s: the wait returns then, not before, polling every
    ``interval`` (so it sees the flag within one interval of it being set)."""
    flag = False

    async def set_later() -> None:
        nonlocal flag
        await trio.sleep(5)
        flag = True

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(set_later)
        await wait_until(lambda: flag, timeout=10, interval=0.5)
    assert 5 <= trio.current_time() - start <= 5.5


async def test_wait_until_returns_at_once_if_true_already(autojump_clock: Any) -> None:
    start = trio.current_time()
    await wait_until(lambda: True)
    assert trio.current_time() == start


async def test_wait_until_fails_at_its_deadline_naming_the_lambda_and_the_state(
    autojump_clock: Any,
) -> None:
    members = ["A"]
    start = trio.current_time()
    with pytest.raises(AssertionError) as failed:
        await wait_until(
            lambda: len(members) == 2, timeout=7, message=lambda: f"members: {members}"
        )
    assert trio.current_time() - start == pytest.approx(7)
    assert str(failed.value) == ("still false after 7 s: lambda: len(members) == 2; members: ['A']")


async def test_wait_until_picks_the_lambda_that_was_passed_among_several_on_a_line(
    autojump_clock: Any,
) -> None:
    checks = [lambda: False, lambda: 1 > 2]  # two lambdas on one line
    with pytest.raises(AssertionError, match=r"still false after 1 s: lambda: 1 > 2$"):
        await wait_until(checks[1], timeout=1)


async def test_wait_until_names_a_function_and_takes_a_plain_message(autojump_clock: Any) -> None:
    def nobody_joined() -> bool:
        return False

    with pytest.raises(AssertionError) as failed:
        await wait_until(nobody_joined, timeout=2, message="the view stayed [A]")
    assert str(failed.value).endswith("nobody_joined(); the view stayed [A]")


async def test_wait_until_checks_once_more_at_the_deadline(autojump_clock: Any) -> None:
    """A condition that comes true at the deadline, between two polls, still counts."""
    calls: list[float] = []

    def true_at_the_deadline() -> bool:
        calls.append(trio.current_time())
        return calls[-1] - calls[0] >= 3

    await wait_until(true_at_the_deadline, timeout=3, interval=10)
    assert len(calls) == 2


async def test_wait_until_refuses_a_negative_interval_or_timeout() -> None:
    with pytest.raises(ValueError, match=r"timeout and interval >= 0, got 1, -0\.1"):
        await wait_until(lambda: True, timeout=1, interval=-0.1)
    with pytest.raises(ValueError, match=r"got -1, 0\.05"):
        await wait_until(lambda: True, timeout=-1)


async def test_wait_until_works_on_the_real_clock() -> None:
    """Real time, generous deadline, no duration asserted."""
    event = trio.Event()

    async def set_soon() -> None:
        await trio.sleep(0.01)
        event.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(set_soon)
        await wait_until(event.is_set, timeout=60, interval=0.005)
    assert event.is_set()
