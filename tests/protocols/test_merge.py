"""MERGE3 and the GMS merge: coexisting views become one MergeView."""

from __future__ import annotations

from typing import Any

import trio

from triogroups import Address, MergeView, Message, StackConfig, View, ViewId
from triogroups.events import Disconnect, FindMembers, MembersFound, Merge, PingData
from triogroups.extend import ViewChange
from triogroups.message import Flag
from triogroups.protocols import ids
from triogroups.protocols.gms._header import MERGE_RSP
from triogroups.protocols.merge3 import INFO, Merge3, Merge3Header
from triogroups.testing import SimCluster, SimMember, open_cluster, wait_until
from triogroups.transports.sim import SimTransport
from triogroups.transports.tcp import TcpTransport

STACK = StackConfig.of(
    "SIM",
    "PING",
    ("MERGE3", {"min_interval": 0.2, "max_interval": 0.5, "check_interval": 1.0}),
    "DISCARD",
    ("GMS", {"merge_timeout": 2.0, "join_timeout": 0.5}),
)


def _gms_view(member: SimMember) -> View:
    view = member.protocol("GMS").view
    assert view is not None
    return view  # type: ignore[no-any-return]


async def _wait_same_view(members: list[SimMember], timeout: float = 60) -> View:
    wanted = {m.address for m in members}
    with trio.fail_after(timeout):
        while True:
            views = {_gms_view(m) for m in members}
            if len(views) == 1 and set(next(iter(views)).members) == wanted:
                return next(iter(views))
            await trio.sleep(0.05)


async def _split_groups(cluster: SimCluster, *groups: list[SimMember]) -> None:
    cluster.network.partition(*[[m.address for m in g] for g in groups])
    for group in groups:
        for member in group:
            await cluster.join(member)
        await _wait_same_view(group)


async def test_merge_of_two_partitions_installs_one_merge_view_with_both_subgroups(
    autojump_clock: Any,
) -> None:
    async with open_cluster(4, STACK, view=False) as cluster:
        a, b, c, d = cluster.members
        await _split_groups(cluster, [a, b], [c, d])
        left, right = _gms_view(a), _gms_view(c)
        cluster.network.heal()
        merged = await _wait_same_view([a, b, c, d])
        assert isinstance(merged, MergeView)
        assert {v.view_id for v in merged.subgroups} == {left.view_id, right.view_id}
        assert merged.view_id.id > max(left.view_id.id, right.view_id.id)
        leader = min(left.coord, right.coord)
        assert merged.coord == leader
        # the application saw the merge view too
        assert isinstance(a.view, MergeView) and a.view == merged


async def test_merge_leaves_out_a_subgroup_that_never_answers_and_takes_it_later(
    autojump_clock: Any,
) -> None:
    async with open_cluster(3, STACK, view=False) as cluster:
        a, b, c = cluster.members
        await _split_groups(cluster, [a], [b], [c])
        mute = max(cluster.members, key=lambda m: m.address)  # never the leader

        def is_merge_rsp(msg: Message) -> bool:
            hdr = msg.headers.get(ids.GMS)
            return hdr is not None and hdr.type == MERGE_RSP

        mute.protocol("DISCARD").drop_if(is_merge_rsp, direction="down", count=None)
        cluster.network.heal()
        others = [m for m in cluster.members if m is not mute]
        await _wait_same_view(others)
        assert mute.address not in _gms_view(others[0])
        mute.protocol("DISCARD").reset()
        await _wait_same_view([a, b, c])


async def test_merge_survives_a_dead_merge_leader(autojump_clock: Any) -> None:
    async with open_cluster(3, STACK, view=False) as cluster:
        await _split_groups(cluster, [cluster[0]], [cluster[1]], [cluster[2]])
        leader = min(cluster.members, key=lambda m: m.address)
        rest = [m for m in cluster.members if m is not leader]
        # the leader asks but never hears back, then dies mid-merge
        leader.protocol("DISCARD").ignore(*[m.address for m in rest])
        cluster.network.heal()
        await wait_until(lambda: leader.protocol("GMS").merger.busy, timeout=30)
        leader.kill()
        merged = await _wait_same_view(rest)
        assert leader.address not in merged


