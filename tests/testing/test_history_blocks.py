"""The lock and counter rules on history files: hand-made histories that break each rule
must fail (two owners in one view, a token that does not grow, a grant in a minority
view, two increments with one result, a value lost with the coordinator), and the
histories a split with a merge leaves behind must pass."""

from __future__ import annotations

from pathlib import Path

from triogroups import Address, MergeView, View, ViewId
from triogroups.testing import HistoryWriter, check_histories, read_histories

A, B, C, D = (Address(n, name) for n, name in ((0xA, "A"), (0xB, "B"), (0xC, "C"), (0xD, "D")))
V1 = View.create(A, 1, [A, B, C])


class Blocks:
    """Hand-made histories of members that only call the services (``traffic`` False)."""

    def __init__(self, root: Path, *members: Address) -> None:
        self.root = root
        self.t = 0.0
        self.w = {
            m: HistoryWriter(root / f"{m.name}.jsonl", m, lambda: self.t, traffic=False)
            for m in members
        }

    def at(self, t: float) -> Blocks:
        self.t = t
        return self

    def view(self, view: View, *members: Address) -> None:
        for m in members or [m for m in view.members if m in self.w]:
            self.w[m].view(view)

    def rules(self) -> list[str]:
        for w in self.w.values():
            w.close()
        return [v.rule for v in check_histories(read_histories(self.root), settle=5.0)]


def test_two_owners_of_a_lock_in_one_view_break_lock_owners(tmp_path: Path) -> None:
    run = Blocks(tmp_path, A, B, C)
    run.at(1).view(V1)
    run.at(2).w[B].lock("x", 1, V1)
    run.at(3).w[C].lock("x", 2, V1)  # B has not asked to release it yet
    run.at(4).w[B].unlock("x", 1)
    run.at(5).w[C].unlock("x", 2)
    assert run.rules() == ["lock_owners"]


def test_holds_one_after_another_pass(tmp_path: Path) -> None:
    run = Blocks(tmp_path, A, B, C)
    run.at(1).view(V1)
    run.at(2).w[B].lock("x", 1, V1)
    run.at(3).w[B].unlock("x", 1)
    run.at(3.5).w[C].lock("x", 2, V1)
    run.at(4).w[C].unlock("x", 2)
    run.at(4.5).w[A].lock("y", 1, V1)  # another lock's tokens are its own
    assert run.rules() == []


def test_a_lock_given_away_while_its_owner_is_still_a_member_breaks_lock_owners(
    tmp_path: Path,
) -> None:
    """A (the coordinator) crashes while B holds x; B is still in the next view, so the
    new coordinator must keep x B's: granting it to C is two owners at once."""
    v2 = View.create(B, 2, [B, C])
    run = Blocks(tmp_path, A, B, C)
    run.at(1).view(V1)
    run.at(2).w[B].lock("x", 1, V1)
    run.at(4).view(v2)
    run.at(5).w[C].lock("x", 2**33, v2)
    assert run.rules() == ["lock_owners"]


def test_a_token_that_does_not_grow_breaks_lock_token(tmp_path: Path) -> None:
    run = Blocks(tmp_path, A, B, C)
    run.at(1).view(V1)
    run.at(2).w[B].lock("x", 7, V1)
    run.at(3).w[B].unlock("x", 7)
    run.at(4).w[C].lock("x", 7, V1)
    run.at(5).w[C].unlock("x", 7)
    assert run.rules() == ["lock_token"]


def test_both_sides_of_a_split_grant_and_the_merge_sorts_it_out(tmp_path: Path) -> None:
    """Without majority mode each side grants x with tokens of its own (D's side from its
    view counter up, A's side on from its small ones), and after the merge A holds it again
    while D, told it lost, had not yet asked to release it: no rule is broken."""
    v1 = View.create(A, 1, [A, B, C, D])
    ab, cd = View.create(A, 2, [A, B]), View.create(C, 2, [C, D])
    merged = MergeView(ViewId(3, A), [A, B, C, D], [ab, cd])
    run = Blocks(tmp_path, A, B, C, D)
    run.at(1).view(v1)
    run.at(2).view(ab)
    run.at(2).view(cd)
    run.at(3).w[D].lock("x", 2 * 2**32, cd)
    run.at(4).w[B].lock("x", 5, ab)
    run.at(5).w[B].unlock("x", 5)
    run.at(6).view(merged)
    run.at(7).w[A].lock("x", 3 * 2**32, merged)
    run.at(8).w[D].unlock("x", 2 * 2**32, lost=True)
    assert run.rules() == []


