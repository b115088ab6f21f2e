"""RingBuffer: MCAST's fixed-capacity window (seed 004: low/high, drop outside the window)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups.protocols._ring import RingBuffer


def test_ring_low_and_high_start_at_the_offset_and_capacity_is_validated() -> None:
    ring: RingBuffer[str] = RingBuffer(4, offset=10)
    assert (ring.low, ring.high, len(ring)) == (10, 10, 0)
    with pytest.raises(ValueError, match="capacity must be >= 2, got 1"):
        RingBuffer(1)
    with pytest.raises(ValueError, match="offset must be >= 0, got -1"):
        RingBuffer(4, offset=-1)


def test_ring_accepts_only_seqnos_in_low_to_low_plus_capacity() -> None:
    """Seed: a receiver drops M < low or M >= low + capacity (and M == low is delivered)."""
    ring: RingBuffer[int] = RingBuffer(4, offset=2)
    assert not ring.add(2, 2) and not ring.add(1, 1)
    assert not ring.add(6, 6) and ring.beyond(6) and not ring.beyond(5)
    assert ring.add(5, 5) and ring.add(3, 3) and not ring.add(3, 33)
    assert (ring.high, len(ring), ring.get(3), ring.get(4)) == (5, 2, 3, None)


def test_ring_remove_ready_stops_at_the_first_gap_and_moves_low() -> None:
    ring: RingBuffer[int] = RingBuffer(8)
    for s in (1, 2, 4, 5):
        ring.add(s, s)
    assert ring.remove_ready() == [1, 2] and ring.low == 2 and ring.missing() == [3]
    ring.add(3, 3)
    assert ring.remove_ready() == [3, 4, 5] and (ring.low, ring.high, len(ring)) == (5, 5, 0)


def test_ring_purge_drops_up_to_never_moves_back_and_can_skip_ahead() -> None:
    ring: RingBuffer[int] = RingBuffer(8)
    for s in range(1, 7):
        ring.add(s, s)
    assert ring.purge(4) == 4 and ring.low == 4 and ring.get(4) is None and ring.get(5) == 5
    assert ring.purge(2) == 0 and ring.low == 4
    assert ring.purge(20) == 2 and (ring.low, ring.high, len(ring)) == (20, 20, 0)


def test_ring_missing_lists_gaps_lowest_first_with_a_limit() -> None:
    ring: RingBuffer[int] = RingBuffer(16)
    for s in (2, 5, 9):
        ring.add(s, s)
    assert ring.missing() == [1, 3, 4, 6, 7, 8] and ring.missing(limit=2) == [1, 3]


def test_ring_slots_are_reused_after_wrapping_around() -> None:
    ring: RingBuffer[int] = RingBuffer(3)
    for s in range(1, 50):
        assert ring.add(s, s) and not ring.add(s + 2, 0)  # only capacity - 1 fit
        assert ring.remove_ready() == [s]
    assert len(ring._slots) == 3 and "low=49" in repr(ring)


@settings(max_examples=examples(150), deadline=None)
@given(
    capacity=st.integers(2, 9),
    ops=st.lists(
        st.tuples(st.sampled_from(["add", "ready", "purge"]), st.integers(0, 40)), max_size=80
    ),
)
def test_ring_behaves_like_a_bounded_dict_model(capacity: int, ops: list[tuple[str, int]]) -> None:
    """Against a dict model: same contents, never more than capacity - 1 items held."""
    ring: RingBuffer[int] = RingBuffer(capacity)
    model: dict[int, int] = {}
    low = high = 0
    for op, n in ops:
        if op == "add":
            ok = low < n < low + capacity and n not in model
            assert ring.add(n, n) == ok
            if ok:
                model[n] = n
                high = max(high, n)
        elif op == "ready":
            run = []
            while low + 1 in model:
                low += 1
                run.append(model.pop(low))
            assert ring.remove_ready() == run
        else:
            up_to = low + n % capacity
            dropped = [s for s in model if s <= up_to]
            assert ring.purge(up_to) == len(dropped)
            for s in dropped:
                del model[s]
            low, high = max(low, up_to), max(high, up_to)
        assert (ring.low, ring.high, len(ring)) == (low, high, len(model))
        assert len(ring) <= capacity - 1
        assert ring.missing() == [s for s in range(low + 1, high + 1) if s not in model]


def test_ring_expect_makes_the_empty_slots_up_to_a_seqno_missing_within_the_window() -> None:
    """A seqno past the window was sent after every seqno below it: ``expect`` moves
    ``high`` to it, at most to the window's last slot, so `missing` names the gaps."""
    ring: RingBuffer[int] = RingBuffer(4, offset=2)
    ring.add(4, 4)
    ring.expect(9)
    assert (ring.high, ring.missing()) == (5, [3, 5])
    ring.expect(3)  # below high: nothing changes
    assert ring.high == 5
    ring.add(3, 3)
    assert ring.remove_ready() == [3, 4] and ring.missing() == [5]
