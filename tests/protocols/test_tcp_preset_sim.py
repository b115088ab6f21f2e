"""The ``tcp`` preset on the simulated network: what its transport drops, NAKACK2 gets back.

A 20-minute real chaos run over TCP with 7 members lost 78 multicasts of E at C: C, a
new incarnation, was paused while a merge gave it E as a peer, and E's multicasts to it
never arrived; with the preset's NAKACK2 not retransmitting (seed 003, ``xmit_interval
= 0``), C's window for E waited for them for ever and delivered nothing of E's after
them. Seed 003 holds only if the transport never drops, and a TCP transport does drop
what it cannot send (a connection that cannot be made, a member it takes for gone). The
preset now retransmits as JGroups' own tcp.xml does; these scenarios drop bundles
between two TCP-like (lossless) simulated members for a moment, well inside failure
detection, and check that every multicast arrives.
"""

from __future__ import annotations

from typing import Any

import trio

from triogroups import StackConfig
from triogroups.testing import open_cluster
from triogroups.view import MergeView


def _tcp() -> StackConfig:
    return StackConfig.preset("tcp")


async def test_tcp_preset_delivers_multicasts_its_transport_dropped_for_a_moment(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(300):
        async with open_cluster(3, _tcp(), seed=7) as cluster:
            a, _b, c = cluster.members
            for i in range(5):
                await a.send(f"before-{i}".encode())
            cluster.network.block(a.address, c.address)  # what A sends C is dropped
            for i in range(10):
                await a.send(f"dropped-{i}".encode())
                await trio.sleep(0.05)
            await trio.sleep(1.0)  # far inside FD_ALL3's 5 s: nobody is suspected
            cluster.network.heal()
            for i in range(5):
                await a.send(f"after-{i}".encode())
            await cluster.wait_until_delivered(timeout=60)
            got = [m.payload for m in c.delivered if m.src == a.address]
            assert len(got) == 20
            assert len(c.view.members) == 3


async def test_tcp_preset_member_joins_an_existing_group_by_tcpping_discovery(
    autojump_clock: Any,
) -> None:
    """A tcp member finds the group by asking TCPPING's ``initial_hosts`` (the simulated
    transport delivers discovery's `SendToHosts` to the endpoints there) and joins it: its
    first view is the group's next one, made by the coordinator, not a singleton view of
    its own that only a merge would bring back (every tcp start of campaign seed 10627
    found nobody before the simulated transport delivered `SendToHosts`)."""
    with trio.fail_after(300):
        async with open_cluster(2, _tcp(), seed=3) as cluster:
            a, b = cluster.members
            before = a.view
            assert before is not None
            c = await cluster.add_member()
            view = await cluster.join(c)
            assert set(view.members) == {a.address, b.address, c.address}
            assert not isinstance(view, MergeView)
            assert view.view_id.coord == before.coord
            assert view.view_id.id == before.view_id.id + 1
            assert c.stack.protocol("TCPPING").stats()["responses_received"] >= 2
            for member in cluster.members:
                assert member.stack.protocol("MERGE3").stats()["merges_started"] == 0


async def test_tcp_preset_merge3_finds_other_views_by_discovery_and_merges(
    autojump_clock: Any,
) -> None:
    """The simulated TCP transport multicasts to its view only and says it cannot multicast,
    so MERGE3 takes its TCP path: a discovery round (TCPPING) every INFO interval, then an
    INFO unicast to each member found. After a split heals, the two views hear of each
    other that way and merge."""
    with trio.fail_after(600):
        async with open_cluster(3, _tcp(), seed=5) as cluster:
            a, b, c = cluster.members
            assert a.stack.protocols[0].supports_multicasting is False
            finds = {m.name: m.stack.protocol("TCPPING").stats()["finds"] for m in cluster.members}
            cluster.partition([a, b], [c])
            await cluster.wait_for_view([a, b], timeout=120)
            await cluster.wait_for_view([c], timeout=120)
            cluster.heal()
            view = await cluster.wait_for_view(timeout=120)
            assert isinstance(view, MergeView)
            assert (
                sum(m.stack.protocol("MERGE3").stats()["merges_started"] for m in cluster.members)
                >= 1
            )
            for member in cluster.members:
                ping = member.stack.protocol("TCPPING").stats()
                assert ping["finds"] > finds[member.name]  # MERGE3's rounds, not joins
                assert member.stack.protocol("MERGE3").stats()["infos_received"] > 0