def test_a_grant_in_a_minority_view_in_majority_mode_breaks_lock_minority(tmp_path: Path) -> None:
    v1 = View.create(A, 1, [A, B, C, D])
    ab = View.create(A, 2, [A, B])  # half of the last full view: no majority
    run = Blocks(tmp_path, A, B)
    run.at(1).view(v1)
    run.at(2).w[A].lock("x", 1, v1, majority=True)
    run.at(3).w[A].unlock("x", 1)
    run.at(4).view(ab)
    run.at(5).w[B].lock("x", 2, ab, majority=True)
    assert run.rules() == ["lock_minority"]


def test_two_increments_with_one_result_break_counter_unique(tmp_path: Path) -> None:
    run = Blocks(tmp_path, A, B, C)
    run.at(1).view(V1)
    run.at(3).w[B].count("n", 4, 2.0, V1)
    run.at(3.5).w[C].count("n", 4, 2.5, V1)
    run.at(5).w[C].count("n", 5, 4.0, V1)
    assert run.rules() == ["counter_unique"]


def test_an_increment_called_after_another_was_answered_gets_more(tmp_path: Path) -> None:
    run = Blocks(tmp_path, A, B, C)
    run.at(1).view(V1)
    run.at(3).w[B].count("n", 6, 2.0, V1)
    run.at(5).w[C].count("n", 5, 4.0, V1)  # called at 4, after B's answer at 3
    run.at(6).w[C].count("m", 1, 5.5, V1)  # another counter
    assert run.rules() == ["counter_order"]


def test_a_value_lost_with_the_crashed_coordinator_breaks_counter_lost(tmp_path: Path) -> None:
    """A coordinated view 1 with B its backup; A crashed, and in view 2 (B and C) C's
    increment got less than B's before the crash."""
    v2 = View.create(B, 2, [B, C])
    run = Blocks(tmp_path, A, B, C)
    run.at(1).view(V1)
    run.at(3).w[B].count("n", 9, 2.0, V1)
    run.at(4).view(v2)
    run.at(6).w[C].count("n", 1, 5.0, v2)
    assert run.rules() == ["counter_lost"]


def test_counters_on_both_sides_of_a_split_may_repeat_values(tmp_path: Path) -> None:
    """A split: each side counts on from its own copy, in views of its own."""
    v1 = View.create(A, 1, [A, B, C, D])
    ab, cd = View.create(A, 2, [A, B]), View.create(C, 2, [C, D])
    run = Blocks(tmp_path, A, B, C, D)
    run.at(1).view(v1)
    run.at(2).view(ab)
    run.at(2).view(cd)
    run.at(3).w[B].count("n", 3, 2.5, ab)
    run.at(4).w[D].count("n", 3, 3.5, cd)
    run.at(5).w[D].count("n", 4, 4.5, cd)
    assert run.rules() == []


def test_a_member_without_traffic_owes_no_delivery_after_a_heal(tmp_path: Path) -> None:
    """``traffic`` False: the no_traffic_after_heal rule does not ask it to deliver."""
    faults = HistoryWriter(tmp_path / "faults.jsonl", None, lambda: 1.0)
    faults.fault("heal", "quiet period")
    faults.close()
    run = Blocks(tmp_path, A, B)
    run.at(0.5).view(View.create(A, 1, [A, B]))
    run.at(60).w[A].count("n", 1, 59.0, View.create(A, 1, [A, B]))
    assert run.rules() == []


def test_a_member_a_cut_off_coordinator_still_lists_is_no_owner_in_its_view(
    tmp_path: Path,
) -> None:
    """Campaign udp-total-blocks seed 120: C, cut off, went on listing B in its view 2
    after B moved on to D's view 2; B holds x from D while C grants x to A in C's view:
    B never installed C's view, so that is no second owner in one view."""
    c2, d2 = View.create(C, 2, [C, A, B]), View.create(D, 2, [D, B])
    run = Blocks(tmp_path, A, B, C, D)
    run.at(1).view(View.create(C, 1, [C, A, B, D]))
    run.at(2).view(c2, C, A)
    run.at(2).view(d2)
    run.at(3).w[B].lock("x", 2 * 2**32, d2)
    run.at(4).w[A].lock("x", 2**32 + 5, c2)
    assert run.rules() == []


