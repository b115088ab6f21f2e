"""MERGE3's merge leader when coordinators disagree (JGRP-2092, issue 37 bug 3).

The rule: every member checks the views it heard; each view is spoken for by
a member that holds it (its coordinator if that one does); the leader is the
lowest representative that coordinates the view it speaks for, or, when
none does, the lowest representative. Before, only a member coordinating its
own view could lead, so views that each name another coordinator
(A holds (B,A,C), B holds (C,A,B), C holds (A,B,C)) were never merged.

A member presumes its own view's coordinator holds that view while it misses one
INFO, not once the coordinator has been silent for two checks (issue 42): a member
stranded in the view of a departed coordinator kept presuming it and computed it as
leader, while every other member computed the stranded one, and nobody merged.
"""

from __future__ import annotations

from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Address, MergeView, Message, StackConfig, View, ViewId
from triogroups.events import Merge
from triogroups.extend import ViewChange
from triogroups.protocols import ids
from triogroups.protocols.merge3 import INFO, Merge3, Merge3Header, merge_leader, representatives
from triogroups.testing import SimMember, open_cluster, wait_until

STACK = StackConfig.of(
    "SIM",
    "PING",
    ("MERGE3", {"min_interval": 0.5, "max_interval": 3.0, "check_interval": 4.0}),
    "NAKACK2",
    "UNICAST3",
    "STABLE",
    ("GMS", {"merge_timeout": 3.0}),
)

#: A few MERGE3 rounds (check_interval 4 s, merge_timeout 3 s): the bound on convergence.
_CONVERGED_WITHIN = 30.0


@st.composite
def _assignments(draw: st.DrawFn, departed: int = 0) -> dict[Address, View]:
    """2-6 members and a pool of views (any members, any coordinator, distinct ids); each
    member holds one of the views it is in, or a view of its own. Up to ``departed``
    more members appear in views (even as coordinators) but hold none: they left."""
    n = draw(st.integers(2, 6))
    members = [Address(i + 1, chr(ord("A") + i)) for i in range(n)]
    gone = [Address(90 + i, f"gone{i}") for i in range(draw(st.integers(0, departed)))]
    pool: list[View] = []
    for k in range(draw(st.integers(1, n))):
        names = draw(st.lists(st.sampled_from(members + gone), min_size=1, unique=True))
        pool.append(View(ViewId(k + 1, names[0]), names))
    held: dict[Address, View] = {}
    for i, me in enumerate(members):
        mine = [v for v in pool if me in v.members]
        if mine and draw(st.booleans()):
            held[me] = draw(st.sampled_from(mine))
        else:
            others = draw(st.lists(st.sampled_from(members), unique=True))
            names = list(dict.fromkeys([*others, me]))
            held[me] = View(ViewId(100 + i, names[0]), names)
    return held


@settings(max_examples=examples(300), deadline=None)
@given(_assignments())
def test_merge_leader_rule_exactly_one_leader_whose_merge_covers_every_member(
    held: dict[Address, View],
) -> None:
    """Over any assignment of views, where every member heard every INFO: with two or more
    views exactly one member computes itself as leader, every member computes the same
    leader, and the views it merges include the view every member holds (so every member
    installs the merge view: nobody is left out)."""
    views = sorted({v.view_id: v for v in held.values()}.values(), key=lambda v: v.view_id)
    leaders = set()
    choices = {}
    for me in held:
        kept, reps = representatives(views, held, me)
        leaders.add(merge_leader(kept, reps))
        choices[me] = (kept, reps)
    if len(views) < 2:
        assert leaders == {None}
        return
    (leader,) = leaders
    assert leader is not None and leader in held
    assert [me for me in held if merge_leader(*choices[me]) == me] == [leader]
    kept, reps = choices[leader]
    assert leader in reps
    assert {v.view_id for v in held.values()} <= {v.view_id for v in kept}
    assert set(held) <= {m for v in kept for m in v.members}
    for view, rep in zip(kept, reps, strict=True):
        assert held[rep].view_id == view.view_id  # each representative holds its view


def test_merge_leader_rule_prefers_a_coordinator_in_the_usual_case() -> None:
    """Two partitions, each with its coordinator: the lowest coordinator leads, as before
    and as in JGroups; an ordinary member that missed its coordinator's INFO still
    presumes that one speaks for their view and stays quiet."""
    a, b, c, d = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C"), (4, "D")))
    left = View(ViewId(5, b), [b, a])  # a sorts lowest but is not the coordinator
    right = View(ViewId(6, c), [c, d])
    heard = {a: left, b: left, c: right, d: right}
    views = [left, right]
    assert merge_leader(*representatives(views, heard, b)) == b
    # a heard only the other side: its coordinator b is presumed to hold their view
    kept, reps = representatives(views, {a: left, c: right, d: right}, a)
    assert reps == [b, c] and merge_leader(kept, reps) == b