async def test_merge_of_views_with_no_agreed_coordinator(autojump_clock: Any) -> None:
    async with open_cluster(3, STACK, view=False) as cluster:
        a, b, c = sorted(cluster.members, key=lambda m: m.address)
        for m in (a, b, c):
            await cluster.join(m)
        await _wait_same_view([a, b, c])
        # a believes in {a, b, c}; b and c believe in {b, c}
        wide = View(ViewId(50, a.address), [a.address, b.address, c.address])
        narrow = View(ViewId(51, b.address), [b.address, c.address])
        await a.stack.send(ViewChange(wide))
        await b.stack.send(ViewChange(narrow))
        await c.stack.send(ViewChange(narrow))
        await wait_until(
            lambda: _gms_view(b) == narrow and _gms_view(c) == narrow and _gms_view(a) == wide,
            timeout=10,
            interval=0.01,
        )
        merged = await _wait_same_view([a, b, c])
        assert isinstance(merged, MergeView) and merged.view_id.id == 52
        assert merged.coord == a.address


# --- MERGE3 at unit level -----------------------------------------------------------

A, B, C = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C")))


def _merge3(me: Address, view: View) -> Merge3:
    m = Merge3(min_interval=1.0, max_interval=1.0, check_interval=5.0)
    m.start(me, "t", 0.0)
    m.view = view
    return m


def _info(src: Address, view: View) -> Message:
    return Message(None, src=src, headers={ids.MERGE3: Merge3Header(INFO, view)})


def test_merge3_sends_info_with_its_view_at_the_interval() -> None:
    view = View(ViewId(1, A), [A])
    m = _merge3(A, view)
    assert m.next_deadline() == 1.0
    m.tick(1.0)
    (batch,) = m.take_down()
    assert isinstance(batch, list) and batch[0].headers[ids.MERGE3] == Merge3Header(INFO, view)


def test_merge3_overlapping_views_are_merged_by_the_lowest_representative() -> None:
    ab = View(ViewId(4, A), [A, B])
    only_b = View(ViewId(2, B), [B])
    m = _merge3(A, ab)
    m.up([_info(B, only_b)], 0.5)
    m.tick(5.0)
    events = [e for e in m.take_up() if isinstance(e, Merge)]
    assert events == [Merge((only_b, ab), (B, A), (frozenset({B}), frozenset({A})))]
    # B sees the same but is not the lowest representative: it stays quiet
    mb = _merge3(B, only_b)
    mb.up([_info(A, ab)], 0.5)
    mb.tick(5.0)
    assert not [e for e in mb.take_up() if isinstance(e, Merge)]


def test_merge3_one_view_everywhere_means_no_merge() -> None:
    view = View(ViewId(3, A), [A, B, C])
    m = _merge3(A, view)
    m.up([_info(B, view), _info(C, view)], 0.5)
    m.tick(5.0)
    assert not [e for e in m.take_up() if isinstance(e, Merge)]
    assert m.stats()["checks_with_many_views"] == 0


def test_merge3_no_merge_when_no_chosen_view_is_represented_by_its_coordinator() -> None:
    """Our own view cut off by max_participants_in_merge, the chosen ones speak through
    members whose coordinators are silent: nobody here may lead, and nothing crashes."""
    d, e = Address(4, "D"), Address(5, "E")
    gone_c = View(ViewId(1, C), [C, B])  # C is dead; B still believes in C's view
    gone_e = View(ViewId(2, e), [e, d])  # E is dead; D still believes in E's view
    mine = View(ViewId(9, A), [A])
    m = _merge3(A, mine)
    m.max_participants_in_merge = 2
    m.up([_info(B, gone_c), _info(d, gone_e)], 0.5)
    m.tick(5.0)
    assert not [ev for ev in m.take_up() if isinstance(ev, Merge)]
    assert m.stats()["checks_with_many_views"] == 1


def test_merge3_a_view_whose_coordinator_is_silent_is_represented_by_a_member() -> None:
    gone = View(ViewId(7, C), [C, B])  # C is dead; B still believes in C's view
    mine = View(ViewId(3, A), [A])
    m = _merge3(A, mine)
    m.up([_info(B, gone)], 0.5)
    m.tick(5.0)
    (event,) = [e for e in m.take_up() if isinstance(e, Merge)]
    assert set(event.coords) == {A, B}


