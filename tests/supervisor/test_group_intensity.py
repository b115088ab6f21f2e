"""A process group's restart window runs on its running time (issue 38 item 1): a member
that crashes as it starts is given up on after ``MAX_RESTARTS`` restarts however long a start
takes, and one that ran longer than the window between crashes is restarted each time. Sans-IO,
on explicit times: the rule, not the machine's speed."""

from __future__ import annotations

import pytest

from triogroups.actors._policy import RestartIntensity
from triogroups.supervisor._intensity import MAX_RESTARTS, RESTART_WINDOW, GroupIntensity


def _defaults() -> GroupIntensity:
    """The intensity `triogroups launch` and `open_process_group` use by default."""
    return GroupIntensity(
        RestartIntensity(
            max_restarts=MAX_RESTARTS,
            restart_window=RESTART_WINDOW,
            backoff_initial=0.1,
            backoff_factor=2.0,
            backoff_max=5.0,
        )
    )


def _crashes_until_given_up(start_cost: float, runs_for: float, limit: int = 100) -> int | None:
    """Start a member (``start_cost`` seconds until it joined), let it run ``runs_for``
    seconds, crash, restart after the backoff, and so on, as the supervisor does: how many
    crashes until the group gives up (None: not within ``limit``)."""
    intensity = _defaults()
    now = 0.0
    intensity.starting(now)
    now += start_cost
    intensity.started(now)
    for crash in range(1, limit + 1):
        now += runs_for
        backoff = intensity.admit(now)
        if backoff is None:
            return crash
        intensity.starting(now)  # the backoff and the start do not count
        now += backoff + start_cost
        intensity.started(now)
    return None


@pytest.mark.parametrize("start_cost", [0.5, 3.5, 30.0, 600.0])
def test_a_crash_loop_is_given_up_on_after_max_restarts_however_slow_a_start_is(
    start_cost: float,
) -> None:
    """A restart costs ~3.5 s on a busy 2-core machine; on the wall clock "3 restarts
    within 5 s" never tripped. On running time the 4th crash gives up, whatever the cost."""
    assert _crashes_until_given_up(start_cost, runs_for=0.05) == MAX_RESTARTS + 1


def test_a_member_that_runs_longer_than_the_window_between_crashes_is_always_restarted() -> None:
    assert _crashes_until_given_up(3.5, runs_for=RESTART_WINDOW + 1) is None


def test_crashes_inside_the_window_of_running_time_give_up_even_if_spread_by_slow_starts() -> None:
    """Crashes every 7 s of running time, each start costing a minute of wall time: four
    crashes within 30 s of running time give up, though they span three minutes."""
    assert _crashes_until_given_up(60.0, runs_for=7.0) == MAX_RESTARTS + 1
    assert _crashes_until_given_up(60.0, runs_for=11.0) is None  # 3 crashes per 30 s at most


def test_running_time_leaves_out_every_start_and_counts_nested_starts_once() -> None:
    intensity = _defaults()
    assert intensity.running_time(100.0) == 0.0
    intensity.starting(110.0)  # 10 s ran
    intensity.starting(112.0)  # a second start while the first runs
    intensity.started(115.0)
    assert intensity.running_time(118.0) == 10.0  # still starting
    intensity.started(120.0)
    assert intensity.running_time(125.0) == 15.0
    with pytest.raises(RuntimeError, match="started"):
        intensity.started(126.0)


def test_the_horizon_is_the_time_of_the_oldest_restart_still_in_the_window() -> None:
    """The give-up reports the crashes from the oldest restart in the window on: in the
    caller's time, which a slow start stretches past ``restart_window`` seconds ago."""
    intensity = _defaults()
    for t in (0.0, 100.0, 200.0):
        assert intensity.admit(t) is not None
        intensity.starting(t)
        intensity.started(t + 99.0)
    assert intensity.admit(300.0) is None
    assert intensity.horizon() == 0.0