@settings(max_examples=examples(300), deadline=None)
@given(_assignments(departed=2))
def test_merge_leader_rule_departed_coordinators_not_presumed_after_two_silent_checks(
    held: dict[Address, View],
) -> None:
    """Members that left are named in views, some as coordinators, and never heard. Once
    they have been silent for two checks nobody presumes them, so every member computes
    the same leader, exactly one member computes itself, and its merge takes in every
    view held. Presuming its departed coordinator forever, a member could compute that
    one as leader while the others computed it (issue 42, campaign udp-total-blocks
    70194)."""
    views = sorted({v.view_id: v for v in held.values()}.values(), key=lambda v: v.view_id)
    choices = {me: representatives(views, held, me, presume_coord=False) for me in held}
    leaders = {merge_leader(*choice) for choice in choices.values()}
    if len(views) < 2:
        assert leaders == {None}
        return
    (leader,) = leaders
    assert leader is not None
    assert [me for me in held if merge_leader(*choices[me]) == me] == [leader]
    assert {v.view_id for v in held.values()} <= {v.view_id for v in choices[leader][0]}


def _info(src: Address, view: View) -> Message:
    return Message(None, src=src, headers={ids.MERGE3: Merge3Header(INFO, view)})


def _merges(m: Merge3) -> list[Merge]:
    return [e for e in m.take_up() if isinstance(e, Merge)]


def test_merge_leader_rule_a_coordinator_silent_for_two_checks_is_no_longer_presumed() -> None:
    """Campaign udp-total-blocks 70194, reduced: A is stranded in (D,B,A); D has left; B and
    C hold (A,B,C), which names A coordinator, but A never installed it. B and C, hearing
    nobody hold (D,B,A) but A, compute A as leader. A presumed its silent coordinator D
    spoke for (D,B,A) and computed D: nobody merged, ever. A presumes D through one check
    without its INFO (a lost INFO), and leads at the second; an INFO from D in between
    would have started the count again."""
    a, b, c, d = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C"), (4, "D")))
    stranded = View(ViewId(3, d), [d, b, a])
    named = View(ViewId(5, a), [a, b, c])
    others = [_info(b, named), _info(c, named)]
    for them in (b, c):  # what B and C compute from the same INFOs
        heard = {a: stranded, b: named, c: named}
        assert merge_leader(*representatives([stranded, named], heard, them)) == a
    m = Merge3(min_interval=1.0, max_interval=1.0, check_interval=5.0)
    m.start(a, "t", 0.0)
    m.view = stranded
    m.up([*others, _info(d, stranded)], 0.5)
    m.tick(5.0)  # D heard: it speaks for (D,B,A) and leads
    m.up(others, 5.5)
    m.tick(10.0)  # D silent for one check: presumed, A stays quiet
    assert _merges(m) == []
    m.up(others, 10.5)
    m.tick(15.0)  # silent for two: gone
    assert _merges(m) == [Merge((stranded, named), (a, b), (frozenset({a}), frozenset({b, c})))]


def test_merge_leader_rule_a_coordinator_heard_within_two_info_intervals_is_still_presumed() -> (
    None
):
    """With checks closer together than INFOs (check_interval 2 s, max_interval 10 s) a
    coordinator is silent for several checks in the usual run of things: A presumes D until
    D has been silent for more than two INFO intervals (one INFO lost), then leads."""
    a, b, c, d = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C"), (4, "D")))
    stranded = View(ViewId(3, d), [d, b, a])
    named = View(ViewId(5, a), [a, b, c])
    m = Merge3(min_interval=1.0, max_interval=10.0, check_interval=2.0)
    m.start(a, "t", 0.0)
    m.view = stranded
    m.up([_info(d, stranded)], 0.5)
    for now in range(2, 21, 2):  # D last heard at 0.5: within 20 s, presumed
        m.up([_info(b, named), _info(c, named)], now - 0.5)
        m.tick(float(now))
        assert _merges(m) == [], now
    m.up([_info(b, named), _info(c, named)], 21.5)
    m.tick(22.0)
    assert [e.coords for e in _merges(m)] == [(a, b)]


def _view(member: SimMember) -> View:
    view = member.protocol("GMS").view
    assert view is not None
    return view  # type: ignore[no-any-return]