def test_merge3_a_view_is_represented_by_a_member_that_still_has_it() -> None:
    """A moved on from [A|4] (A, C) to [A|6] (A); C still has [A|4]. Were A taken as the
    representative of both views there would be one representative and no merge, and C
    would stay outside forever: [A|4] is represented by C, and A leads as the only
    coordinator of a view it has, even though C sorts lower."""
    low = Address(0, "C")
    old = View(ViewId(4, A), [A, low])
    mine = View(ViewId(6, A), [A])
    m = _merge3(A, mine)
    m.up([_info(low, old)], 0.5)
    m.tick(5.0)
    (event,) = [e for e in m.take_up() if isinstance(e, Merge)]
    assert event == Merge((old, mine), (low, A), (frozenset({low}), frozenset({A})))


def test_merge3_merge_names_the_members_heard_holding_each_view() -> None:
    """Campaign udp-mcast 20310: C, D and E all still hold A's old view [A|3], which A's
    [A|5] removed them from. The merge names every member heard with [A|3] since the last
    check, not only C, which speaks for it: GMS takes back those (they are alive and in
    it), where a member of [A|3] not heard may have left (GMS `_lineage`)."""
    d, e = Address(4, "D"), Address(5, "E")
    old = View(ViewId(3, A), [A, B, C, d, e])
    mine = View(ViewId(5, A), [A])
    m = _merge3(A, mine)
    m.up([_info(C, old), _info(d, old), _info(e, old)], 0.5)
    m.tick(5.0)
    (event,) = [ev for ev in m.take_up() if isinstance(ev, Merge)]
    assert event == Merge((old, mine), (C, A), (frozenset({C, d, e}), frozenset({A})))


def test_merge3_member_that_left_sends_no_info_and_starts_no_merge() -> None:
    """After Disconnect (GMS left the group) the old view must not be gossiped: the others
    would merge the member back in."""
    m = _merge3(A, View(ViewId(3, A), [A, B]))
    m.up([_info(B, View(ViewId(2, B), [B]))], 0.5)
    m.down_event(Disconnect(), 0.6)
    assert m.take_down() == [Disconnect()]
    assert m.view is None and m.next_deadline() == float("inf")
    m.tick(10.0)
    assert m.take_down() == [] and m.take_up() == []


def test_merge3_forgets_what_a_member_said_before_a_view_removed_it() -> None:
    """Issue 38: C's last INFO (the view it left) was heard, then C left gracefully and the
    view without it came: the next check starts no merge with C (it started one, which timed
    out while UNICAST3 resent the request to the departed C for a minute). D, never in our
    view, is heard as before; and C heard again after the view is a merge as before."""
    d = Address(4, "D")
    old, new = View(ViewId(3, A), [A, B, C]), View(ViewId(4, A), [A, B])
    m = _merge3(A, old)
    m.up([_info(C, old)], 0.5)
    m.view_changed(new, 1.0)
    m.tick(5.0)
    assert not [e for e in m.take_up() if isinstance(e, Merge)]
    other = View(ViewId(2, d), [d])
    m.up([_info(C, old), _info(d, other)], 5.5)
    m.view_changed(View(ViewId(5, A), [A]), 6.0)  # B left: D and C are not forgotten
    m.tick(10.0)
    (event,) = [e for e in m.take_up() if isinstance(e, Merge)]
    assert set(event.coords) == {A, C, d}


def test_merge3_over_tcp_finds_members_and_sends_info_to_each_as_a_unicast() -> None:
    """TCP multicasts reach only the current view, so an INFO multicast would never reach
    another partition after it healed: MERGE3 runs a discovery and unicasts INFO to every
    member that answered (found by the real-process partition test over TCP)."""
    mine = View(ViewId(5, A), [A, B])
    m = _merge3(A, mine)
    m.check_stack([TcpTransport()], [])
    m.tick(1.0)
    (find,) = m.take_down()
    assert isinstance(find, FindMembers)
    found = [PingData(x, ("127.0.0.1", 7800 + i), x == C) for i, x in enumerate((A, B, C))]
    m.up_event(MembersFound(tuple(found)), 1.1)
    infos = [msg for batch in m.take_down() if isinstance(batch, list) for msg in batch]
    assert sorted(msg.dest for msg in infos) == [B, C]  # type: ignore[type-var]
    assert all(msg.headers[ids.MERGE3] == Merge3Header(INFO, mine) for msg in infos)
    assert all(msg.flags & Flag.NO_RELIABILITY for msg in infos)
    assert [e for e in m.take_up() if isinstance(e, MembersFound)], "GMS still sees the answer"


