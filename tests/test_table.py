"""SeqnoTable: the window every reliable protocol keeps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from triogroups.protocols._table import SeqnoTable


def test_add_rejects_delivered_and_duplicate_seqnos() -> None:
    t: SeqnoTable[str] = SeqnoTable(offset=5)
    assert not t.add(5, "old") and t.add(6, "a") and not t.add(6, "again")
    assert t.hd == 5 and t.hr == 6 and len(t) == 1


def test_remove_ready_stops_at_the_first_gap() -> None:
    t: SeqnoTable[int] = SeqnoTable()
    for s in (1, 2, 4, 5):
        t.add(s, s)
    assert t.remove_ready() == [1, 2] and t.hd == 2
    assert t.missing() == [3] and not t.has_ready()
    t.add(3, 3)
    assert t.remove_ready(limit=2) == [3, 4] and t.remove_ready() == [5] and t.hd == 5


def test_purge_drops_up_to_and_moves_hd_forward_only() -> None:
    t: SeqnoTable[int] = SeqnoTable()
    for s in range(1, 11):
        t.add(s, s)
    assert t.purge(4) == 4 and t.hd == 4 and t.lowest() == 5
    assert t.purge(3) == 0 and t.hd == 4
    assert t.purge(20) == 6 and t.hd == 20 and t.hr == 20 and len(t) == 0


def test_missing_lists_gaps_lowest_first_with_a_limit() -> None:
    t: SeqnoTable[int] = SeqnoTable()
    for s in (2, 5, 9):
        t.add(s, s)
    assert t.missing() == [1, 3, 4, 6, 7, 8] and t.missing(limit=2) == [1, 3]


@given(st.lists(st.integers(1, 60), max_size=200))
def test_any_arrival_order_delivers_each_seqno_once_in_order(arrivals: list[int]) -> None:
    t: SeqnoTable[int] = SeqnoTable()
    delivered: list[int] = []
    for s in arrivals:
        t.add(s, s)
        delivered.extend(t.remove_ready())
    assert delivered == list(range(1, len(delivered) + 1))
    assert set(t.missing()) | set(s for s, _ in t.items()) == set(range(t.hd + 1, t.hr + 1))


@given(
    st.lists(st.integers(1, 40), max_size=60),
    st.lists(st.integers(-2, 50), min_size=1, max_size=4),
)
def test_purge_drops_exactly_the_stored_seqnos_up_to_with_or_without_gaps(
    arrivals: list[int], purges: list[int]
) -> None:
    """Gapless tables (a sender's) take a shortcut in `purge`; both ways drop what a
    plain model drops, return its count, and leave hd/hr where the model says."""
    t: SeqnoTable[int] = SeqnoTable()
    for s in arrivals:
        t.add(s, s)
    stored = {s for s, _ in t.items()}
    hd, hr = t.hd, t.hr
    for up_to in purges:
        gone = {s for s in stored if s <= up_to}
        assert t.purge(up_to) == (len(gone) if up_to > hd else 0)
        stored -= gone if up_to > hd else set()
        hd, hr = max(hd, up_to), max(hr, up_to) if up_to > hd else hr
        assert (t.hd, t.hr, {s for s, _ in t.items()}) == (hd, hr, stored)


def test_purge_of_a_gapless_sender_table_beyond_hr_drops_all() -> None:
    t: SeqnoTable[int] = SeqnoTable(offset=3)
    t.append_run([4, 5, 6])
    assert t.purge(5) == 2 and list(t.items()) == [(6, 6)]
    assert t.purge(9) == 1 and len(t) == 0 and (t.hd, t.hr) == (9, 9)


@given(
    offset=st.integers(0, 50),
    runs=st.lists(st.lists(st.integers(), max_size=4), max_size=6),
    purge_at=st.integers(0, 80),
)
def test_append_run_stores_each_item_as_add_would(
    offset: int, runs: list[list[int]], purge_at: int
) -> None:
    """A sender's runs (one message, the usual unicast request or answer, or several) land
    at the next seqnos exactly as one `add` each after ``hr`` would put them."""
    fast: SeqnoTable[int] = SeqnoTable(offset=offset)
    plain: SeqnoTable[int] = SeqnoTable(offset=offset)
    for run in runs:
        first = fast.append_run(run)
        assert first == plain.hr + 1
        for i, item in enumerate(run):
            assert plain.add(first + i, item)
        assert list(fast.items()) == list(plain.items())
        assert (fast.hd, fast.hr, len(fast)) == (plain.hd, plain.hr, len(plain))
    assert fast.purge(purge_at) == plain.purge(purge_at)
    assert list(fast.items()) == list(plain.items()) and fast.hr == plain.hr
