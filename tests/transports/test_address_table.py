"""The address table: logical -> physical, reverse lookup, restarts, bounds."""

from __future__ import annotations

import pytest

from triogroups import Address
from triogroups.transports._addresses import AddressTable

A, B, C = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C")))


def test_add_maps_both_ways_and_reports_changes() -> None:
    table = AddressTable()
    assert table.add(A, ("10.0.0.1", 7800))
    assert not table.add(A, ("10.0.0.1", 7800))
    assert table.get(A) == ("10.0.0.1", 7800)
    assert table.logical_at(("10.0.0.1", 7800)) == A
    assert table.add(A, ("10.0.0.1", 7801))
    assert table.logical_at(("10.0.0.1", 7800)) is None


def test_a_restarted_member_at_the_same_endpoint_replaces_the_old_one() -> None:
    table = AddressTable()
    table.add(A, ("h", 1))
    table.add(B, ("h", 1))
    assert A not in table and table.get(B) == ("h", 1) and table.logical_at(("h", 1)) == B


def test_table_is_bounded_and_evicts_the_least_recently_confirmed() -> None:
    table = AddressTable(max_entries=2)
    table.add(A, ("h", 1))
    table.add(B, ("h", 2))
    table.add(A, ("h", 1))  # confirms A: B is now the oldest
    table.add(C, ("h", 3))
    assert table.members() == [A, C] and table.evicted == 1
    assert table.logical_at(("h", 2)) is None


def test_hosts_from_outside_are_kept_once_and_shown_in_the_snapshot() -> None:
    table = AddressTable()
    table.add_hosts((("h", 1), ("h", 2), ("h", 1)))
    table.add(A, ("h", 1))
    snap = table.snapshot()
    assert snap["hosts"] == ["h:1", "h:2"]
    assert list(snap["addresses"].values()) == ["h:1"]


def test_table_needs_room_for_one_entry() -> None:
    with pytest.raises(ValueError, match="max_entries must be >= 1, got 0"):
        AddressTable(0)