def test_merge3_over_a_multicasting_transport_sends_one_info_multicast() -> None:
    m = _merge3(A, View(ViewId(5, A), [A, B]))
    m.check_stack([SimTransport()], [])
    m.tick(1.0)
    (batch,) = m.take_down()
    assert isinstance(batch, list) and [msg.dest for msg in batch] == [None]


async def test_merge_joiner_whose_merge_view_overtakes_its_join_rsp_installs_it(
    autojump_clock: Any,
) -> None:
    """Chaos run udp seed 17 on the simulated network: D joins C's view {C}, its JOIN_RSP
    is lost (UNICAST3 resends it after 8 s; D asks again only after 30 s), and meanwhile
    A merges {A} with C's {C, D}. A's INSTALL_MERGE_VIEW, the first unicast from A, reaches
    D first; D must install the merge view right after the join view instead of dropping
    it and staying behind."""
    from triogroups.protocols.gms._header import JOIN_RSP

    stack = (
        StackConfig.preset("udp")
        .insert_above("UDP", "DISCARD")
        .configure("MERGE3", min_interval=0.5, max_interval=1.0)
        .configure("UNICAST3", xmit_interval=8.0)
        .configure("GMS", view_ack_collection_timeout=0.5)
    )
    async with open_cluster(2, stack, seed=17) as cluster:
        a, c = sorted(cluster.members, key=lambda m: m.address)  # A leads the merge
        first = await cluster.wait_for_view()
        n = first.view_id.id
        await cluster.inject_view(View(ViewId(n + 1, a.address), [a.address]), [a])
        await cluster.inject_view(View(ViewId(n + 1, c.address), [c.address]), [c])
        d = await cluster.add_member("D")

        def join_rsp(msg: Message) -> bool:
            hdr = msg.headers.get(ids.GMS)
            return hdr is not None and hdr.type == JOIN_RSP

        discard = d.protocol("DISCARD")
        discard.ignore(a.address)  # D finds and joins C only
        discard.drop_if(join_rsp, direction="up", count=1)
        await d.stack.set_property("GMS", "join_timeout", 30.0)
        seen: dict[str, list[View]] = {"C": [], "D": []}

        async def watch() -> None:
            while True:
                for name, member in (("C", c), ("D", d)):
                    views = seen[name]
                    if member.view is not None and (not views or views[-1] != member.view):
                        views.append(member.view)
                await trio.sleep(0.01)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await d.connect()
            await wait_until(
                lambda: c.view is not None and d.address in c.view, timeout=10, interval=0.01
            )
            discard.reset()  # A's merge may reach D now
            await cluster.wait_for_view([a, c, d], timeout=60)
            await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
        merges = [v for v in seen["C"] if isinstance(v, MergeView) and d.address in v]
        assert merges and all(v in seen["D"] for v in merges), seen


