"""The real demo's member program: when a member that finished sending says ``done`` again."""

from __future__ import annotations

from triogroups._demo._member import must_repeat_done
from triogroups.address import Address
from triogroups.view import MergeView, View, ViewId

A, B, C = (Address(i, name) for i, name in ((1, "A"), (2, "B"), (3, "C")))


def test_a_joiner_gets_done_again_a_member_that_left_does_not_need_it() -> None:
    old = View(ViewId(2, A), [A, B])
    assert must_repeat_done(old, View(ViewId(3, A), [A, B, C]))
    assert not must_repeat_done(old, View(ViewId(3, A), [A]))


def test_a_merge_view_with_no_member_new_to_us_still_repeats_done() -> None:
    """Our view 3 listed C, but C never installed it (its JOIN_RSP came after it had started
    a group of its own, [C]), so it dropped our done as a non-member's; the merge view has the
    same members as our view, and C starts from the merge digest, after that done."""
    ours = View(ViewId(3, A), [A, B, C])
    theirs = View(ViewId(1, C), [C])
    merged = MergeView(ViewId(4, C), [C, A, B], [theirs, ours])
    assert must_repeat_done(ours, merged)
