"""The counter service's rules, sans-IO: `CounterTable`, `CounterCopy`, `rebuild_counters`."""

from __future__ import annotations

import pytest

from triogroups.blocks._countertable import (
    Caller,
    CounterCopy,
    CounterEntry,
    CounterReport,
    CounterTable,
    StaleUpdate,
    rebuild_counters,
)
from triogroups.testing import addresses

A, B, C, D = addresses("ABCD")
a, b = A.to_bytes(), B.to_bytes()


def by(member: bytes, seqno: int, done_below: int | None = None) -> Caller:
    """An update ``seqno`` of ``member``, with every earlier one answered by default."""
    return Caller(member, seqno, seqno if done_below is None else done_below)


def test_operations() -> None:
    t = CounterTable()
    assert t.get("n") == 0
    assert t.add_and_get("n", 5, by(a, 1)) == 5
    assert t.add_and_get("n", -2, by(b, 1)) == 3
    assert t.compare_and_set("n", 4, 10, by(a, 2)) is False
    assert t.compare_and_set("n", 3, 10, by(a, 3)) is True
    t.set("n", 7, by(b, 2))
    assert t.get("n") == 7


def test_updates_in_flight_at_once_are_each_remembered_until_answered() -> None:
    """A member with three updates in flight: each one resent is answered from memory;
    what its ``done_below`` says was answered is forgotten with its next update."""
    t = CounterTable()
    assert t.add_and_get("n", 1, by(a, 1, 1)) == 1
    assert t.add_and_get("n", 1, by(a, 2, 1)) == 2
    assert t.add_and_get("n", 1, by(a, 3, 1)) == 3
    assert t.add_and_get("n", 1, by(a, 2, 1)) == 2
    assert t.add_and_get("n", 1, by(a, 1, 1)) == 1
    assert t.get("n") == 3
    assert t.add_and_get("n", 1, by(a, 4, 3)) == 4
    assert set(t.counters["n"].last[a]) == {3, 4}


def test_a_resent_update_is_answered_again_not_applied_twice() -> None:
    """The old coordinator copied the update and crashed before answering: the caller
    asks the new one with the same seqno."""
    t = CounterTable()
    assert t.add_and_get("n", 1, by(a, 1)) == 1
    assert t.add_and_get("n", 1, by(b, 1)) == 2
    assert t.add_and_get("n", 1, by(a, 1)) == 1
    assert t.get("n") == 2
    assert t.add_and_get("n", 1, by(a, 2)) == 3


def test_versions_grow_and_changes_go_to_the_outbox() -> None:
    t = CounterTable()
    t.add_and_get("n", 1, by(a, 1))
    t.add_and_get("m", 1, by(a, 2))
    out = t.take_outbox()
    assert [(e.name, e.value, e.version) for e in out] == [("n", 1, 1), ("m", 1, 2)]
    assert t.take_outbox() == []


def test_a_departed_members_answers_are_kept_for_keep_departed_then_forgotten() -> None:
    """A view without A starts A's time; its answers go only ``keep_departed`` seconds
    later, with a new version of each counter that held them (to the backups)."""
    t = CounterTable(keep_departed=20.0)
    t.add_and_get("n", 1, by(a, 1))
    t.add_and_get("n", 1, by(b, 1))
    t.take_outbox()
    t.install_view([B], now=100.0)
    t.install_view([B, C], now=110.0)  # a later view does not start A's time again
    t.expire(119.9)
    assert set(t.counters["n"].last) == {a, b}
    assert t.take_outbox() == []
    assert t.add_and_get("n", 1, by(a, 1)) == 1  # a resend: answered, not applied
    t.expire(120.0)
    assert set(t.counters["n"].last) == {b}
    assert [(e.name, e.value, e.version) for e in t.take_outbox()] == [("n", 2, 3)]
    assert t.departed == {}


def test_a_member_back_in_the_view_in_time_keeps_its_answers() -> None:
    """A merge that lists A again before its time is up: A is no longer departed, and
    its answers live by the usual rule (until its next update says it has them)."""
    t = CounterTable(keep_departed=20.0)
    t.add_and_get("n", 1, by(a, 1))
    t.install_view([B], now=0.0)
    t.install_view([A, B], now=5.0)
    t.expire(1000.0)
    assert t.add_and_get("n", 1, by(a, 1)) == 1
    assert t.get("n") == 1


