"""The lock tests' history checker finds what it is there to find."""

from __future__ import annotations

from tests.blocks._checker import Hold, LockHistory
from triogroups import ViewId
from triogroups.testing import addresses

(A,) = addresses("A")
V1, V2 = ViewId(1, A), ViewId(2, A)


def test_checker_accepts_holds_one_after_another() -> None:
    history = LockHistory([Hold("A", "x", 1, V1, 0.0, 1.0), Hold("B", "x", 2, V1, 1.0, 2.0)])
    assert history.violations() == []


def test_checker_finds_two_owners_at_once_in_one_view() -> None:
    history = LockHistory([Hold("A", "x", 1, V1, 0.0, 2.0), Hold("B", "x", 2, V1, 1.0, 3.0)])
    (found,) = history.violations()
    assert found.startswith("x: A and B at once in ")


def test_checker_allows_overlap_in_different_views_but_not_a_smaller_token() -> None:
    """A split without majority mode: both sides may hold x in their own views; tokens
    must still grow in the order the grants arrived."""
    history = LockHistory([Hold("A", "x", 5, V1, 0.0, None), Hold("B", "x", 3, V2, 1.0, 2.0)])
    assert history.violations() == ["x: token 3 of B after 5"]


def test_checker_finds_a_lock_given_away_while_its_owner_is_still_a_member() -> None:
    history = LockHistory(
        [
            Hold("A", "x", 1, V1, 0.0, None, frozenset("AB")),
            Hold("B", "x", 2, V2, 1.0, 2.0, frozenset("AB")),
        ]
    )
    (found,) = history.violations()
    assert "A and B at once" in found
