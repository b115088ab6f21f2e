"""GMS's record of the views it installed (`_lineage`): whom a later view removed.

The merge leader leaves out of the merge view a member that a view of its own, newer
than the view a subgroup reports, removed (campaign udp-mcast 10609: a member that had
left came back through the stale view of a paused member).
"""

from __future__ import annotations

from triogroups import Address, View, ViewId
from triogroups.protocols.gms._lineage import Lineage, still_members

A, B, C, D = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C"), (4, "D")))


def _lineage(*views: View) -> Lineage:
    lineage = Lineage()
    for view in views:
        lineage.installed(view)
    return lineage


def test_lineage_names_the_members_a_later_view_removed() -> None:
    v3 = View(ViewId(3, A), [A, B, C, D])
    lineage = _lineage(v3, View(ViewId(4, A), [A, B, D]), View(ViewId(5, A), [B, D]))
    assert lineage.removed_since(v3) == {A, C}
    assert lineage.removed_since(View(ViewId(4, A), [A, B, D])) == {A}
    assert lineage.removed_since(View(ViewId(5, A), [B, D])) == set()


def test_lineage_says_nothing_of_a_view_it_never_installed() -> None:
    lineage = _lineage(View(ViewId(3, A), [A, B]), View(ViewId(4, B), [B]))
    assert lineage.removed_since(View(ViewId(4, C), [C, A])) == set()
    assert lineage.removed_since(View(ViewId(3, C), [A, B])) == set()  # same counter, other view


def test_lineage_a_member_brought_back_later_is_not_removed() -> None:
    v2 = View(ViewId(2, A), [A, B, C])
    lineage = _lineage(v2, View(ViewId(3, A), [A, B]), View(ViewId(5, A), [A, B, C]))
    assert lineage.removed_since(v2) == set()


def test_lineage_keeps_only_the_newest_views() -> None:
    first = View(ViewId(1, A), [A, B])
    lineage = Lineage(depth=3)
    lineage.installed(first)
    for i in range(2, 5):
        lineage.installed(View(ViewId(i, A), [A]))
    assert lineage.removed_since(first) == set()  # forgotten: treated as never installed
    # [A|2] itself removed B, no view after it did
    assert lineage.removed_since(View(ViewId(2, A), [A, B])) == set()


def test_lineage_forgets_everything_when_the_member_leaves() -> None:
    v1 = View(ViewId(1, A), [A, B])
    lineage = _lineage(v1, View(ViewId(2, A), [A]))
    lineage.forget()
    assert lineage.removed_since(v1) == set()


def test_still_members_keeps_the_representative_and_the_order() -> None:
    v3 = View(ViewId(3, A), [A, C, B, D])
    lineage = _lineage(v3, View(ViewId(4, A), [A, B, D]), View(ViewId(5, A), [B, D]))
    assert still_members(v3, lineage, [C]) == [C, B, D]
    assert still_members(v3, lineage, []) == [B, D]
