"""The lock service's rules, sans-IO: `LockTable`, `LockCopy`, `rebuild_locks`, `Quorum`."""

from __future__ import annotations

import random

import pytest

from triogroups.blocks._locktable import (
    Entry,
    Grant,
    LockCopy,
    LockReport,
    LockTable,
    Owner,
    rebuild_locks,
    refuse_grant,
    token_view,
)
from triogroups.blocks._quorum import Quorum
from triogroups.testing import addresses

A, B, C, D, E = addresses("ABCDE")
a1, a2, b1, c1, d1 = Owner(A, 1), Owner(A, 2), Owner(B, 1), Owner(C, 1), Owner(D, 1)


def test_free_lock_is_granted_and_others_wait_in_arrival_order() -> None:
    table = LockTable()
    first = table.request("x", a1)
    assert first == Grant(a1, 1)
    assert table.request("x", b1) is None
    assert table.request("x", c1) is None
    assert table.release("x", a1) == Grant(b1, 2)
    assert table.release("x", b1) == Grant(c1, 3)
    assert table.release("x", c1) is None
    assert table.holder("x") is None


def test_two_tasks_of_one_member_are_two_owners() -> None:
    table = LockTable()
    assert table.request("x", a1) is not None
    assert table.request("x", a2) is None


def test_resent_request_and_release_change_nothing() -> None:
    """A caller whose answer was lost asks again: the same grant, no new token."""
    table = LockTable()
    grant = table.request("x", a1)
    assert table.request("x", a1) == grant
    table.request("x", b1)
    assert table.request("x", b1) is None
    assert list(table.waiting["x"]) == [b1]  # queued once
    assert table.release("x", c1) is None  # not its lock
    assert table.holder("x") == grant


def test_release_by_a_waiter_is_a_cancel() -> None:
    table = LockTable()
    table.request("x", a1)
    table.request("x", b1)
    table.request("x", c1)
    assert table.release("x", b1) is None
    assert table.release("x", a1) == Grant(c1, 2)


def test_a_view_without_the_owner_releases_and_grants_the_next_live_waiter() -> None:
    table = LockTable()
    table.request("x", a1)
    table.request("x", b1)
    table.request("x", c1)
    grants = table.install_view([C, D], granting=True)
    assert grants == [Grant(c1, 2)]
    assert "x" not in table.waiting


def test_no_grant_while_not_granting_and_waiters_granted_when_it_resumes() -> None:
    table = LockTable()
    table.install_view([A, B], granting=False)
    assert table.request("x", a1) is None
    assert table.request("y", b1) is None
    assert table.holder("x") is None
    assert table.install_view([A, B], granting=True) == [Grant(a1, 1), Grant(b1, 2)]


def test_a_view_without_the_right_to_grant_frees_every_lock() -> None:
    """Majority mode in a minority: the owners count their locks as lost, so a request
    resent there must not find its old grant; it waits for a majority instead."""
    table = LockTable()
    table.request("x", a1)
    assert table.install_view([A, B], granting=False) == []
    assert table.holder("x") is None
    assert table.request("x", a1) is None
    assert table.install_view([A, B, C], granting=True) == [Grant(a1, 2)]


def test_tokens_only_grow() -> None:
    rng = random.Random(3)
    table = LockTable()
    owners = [Owner(m, t) for m in (A, B, C) for t in (1, 2)]
    last = 0
    for _ in range(500):
        owner, name = rng.choice(owners), rng.choice("xyz")
        grants = (
            [table.request(name, owner)] if rng.random() < 0.5 else [table.release(name, owner)]
        )
        for grant in grants:
            if grant is not None and grant.token > last:
                last = grant.token
            elif grant is not None:
                assert table.holder(name) == grant  # only a resent request repeats one
    assert table.max_token == last


def test_every_change_goes_to_the_outbox_with_a_growing_version() -> None:
    table = LockTable()
    table.request("x", a1)
    table.request("x", b1)
    table.release("x", a1)
    out = table.take_outbox()
    assert [(e.name, e.grant, e.version) for e in out] == [
        ("x", Grant(a1, 1), 1),
        ("x", None, 2),
        ("x", Grant(b1, 2), 3),
    ]
    assert table.take_outbox() == []


def test_a_backup_keeps_the_newest_entry_whatever_the_order() -> None:
    table = LockTable()
    table.request("x", a1)
    table.release("x", a1)
    table.request("x", b1)
    entries = table.take_outbox()
    copy = LockCopy()
    copy.apply(reversed(entries), table.max_token)
    assert copy.entries["x"] == Entry("x", Grant(b1, 2), 3)
    assert copy.max_token == 2