async def _assign_and_wait(held: list[tuple[int, list[int]]], seed: int) -> None:
    """Inject the views (indexes into the members sorted by address, first = coordinator),
    then expect one view with every member within `_CONVERGED_WITHIN` virtual seconds."""
    async with open_cluster(len(held), STACK, seed=seed) as cluster:
        members = sorted(cluster.members, key=lambda m: m.address)
        orig = await cluster.wait_for_view()
        n = orig.view_id.id
        wanted = {}
        for i, (holder, order) in enumerate(held):
            who = members[holder]
            addrs = [members[j].address for j in order]
            if addrs != list(orig.members) or who.address != orig.coord:
                wanted[who] = await cluster.inject_view(
                    View(ViewId(n + 1 + i, addrs[0]), addrs), [who]
                )
        # InjectView goes through each member's stack
        await wait_until(
            lambda: all(_view(m) == v for m, v in wanted.items()), timeout=1, interval=0.001
        )
        start = trio.current_time()
        with trio.fail_after(_CONVERGED_WITHIN):
            while True:
                views = {_view(m) for m in members}
                if len(views) == 1 and set(next(iter(views)).members) == {
                    m.address for m in members
                }:
                    break
                await trio.sleep(0.1)
        assert trio.current_time() - start <= _CONVERGED_WITHIN


async def test_merge_leader_rule_no_agreed_coordinator_converges(autojump_clock: Any) -> None:
    """The JGRP-2092 / MergeTest5 shape (the repro): A holds (B,A,C), B holds (C,A,B),
    C holds (A,B,C). Nobody coordinates the view it holds; before the fix MERGE3 saw
    three views forever and started no merge."""
    await _assign_and_wait([(0, [1, 0, 2]), (1, [2, 0, 1]), (2, [0, 1, 2])], seed=944)


async def test_merge_leader_rule_cycle_of_coordinators_converges(autojump_clock: Any) -> None:
    """A holds (B,A), B holds (C,B), C holds (A,C): overlapping pairs, each naming the next
    member as coordinator."""
    await _assign_and_wait([(0, [1, 0]), (1, [2, 1]), (2, [0, 2])], seed=7)


async def test_merge_leader_rule_members_in_several_views_converge(autojump_clock: Any) -> None:
    """Four members, each in several views, each view naming another coordinator:
    A holds (D,A,B), B holds (C,A,B,D), C holds (B,C), D holds (C,D,A)."""
    await _assign_and_wait(
        [(0, [3, 0, 1]), (1, [2, 0, 1, 3]), (2, [1, 2]), (3, [2, 3, 0])],
        seed=31,
    )


async def test_merge_leader_rule_chain_with_one_real_coordinator_converges(
    autojump_clock: Any,
) -> None:
    """A chain where one member does coordinate its view: A holds (A,B), B holds (C,B),
    C holds (D,C), D holds (B,D). A leads (the only coordinator representing its view).
    A guard for the coordinator-first part of the rule: this shape merged before too."""
    await _assign_and_wait(
        [(0, [0, 1]), (1, [2, 1]), (2, [3, 2]), (3, [1, 3])],
        seed=5,
    )


async def test_merge_leader_rule_member_stranded_with_a_departed_coordinator_converges(
    autojump_clock: Any,
) -> None:
    """The cycle of campaign udp-total-blocks 70194 on the plain udp preset: D leaves; A is
    stranded in D's (D,B,A) and B and C hold (A,B,C), which names A coordinator, a view A
    never installed. Nobody coordinates the view it holds. B and C compute A as leader;
    A presumed the silent D spoke for (D,B,A) and computed D, so the views never merged
    (A suspects D, but B is next in line in (D,B,A), so A does not take over either). A
    stops presuming D after two silent checks and leads the merge."""
    stack = StackConfig.preset("udp").configure("MERGE3", min_interval=0.5, max_interval=2.0)
    async with open_cluster(4, stack, seed=70194) as cluster:
        first = await cluster.wait_for_view()
        a, b, c, d = sorted(cluster.members, key=lambda m: m.address)
        await d.disconnect()
        await cluster.wait_for_view([a, b, c])
        n = first.view_id.id + 1
        stranded = View(ViewId(n + 1, d.address), [d.address, b.address, a.address])
        named = View(ViewId(n + 2, a.address), [a.address, b.address, c.address])
        await cluster.inject_view(stranded, [a])
        await cluster.inject_view(named, [b, c])
        await wait_until(
            lambda: (a.view, b.view, c.view) == (stranded, named, named),
            timeout=1,
            interval=0.001,
        )
        final = await cluster.wait_for_view([a, b, c], timeout=_CONVERGED_WITHIN)
        assert final.coord == a.address
        led = [
            {sub.view_id for sub in e.view.subgroups}
            for e in a.events
            if isinstance(e, ViewChange) and isinstance(e.view, MergeView)
            if e.view.coord == a.address
        ]
        assert led == [{stranded.view_id, named.view_id}]  # A led the one merge
