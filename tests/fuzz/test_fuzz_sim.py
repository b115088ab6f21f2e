"""Whole-datagram fuzzing of running members on the simulated network.

Hostile datagrams from strangers (any registered header, any well-typed values,
addressed to a member or the group; the values name only strangers, so no
forgery speaks for a member) go through the whole stack: the SIM transport's
decoder, then every layer. Each member must keep running (no layer crash, so no
restart) and the three members must still deliver each other's multicasts and
unicasts exactly once and in order (`SimCluster.wait_until_delivered`).
"""

from __future__ import annotations

import trio
from hypothesis import given
from hypothesis import strategies as st
from trio.testing import MockClock

from tests.fuzz import _hostile
from tests.fuzz._protocol_ids import registered_ids
from tests.fuzz._settings import fuzz_settings
from triogroups import Address, Message
from triogroups.testing import open_cluster
from triogroups.wire import WireCodec

STRANGERS = (Address(0x5EA, "S1"), Address(0x5EB, "S2"))
ME = Address(0xA, "A")  # stands for the member under attack in the drawn messages
IDS = registered_ids()


async def _scenario(preset: str, hostile: list[Message]) -> None:
    async with open_cluster(3, preset, seed=2) as cluster:
        a, b, c = cluster.members
        codec = WireCodec(cluster.cluster)
        for msg in hostile:
            dest = a.address if msg.dest is not None else None
            msg.dest = dest
            src = msg.src or STRANGERS[0]
            cluster.network.transmit(src, dest, codec.encode(dest, src, [msg]))
            await trio.sleep(0.05)
        for i, member in enumerate((a, b, c)):
            await member.send(f"m-{member.name}{i}".encode())
            nxt = (b, c, a)[i]
            await member.send(f"u-{member.name}{i}".encode(), to=nxt.address)
        await cluster.wait_until_delivered(timeout=60)
        for member in (a, b, c):
            assert member.stack.crash_reports == []


def _run(preset: str, hostile: list[Message]) -> None:
    trio.run(_scenario, preset, hostile, clock=MockClock(autojump_threshold=0))


_hostile_datagrams = st.lists(
    _hostile.messages(IDS, STRANGERS, STRANGERS, ME), min_size=1, max_size=12
)


@fuzz_settings(12)
@given(_hostile_datagrams)
def test_fuzz_sim_udp_members_survive_strangers_datagrams_and_still_deliver(
    hostile: list[Message],
) -> None:
    _run("udp", hostile)


@fuzz_settings(8)
@given(_hostile_datagrams)
def test_fuzz_sim_udp_mcast_members_survive_strangers_datagrams_and_still_deliver(
    hostile: list[Message],
) -> None:
    _run("udp-mcast", hostile)


@fuzz_settings(8)
@given(_hostile_datagrams)
def test_fuzz_sim_tcp_members_survive_strangers_datagrams_and_still_deliver(
    hostile: list[Message],
) -> None:
    _run("tcp", hostile)