def test_a_dropped_members_resend_after_a_merge_is_answered_whichever_copy_is_rebuilt() -> None:
    """D, coordinator, applies C's increment and copies it to B; C's answer is lost and
    D installs a view without C. A merge takes C back; the merge's rebuild gets D's own
    table and B's copy, of one version: whichever it picks, C's resend is answered from
    memory (1), not applied again (2). D's table used to forget C's answers with the
    view that dropped it, so the rebuild kept them only when it picked B's copy."""
    c = C.to_bytes()
    coord = CounterTable()
    assert coord.add_and_get("n", 1, by(c, 1)) == 1
    backup = CounterCopy()
    backup.apply(coord.take_outbox())
    coord.install_view([D, B], now=1.0)
    assert coord.take_outbox() == []
    mine = CounterReport(D, coord.entries())
    copied = CounterReport(B, list(backup.entries.values()))
    for order in ([mine, copied], [copied, mine]):
        t = rebuild_counters({r.member: r for r in order}, side=[D, B])
        t.install_view([B, C, D], now=5.0)
        assert t.add_and_get("n", 1, by(c, 1)) == 1
        assert t.get("n") == 1


def test_a_stale_resend_below_done_below_is_not_applied_also_after_a_rebuild() -> None:
    """Campaign udp-total-blocks 73122 (issue 42): A's update 2 was applied but its answer
    lost, and A gave up on it; A's update 3 said every update below 3 was answered, so
    the table forgot update 2's answer. A copy of update 2, delayed in the network,
    arrived after that: it is stale, not applied again (3 would become 4), by the table
    that saw update 3 and by one rebuilt from either copy of its counter."""
    coord = CounterTable()
    assert coord.add_and_get("n", 1, by(a, 1)) == 1
    assert coord.add_and_get("n", 1, by(a, 2)) == 2  # the answer never reaches A
    assert coord.add_and_get("n", 1, by(a, 3, 3)) == 3
    assert set(coord.counters["n"].last[a]) == {3}
    backup = CounterCopy()
    backup.apply(coord.take_outbox())
    with pytest.raises(StaleUpdate):
        coord.add_and_get("n", 1, by(a, 2, 1))
    assert coord.get("n") == 3
    assert coord.take_outbox() == []
    mine = CounterReport(D, coord.entries())
    copied = CounterReport(B, list(backup.entries.values()))
    for only in (mine, copied):
        t = rebuild_counters({only.member: only}, side=[D, B])
        t.install_view([A, B, D], now=5.0)
        with pytest.raises(StaleUpdate):
            t.add_and_get("n", 1, by(a, 2, 1))
        assert t.get("n") == 3
        assert t.add_and_get("n", 1, by(a, 3, 3)) == 3  # still remembered: answered
        assert t.add_and_get("n", 1, by(a, 4, 3)) == 4


def test_the_floor_goes_with_a_departed_members_answers() -> None:
    """A departed member's floor is forgotten with its answers, ``keep_departed`` after
    the first view without it: by then no resend of its is on its way."""
    t = CounterTable(keep_departed=20.0)
    t.add_and_get("n", 1, by(a, 5))
    t.add_and_get("n", 1, by(b, 1))
    t.install_view([B], now=0.0)
    t.expire(20.0)
    assert (dict(t.counters["n"].last), dict(t.counters["n"].floor)) == ({b: {1: 2}}, {b: 1})


def test_entry_survives_encoding() -> None:
    entry = CounterEntry("n", -3, 9, {a: {4: True, 5: False}, b: {2: None}}, {a: 4, b: 2})
    assert CounterEntry.decode(entry.encode()) == entry


def test_a_copy_keeps_the_newest_and_a_whole_copy_replaces_older_ones() -> None:
    copy = CounterCopy()
    copy.apply([CounterEntry("n", 5, 5, {}), CounterEntry("n", 3, 3, {})])
    assert copy.entries["n"].value == 5
    copy.apply([CounterEntry("stale", 1, 2, {})])
    copy.replace([CounterEntry("m", 1, 4, {})], 4)
    assert set(copy.entries) == {"n", "m"}


def test_rebuild_takes_the_newest_copy_of_each_counter() -> None:
    reports = {
        B: CounterReport(B, [CounterEntry("n", 10, 10, {}), CounterEntry("m", 1, 2, {})]),
        C: CounterReport(C, [CounterEntry("n", 9, 9, {})]),
    }
    t = rebuild_counters(reports)
    assert (t.get("n"), t.get("m")) == (10, 1)
    assert t.add_and_get("n", 1, by(a, 1)) == 11
    assert t.counters["n"].version > 10


def test_after_a_merge_the_merge_leaders_side_wins() -> None:
    """The other side's updates during the split are lost; its own counters are kept;
    the chosen copies get versions above every copy, so a backup from the other side
    takes them in place of its own."""
    reports = {
        A: CounterReport(A, [CounterEntry("n", 3, 3, {})]),
        C: CounterReport(C, [CounterEntry("n", 50, 50, {}), CounterEntry("c", 7, 7, {})]),
    }
    t = rebuild_counters(reports, side=[A, B])
    assert (t.get("n"), t.get("c")) == (3, 7)
    assert all(e.version > 50 for e in t.entries())
    backup = CounterCopy()
    backup.apply(reports[C].copy)
    backup.replace(t.entries(), t.version)
    assert backup.entries["n"].value == 3
