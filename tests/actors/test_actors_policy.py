"""The shared "restart or escalate" rules (`triogroups.actors._policy`), used by the actor
supervisor and the OS-process supervisor alike."""

from __future__ import annotations

import pytest

from triogroups.actors import Restart, Strategy
from triogroups.actors._policy import RestartIntensity, plan_restart, restarts_after


@pytest.mark.parametrize(
    ("restart", "crashed", "again"),
    [
        (Restart.PERMANENT, True, True),
        (Restart.PERMANENT, False, True),
        (Restart.TRANSIENT, True, True),
        (Restart.TRANSIENT, False, False),
        (Restart.TEMPORARY, True, False),
        (Restart.TEMPORARY, False, False),
    ],
)
def test_restart_policy_table(restart: Restart, crashed: bool, again: bool) -> None:
    """Erlang's table: permanent always, transient after a crash only, temporary never."""
    assert restarts_after(restart, crashed=crashed) is again


@pytest.mark.parametrize(
    ("strategy", "index", "again", "retire"),
    [
        (Strategy.ONE_FOR_ONE, 1, "b", ""),
        (Strategy.ONE_FOR_ALL, 1, "abd", "c"),
        (Strategy.REST_FOR_ONE, 1, "bd", "c"),
        (Strategy.REST_FOR_ONE, 3, "d", ""),
        (Strategy.ONE_FOR_ALL, 2, "abcd", ""),
    ],
)
def test_plan_restart_groups_by_strategy(
    strategy: Strategy, index: int, again: str, retire: str
) -> None:
    """Children a..e, c TEMPORARY, e ended for good: the group of the child that ended, in
    start order; a TEMPORARY sibling is retired, the ended one left alone, the child itself
    always starts again (its own policy was checked before)."""
    children = list("abcde")
    policies = {"c": Restart.TEMPORARY}
    got_again, got_retire = plan_restart(
        strategy,
        children,
        index,
        ended=lambda c: c == "e",
        restart_of=lambda c: policies.get(c, Restart.PERMANENT),
    )
    assert ("".join(got_again), "".join(got_retire)) == (again, retire)


def test_intensity_allows_max_restarts_within_the_window_then_escalates() -> None:
    """Backoff doubles per restart inside the window up to backoff_max; one restart more than
    max_restarts within `restart_window` seconds is None (escalate); old restarts slide out."""
    intensity = RestartIntensity(
        max_restarts=3,
        restart_window=10.0,
        backoff_initial=0.5,
        backoff_factor=2.0,
        backoff_max=1.5,
    )
    assert [intensity.admit(t) for t in (0.0, 1.0, 2.0)] == [0.5, 1.0, 1.5]
    assert intensity.admit(3.0) is None
    assert intensity.admit(12.5) == 1.0  # 0.0, 1.0 and 2.0 slid out; 3.0 and 12.5 remain


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_restarts": -1}, "max_restarts must be >= 0, got -1"),
        ({"restart_window": 0}, "restart_window must be > 0, got 0"),
        ({"backoff_initial": -1}, "backoff_initial must be >= 0, got -1"),
        ({"backoff_factor": 0.5}, "backoff_factor must be >= 1, got 0.5"),
        ({"backoff_max": -1}, "backoff_max must be >= 0, got -1"),
    ],
)
def test_intensity_refuses_bad_values(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RestartIntensity(**kwargs)  # type: ignore[arg-type]
