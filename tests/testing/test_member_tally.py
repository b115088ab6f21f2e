"""The member program's tally must see every way a burst can go wrong.

Otherwise the real reliability tests that rely on it would prove nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests._members.member_process import _Tally
from tests._members.processes import check_tally


def _tally(*indices: int) -> dict[str, Any]:
    tally = _Tally()
    for i in indices:
        tally.add(i)
    return tally.report()


def test_tally_of_a_whole_burst_in_order_is_clean() -> None:
    assert _tally(0, 1, 2, 3) == {
        "delivered": 4,
        "duplicates": 0,
        "out_of_order": 0,
        "first_disorder": None,
        "next": 4,
    }


def test_tally_counts_a_redelivered_index_as_a_duplicate() -> None:
    report = _tally(0, 1, 1, 2)
    assert report["duplicates"] == 1 and report["delivered"] == 4 and report["next"] == 3


def test_tally_records_the_first_index_delivered_out_of_order() -> None:
    report = _tally(0, 2, 1, 3)
    assert report["out_of_order"] == 1  # 2 came early; 1 then was the next
    assert report["first_disorder"] == [1, 2]
    assert report["next"] == 4


def test_tally_next_stops_at_the_first_missing_index() -> None:
    assert _tally(0, 1, 3, 4)["next"] == 2


def _answer(src: str, **reports: dict[str, Any]) -> dict[str, Any]:
    return {"total": sum(r["delivered"] for r in reports.values()), "senders": {src: reports}}


def test_check_tally_rejects_missing_duplicated_foreign_and_misattributed_bursts() -> None:
    check_tally("B", _answer("a", A=_tally(0, 1)), {"A": ("a", 2)})
    with pytest.raises(AssertionError, match="burst 'A'"):
        check_tally("B", _answer("a", A=_tally(0)), {"A": ("a", 2)})
    with pytest.raises(AssertionError, match="burst 'A'"):
        check_tally("B", _answer("a", A=_tally(0, 1, 1)), {"A": ("a", 2)})
    with pytest.raises(AssertionError, match="delivered bursts"):
        check_tally("B", _answer("a", A=_tally(0, 1), X=_tally(0)), {"A": ("a", 2)})
    with pytest.raises(AssertionError, match="not c"):
        check_tally("B", _answer("a", A=_tally(0, 1)), {"A": ("c", 2)})