def test_a_whole_copy_replaces_older_entries_but_not_newer_ones() -> None:
    copy = LockCopy()
    copy.apply([Entry("old", Grant(a1, 1), 1), Entry("new", Grant(b1, 9), 9)], 9)
    copy.replace([Entry("y", Grant(c1, 5), 5)], 5, 5)
    assert set(copy.entries) == {"new", "y"}


def test_report_survives_encoding() -> None:
    report = LockReport(
        A, [Entry("x", Grant(b1, 4), 7), Entry("y", None, 8)], 12, {"z": Grant(a1, 11)}
    )
    again = LockReport.decode(A, report.encode())
    assert again == report


def report(member: object, **kw: object) -> LockReport:
    return LockReport(member, **kw)  # type: ignore[arg-type]


def test_rebuild_keeps_what_the_owners_hold_and_tokens_grow_past_a_gap() -> None:
    reports = {
        B: report(B, copy=[Entry("x", Grant(c1, 40), 3)], max_token=40),
        C: report(C, held={"x": Grant(c1, 40)}, max_token=40),
    }
    table, refused = rebuild_locks(reports, [B, C], token_gap=100)
    assert table.holder("x") == Grant(c1, 40)
    assert refused == []
    assert table.request("y", b1) == Grant(b1, 141)
    assert table.version > 3


def test_rebuild_drops_the_grants_of_members_gone() -> None:
    reports = {B: report(B, copy=[Entry("x", Grant(a1, 5), 1)], max_token=5)}
    table, _ = rebuild_locks(reports, [B, C])
    assert table.holder("x") is None
    assert table.max_token > 5


def test_rebuild_drops_a_backed_up_grant_its_owner_does_not_hold() -> None:
    """The old coordinator copied the grant, then crashed before its answer left (or the
    owner's release was lost with it): the owner, asked, does not hold the lock. It asks
    again and gets a new grant, with a larger token than the one it never saw."""
    reports = {
        B: report(B, copy=[Entry("x", Grant(c1, 5), 1)], max_token=5),
        C: report(C),
    }
    table, _ = rebuild_locks(reports, [B, C])
    assert table.holder("x") is None
    grant = table.request("x", c1)
    assert grant is not None and grant.token > 5


def test_rebuild_takes_a_silent_members_grants_from_the_backups() -> None:
    """D is in the view but did not answer in time: the newest copy speaks for it."""
    reports = {
        B: report(B, copy=[Entry("x", Grant(d1, 5), 1), Entry("x", None, 2)]),
        C: report(C, copy=[Entry("y", Grant(d1, 6), 3), Entry("x", Grant(d1, 5), 1)]),
    }
    table, _ = rebuild_locks(reports, [B, C, D])
    assert table.holder("x") is None  # released at version 2
    assert table.holder("y") == Grant(d1, 6)


def test_rebuild_takes_the_largest_token_anyone_saw() -> None:
    reports = {B: report(B, max_token=7), C: report(C, held={"q": Grant(c1, 90)})}
    table, _ = rebuild_locks(reports, [B, C], token_gap=1)
    assert table.max_token == 91


def test_rebuild_after_a_merge_keeps_the_larger_token_and_refuses_the_other() -> None:
    """Without majority mode both sides of a split may grant the same lock: the grant
    with the larger token keeps it (a fenced resource takes only that one), the other
    owner is refused (told it lost it); what only one side held is kept."""
    reports = {
        A: report(A, held={"x": Grant(a1, 1005)}),
        B: report(B, copy=[Entry("x", Grant(a1, 1005), 2)]),
        C: report(C, held={"x": Grant(c1, 2001), "only-c": Grant(c1, 2002)}),
        D: report(D, copy=[Entry("x", Grant(c1, 2001), 5)]),
    }
    table, refused = rebuild_locks(reports, [A, B, C, D])
    assert table.holder("x") == Grant(c1, 2001)
    assert table.holder("only-c") == Grant(c1, 2002)
    assert refused == [("x", Grant(a1, 1005))]
    assert table.max_token > 2002


def test_a_majority_is_more_than_half_of_the_last_full_view() -> None:
    q = Quorum()
    assert q.install([A, B, C, D, E])  # the first view counts as full
    assert q.install([A, B, C])  # 3 of 5
    assert q.install([A, B])  # 2 of 3: the group shrinks one failure at a time
    assert not q.install([A])  # 1 of 2
    assert not q.install([A])
    assert q.install([A, B, C])  # a merge brings the majority back


