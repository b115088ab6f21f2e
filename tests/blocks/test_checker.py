"""The lock, counter and singleton tests' checkers find what they are there to find."""

from __future__ import annotations

from tests.blocks._checker import Run, SingletonHistory
from triogroups import View, ViewId
from triogroups.testing import addresses
from triogroups.testing._block_rules import (
    CounterCall,
    Hold,
    Increment,
    LockHistory,
    counter_violations,
)

(A,) = addresses("A")
V1, V2 = ViewId(1, A), ViewId(2, A)


def test_checker_accepts_holds_one_after_another() -> None:
    history = LockHistory([Hold("A", "x", 1, V1, 0.0, 1.0), Hold("B", "x", 2, V1, 1.0, 2.0)])
    assert history.violations() == []


def test_checker_finds_two_owners_at_once_in_one_view() -> None:
    history = LockHistory([Hold("A", "x", 1, V1, 0.0, 2.0), Hold("B", "x", 2, V1, 1.0, 3.0)])
    (found,) = history.violations()
    assert found.startswith("x: A and B held it at once in ")


def test_checker_allows_overlap_in_different_views_but_not_a_smaller_token() -> None:
    """A split without majority mode: both sides may hold x in their own views; tokens
    must still grow in the order the grants arrived."""
    history = LockHistory([Hold("A", "x", 5, V1, 0.0, None), Hold("B", "x", 3, V2, 1.0, 2.0)])
    assert history.violations() == ["x: token 3 of B after 5 of A"]


def test_checker_finds_a_lock_given_away_while_its_owner_is_still_a_member() -> None:
    history = LockHistory(
        [
            Hold("A", "x", 1, V1, 0.0, None, frozenset("AB")),
            Hold("B", "x", 2, V2, 1.0, 2.0, frozenset("AB")),
        ]
    )
    (found,) = history.violations()
    assert "A and B held it at once" in found


def test_counter_checker_finds_an_add_applied_twice_only_when_the_calls_are_known() -> None:
    """Two calls of +1, one answered 3 (its own call applied twice, or the other's): the
    calls add up to 2, so counter_doubled; the same answers without the calls pass,
    and one more call that may have taken effect (it timed out) makes 3 possible."""
    incs = [Increment("A", "n", 1, 0.0, 1.0), Increment("B", "n", 3, 2.0, 3.0)]
    calls = [CounterCall("A", "n", 1, 0.0), CounterCall("B", "n", 1, 2.0)]
    found = counter_violations(incs, calls)
    assert [(rule, pair[1].caller) for rule, _, pair in found] == [("counter_doubled", "B")]
    assert counter_violations(incs) == []
    timed_out = CounterCall("C", "n", 1, 2.5)
    assert counter_violations(incs, [*calls, timed_out]) == []
    late = CounterCall("C", "n", 1, 3.5)  # made after B's answer: no part of its value
    assert [rule for rule, _, _ in counter_violations(incs, [*calls, late])] == ["counter_doubled"]


def test_counter_checker_adds_the_calls_deltas() -> None:
    incs = [Increment("A", "n", 5, 0.0, 1.0), Increment("A", "m", 2, 0.0, 1.0)]
    calls = [CounterCall("A", "n", 5, 0.0), CounterCall("A", "m", 1, 0.0)]
    assert [text for _, text, _ in counter_violations(incs, calls)] == [
        "m: A got 2, more than the 1 added by the calls made before it was answered: "
        "an add applied twice"
    ]


def _view(number: int, *names: str) -> View:
    members = [_BY_NAME[name] for name in names]
    return View(ViewId(number, members[0]), members)


_BY_NAME = dict(zip("ABC", addresses("ABC"), strict=True))


def _singleton_history(
    runs: list[Run], views: dict[str, list[tuple[float, View]]]
) -> SingletonHistory:
    return SingletonHistory(runs, views)


def test_singleton_checker_accepts_a_hand_over_at_one_instant() -> None:
    """A stops at 5.0 as B installs the view that makes it coordinator and starts."""
    v1, v2 = _view(1, "A", "B"), _view(2, "B")
    history = _singleton_history(
        [Run("A", 0.0, v1, 5.0), Run("B", 5.0, v2)],
        {"A": [(0.0, v1)], "B": [(0.0, v1), (5.0, v2)]},
    )
    assert history.violations() == []


def test_singleton_checker_finds_two_at_once_in_one_view() -> None:
    v1 = _view(1, "A", "B")
    history = _singleton_history(
        [Run("A", 0.0, v1, 5.0), Run("B", 1.0, v1)],
        {"A": [(0.0, v1)], "B": [(0.0, v1)]},
    )
    assert any("A and B ran it at once" in v for v in history.violations())
    assert any("B started it" in v and "non-coordinator" in v for v in history.violations())


def test_singleton_checker_allows_one_per_side_of_a_split_but_not_after_the_merge() -> None:
    """A and C run one each while split; once C installed the merged view led by A and
    has not stopped a moment later, that is two in one view, and C runs on as a
    non-coordinator."""
    ab, c, merged = _view(1, "A", "B"), _view(2, "C"), _view(3, "A", "B", "C")
    split = {"A": [(0.0, ab)], "C": [(0.0, c)]}
    ok = _singleton_history([Run("A", 0.0, ab), Run("C", 0.0, c, 4.0)], split)
    assert ok.violations() == []
    late = _singleton_history(
        [Run("A", 0.0, ab), Run("C", 0.0, c, 6.0)],
        {"A": [(0.0, ab), (4.0, merged)], "C": [(0.0, c), (4.0, merged)]},
    )
    found = late.violations()
    assert any("C still ran it at 4.0" in v for v in found)
    assert any("A and C ran it at once" in v or "C and A ran it at once" in v for v in found)


def test_singleton_checker_finds_two_runs_on_one_member() -> None:
    v1 = _view(1, "A")
    history = _singleton_history([Run("A", 0.0, v1), Run("A", 1.0, v1, 2.0)], {"A": [(0.0, v1)]})
    assert history.violations() == ["A ran it twice at once from 1.0"]
