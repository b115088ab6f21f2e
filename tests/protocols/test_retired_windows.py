"""RetiredWindows, shared by NAKACK2 and MCAST: where a departed member's window stood."""

from __future__ import annotations

from triogroups.protocols._retired import RetiredWindows
from triogroups.testing import addresses


def test_retired_window_is_taken_once_and_the_oldest_goes_when_full() -> None:
    a, b, c = addresses("ABC")
    retired = RetiredWindows(limit=2)
    retired.remember(a, 5, [7])
    retired.remember(b, 3, [])
    retired.remember(a, 6, [])  # a left again: its newer place, now the newest entry
    retired.remember(c, 1, [])  # full: b, the oldest, is forgotten
    assert retired.take(b) is None
    assert retired.take(a) == (6, []) and retired.take(a) is None
    assert retired.take(c) == (1, []) and len(retired) == 0