@pytest.mark.parametrize(
    ("left", "right", "granting"),
    [
        ([A, B], [C, D, E], (False, True)),
        ([A, B], [C, D], (False, False)),  # an even split: neither side
        ([A], [B, C, D, E], (False, True)),
    ],
)
def test_at_most_one_side_of_a_split_has_a_majority(
    left: list[object], right: list[object], granting: tuple[bool, bool]
) -> None:
    full = [*left, *right]
    sides = []
    for side in (left, right):
        q = Quorum()
        q.install(full)  # type: ignore[arg-type]
        sides.append(q.install(side))  # type: ignore[arg-type]
    assert tuple(sides) == granting


def test_rebuild_tokens_start_above_the_view_id_when_no_member_knows_a_token() -> None:
    """The old coordinator and its backup sat in the minority (or crashed): the members
    left know no token, yet the new tokens must be larger than the old ones, which were
    granted in views with smaller ids."""
    old, _ = rebuild_locks({}, [A, B], view_counter=3)
    given = old.request("x", a1)
    assert given is not None
    new, _ = rebuild_locks({C: report(C)}, [C, D], view_counter=5)
    again = new.request("x", c1)
    assert again is not None and again.token > given.token


V3 = 3 << 32  # the first token a table makes in view 3 is V3 + 1


@pytest.mark.parametrize(
    ("token", "may_hold", "reported_since", "newest_seen", "refused"),
    [
        (V3 + 7, True, False, 0, None),
        (V3 + 7, True, False, V3 + 7, None),  # the backup copy of this very grant
        (V3 + 7, False, False, 0, "no majority"),  # seed 143: arrived in a minority view
        (V3 + 7, True, True, 0, "table rebuilt since asked"),
        (V3 + 7, True, False, V3 + 9, f"token {V3 + 7} below {V3 + 9} seen"),
        # seed 72034: made in a view before the owner's, or in a later one
        ((2 << 32) + 7, True, False, 0, f"token {(2 << 32) + 7} of view 2, not 3"),
        ((4 << 32) + 7, True, False, 0, f"token {(4 << 32) + 7} of view 4, not 3"),
    ],
)
def test_a_grant_that_arrives_after_a_view_that_took_it_away_is_refused(
    token: int, may_hold: bool, reported_since: bool, newest_seen: int, refused: str | None
) -> None:
    """Issue 42 (campaign udp-total-blocks seeds 143 and 72034): the owner, in view 3,
    judges a grant when it arrives, and holds it only if no view since it was made took
    it away and it was made in the owner's view."""
    assert (
        refuse_grant(
            token,
            view_counter=3,
            may_hold=may_hold,
            reported_since=reported_since,
            newest_seen=newest_seen,
        )
        == refused
    )


def test_a_table_that_goes_on_into_the_next_view_makes_tokens_of_that_view() -> None:
    """Issue 42, campaign udp-total-blocks seed 72034 (default mode): F crashed during a
    split; H (with E) and G (with D) each took over in a view with id 4 and rebuilt
    from 4 * 2**32, and H granted x. D installed H's view 4 after the heal, then G's view
    5, which G installed as coordinator still (no merge, no rebuild: G's view 4 listed
    D). G's table had never heard of H's tokens, yet the grant it makes in view 5 must be
    larger than H's grant in view 4, which D's line of views went through."""
    h_table, _ = rebuild_locks({}, [B, D, E], view_counter=4)
    g_table, _ = rebuild_locks({}, [C, D], view_counter=4)
    h_table.request("x", Owner(E, 1))
    h_table.release("x", Owner(E, 1))
    h_grant = h_table.request("x", b1)
    assert h_grant is not None
    assert g_table.install_view([C, D, A], granting=True, view_counter=5) == []
    g_grant = g_table.request("x", d1)
    assert g_grant is not None
    assert g_grant.token > h_grant.token
    assert token_view(g_grant.token) == 5
    assert token_view(h_grant.token) == 4


def test_a_waiter_granted_by_a_new_view_gets_a_token_of_that_view() -> None:
    table, _ = rebuild_locks({}, [A, B], view_counter=2)
    table.request("x", a1)
    table.request("x", b1)
    grants = table.install_view([B], granting=True, view_counter=3)
    assert grants == [Grant(b1, (3 << 32) + 1)]


def test_rebuild_in_a_view_that_may_not_grant_frees_every_claimed_lock() -> None:
    """As `LockTable.install_view`: a coordinator rebuilding in a minority view (majority
    mode) keeps no lock; every owner that claims one is told it lost it."""
    reports = {
        A: report(A, held={"x": Grant(a1, 5)}),
        B: report(B, copy=[Entry("y", Grant(c1, 6), 3)]),
    }
    table, refused = rebuild_locks(reports, [A, B, C], granting=False)
    assert table.holders == {}
    assert sorted(refused) == [("x", Grant(a1, 5)), ("y", Grant(c1, 6))]
    assert table.request("x", b1) is None  # queued until a majority comes back