def test_an_increment_whose_caller_went_with_the_coordinator_is_not_owed(
    tmp_path: Path,
) -> None:
    """Campaign udp-total-blocks seed 164: a split took A (the coordinator) and B away; B's
    increment may have been answered without a copy at C, the backup, so C's side may
    count it again."""
    v2 = View.create(C, 2, [C, D])
    run = Blocks(tmp_path, A, B, C, D)
    run.at(1).view(View.create(A, 1, [A, C, B, D]))
    run.at(3).w[B].count("n", 9, 2.0, View.create(A, 1, [A, C, B, D]))
    run.at(4).view(v2, C, D)
    run.at(6).w[D].count("n", 9, 5.0, v2)
    assert run.rules() == []


def test_a_grant_made_in_a_view_newer_than_its_owners_is_not_judged_by_the_owners(
    tmp_path: Path,
) -> None:
    """Campaign udp-total-blocks seed 190: the token says the grant was made in view 3
    (its coordinator rebuilt there, with a majority); the owner, still in its view 2
    without one, is not where it was made."""
    v1, ab = View.create(A, 1, [A, B, C, D]), View.create(A, 2, [A, B])
    run = Blocks(tmp_path, A, B)
    run.at(1).view(v1)
    run.at(2).view(ab)
    run.at(3).w[B].lock("x", 3 * 2**32 + 1, ab, majority=True)
    assert run.rules() == []


def test_an_add_applied_twice_breaks_counter_doubled(tmp_path: Path) -> None:
    """C's one increment, the only call ever made, got 2: the coordinator applied it
    twice (a member dropped from the view and merged back asked again, and the rebuilt
    table had forgotten its answer)."""
    run = Blocks(tmp_path, A, B, C)
    run.at(1).view(V1)
    run.at(2).w[C].add("n", 1)
    run.at(5).w[C].count("n", 2, 2.0, V1)
    assert run.rules() == ["counter_doubled"]


def test_calls_that_timed_out_or_were_cut_short_may_have_taken_effect(tmp_path: Path) -> None:
    """B's call timed out (no answer recorded) and A was killed during its own: both may
    have been applied, so C's 3 is no add applied twice; nor is an answer that counts a
    call made just before it."""
    run = Blocks(tmp_path, A, B, C)
    run.at(1).view(V1)
    run.at(2).w[B].add("n", 1)
    run.at(2.5).w[A].add("n", 1)
    run.at(3).w[C].add("n", 1)
    run.at(4).w[C].count("n", 3, 3.0, V1)
    run.at(6).w[B].add("n", 1)
    run.at(6).w[C].add("n", 1)
    run.at(7).w[C].count("n", 5, 6.0, V1)
    assert run.rules() == []


def test_updates_a_merge_dropped_leave_more_calls_than_values(tmp_path: Path) -> None:
    """A split: C and D count on their side, the merge keeps A and B's side, and counting
    goes on from that side's value: the calls only add up to more than the values."""
    v1 = View.create(A, 1, [A, B, C, D])
    ab, cd = View.create(A, 2, [A, B]), View.create(C, 2, [C, D])
    merged = MergeView(ViewId(3, A), [A, B, C, D], [ab, cd])
    run = Blocks(tmp_path, A, B, C, D)
    run.at(1).view(v1)
    run.at(2).view(ab)
    run.at(2).view(cd)
    run.at(3).w[B].add("n", 1)
    run.at(3.5).w[B].count("n", 1, 3.0, ab)
    for t in (4, 5, 6):
        run.at(t).w[D].add("n", 1)
        run.at(t + 0.5).w[D].count("n", t - 3, t, cd)
    run.at(8).view(merged)
    run.at(9).w[C].add("n", 1)
    run.at(9.5).w[C].count("n", 2, 9.0, merged)
    assert run.rules() == []