async def test_merge_member_whose_merge_view_overtakes_its_subgroups_view_installs_both(
    autojump_clock: Any,
) -> None:
    """Campaign udp seed 40031 on the simulated network, reduced: H holds [C|n+1] (C, H)
    when C admits J into [C|n+2] (C, H, J), and C's VIEW does not reach H (here DISCARD
    drops it, and H's MERGE3 INFOs, so no merge takes H's older view in). A merges its
    [A|n+1] with [C|n+2]; the INSTALL_MERGE_VIEW reaches H, still in [C|n+1], before the
    VIEW. H used to ignore the merge view, install [C|n+2] once NAKACK2 retransmitted it,
    and stay behind while C and J went on in the merge view. In JGroups the merge view
    comes to H as C's multicast, behind [C|n+2]: H installs it right after that view."""
    from triogroups.protocols.gms._header import VIEW

    stack = (
        StackConfig.preset("udp")
        .insert_above("UDP", "DISCARD")
        .configure("MERGE3", min_interval=0.5, max_interval=1.0, check_interval=2.0)
        .configure("GMS", view_ack_collection_timeout=0.5, join_timeout=1.0)
    )
    async with open_cluster(3, stack, seed=40031) as cluster:
        a, c, h = sorted(cluster.members, key=lambda m: m.address)  # A leads the merge
        n = (await cluster.wait_for_view()).view_id.id
        await cluster.inject_view(View(ViewId(n + 1, a.address), [a.address]), [a])
        own = await cluster.inject_view(View(ViewId(n + 1, c.address), [c.address, h.address]))
        await cluster.wait_for_view([c, h])
        j = await cluster.add_member("J")
        cluster.network.partition([a.address], [c.address, h.address, j.address])

        def view_msg(msg: Message) -> bool:
            hdr = msg.headers.get(ids.GMS)
            return hdr is not None and hdr.type == VIEW

        discard = h.protocol("DISCARD")
        discard.drop_if(view_msg, direction="up", count=None)
        discard.drop_if(lambda msg: ids.MERGE3 in msg.headers, direction="down", count=None)
        await j.connect()
        await wait_until(lambda: c.view is not None and j.address in c.view, timeout=30)
        grown = c.view
        assert grown is not None and grown.view_id.id == n + 2
        cluster.network.heal()
        await wait_until(lambda: isinstance(c.view, MergeView), timeout=30, interval=0.01)
        merged = c.view
        assert isinstance(merged, MergeView) and grown in merged.subgroups
        await trio.sleep(0.5)  # the INSTALL_MERGE_VIEW reached H, the VIEW did not
        gms = h.protocol("GMS")
        installed = gms.counters["views_installed"]
        assert h.view == own
        discard.reset()
        await c.send(b"after the merge")  # H finds the gap and asks for the VIEW
        await wait_until(lambda: h.view != own, timeout=30, interval=0.01)
        # [C|n+2], then at once the merge view, the one C and J hold
        assert gms.counters["views_installed"] == installed + 2
        assert h.view == merged == j.view


async def test_merge_representative_of_a_stale_view_leaves_out_its_dead_coordinator(
    autojump_clock: Any,
) -> None:
    """Campaign udp seed 10908 on the simulated network, reduced: Z holds [X|n+1] (X, Y,
    Z) when its coordinator X dies, and Y, next in line, is alive but has moved on to
    [L|n+2] (L, Y), so Z never takes over and keeps the stale view until a merge. L leads
    that merge (the only representative that coordinates its view) and never installed
    [X|n+1], so nothing it saw itself says X is gone. Z speaks for [X|n+1] and suspects X:
    the merge view used to name the dead X anyway (in the campaign, with the departed B
    and C too: the merged member's next view then held members whose own next view held
    it, and view order broke). Z answers only for the members it does not suspect."""
    stack = (
        StackConfig.preset("udp")
        .configure("FD_ALL3", interval=0.5, timeout=3.0)
        .configure("VERIFY_SUSPECT", timeout=1.0)
        .configure("MERGE3", min_interval=0.5, max_interval=1.0)
        .configure("GMS", merge_timeout=2.0)
    )
    async with open_cluster(4, stack, seed=10908) as cluster:
        first = await cluster.wait_for_view()
        x, y, z, lead = cluster.members
        n = first.view_id.id
        stale = View(ViewId(n + 1, x.address), [x.address, y.address, z.address])
        moved = View(ViewId(n + 2, lead.address), [lead.address, y.address])
        await cluster.inject_view(stale, [x, z])
        await cluster.inject_view(moved, [lead, y])
        cluster.network.block(z.address, lead.address)  # no merge before Z suspects X
        x.kill()
        gms = z.protocol("GMS")
        with trio.fail_after(30):
            while str(x.address) not in gms.stats()["suspected"]:
                await trio.sleep(0.05)
        assert gms.view == stale  # Y is next and not suspected: Z does not take over
        cluster.network.heal()
        with trio.fail_after(60):
            while not isinstance(z.view, MergeView):
                await trio.sleep(0.05)
        merged = z.view
        assert x.address not in merged, merged
        assert {v.view_id for v in merged.subgroups} == {stale.view_id, moved.view_id}
        assert await cluster.wait_for_view([lead, y, z]) == merged
