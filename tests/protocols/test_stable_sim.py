"""STABLE with NAKACK2 on the simulated network: rounds purge, stability heals a lost tail."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from triogroups import Flag, Message, StackConfig
from triogroups.protocols import ids
from triogroups.testing import SimCluster, open_cluster, wait_until


def _retained(cluster: SimCluster) -> list[int]:
    return [m.protocol("NAKACK2").retained() for m in cluster.members]


async def test_stable_rounds_purge_what_every_member_delivered(autojump_clock: Any) -> None:
    stack = StackConfig.of("SIM", "NAKACK2", ("STABLE", {"desired_avg_gossip": 2.0}))
    async with open_cluster(3, stack, seed=11, loss=0.1) as cluster:
        for member in cluster.members:
            await member.send_many([f"{member.name}{i}".encode() for i in range(50)])
        await trio.sleep(0.1)
        assert sum(_retained(cluster)) >= 150  # the senders keep all until a round says stable
        await cluster.wait_until_delivered(timeout=30)
        await wait_until(lambda: _retained(cluster) == [0, 0, 0])
        coord = cluster.members[0].protocol("STABLE").stats()
        assert coord["stability_rounds"] >= 1
        assert all(m.protocol("NAKACK2").stats()["sent_low"] == 50 for m in cluster.members)


async def test_stable_max_bytes_purges_before_the_timer(autojump_clock: Any) -> None:
    layers = ("NAKACK2", ("STABLE", {"desired_avg_gossip": 1000.0, "max_bytes": 10_000}))
    async with open_cluster(3, StackConfig.of("SIM", *layers), seed=12) as cluster:
        a = cluster.members[0]
        await a.send_many([f"{i:04}".encode() * 250 for i in range(30)])
        await cluster.wait_until_delivered(timeout=5)
        await wait_until(lambda: a.protocol("NAKACK2").retained() < 30, timeout=5)
        assert trio.current_time() < 100  # far before any timer round
        assert a.protocol("STABLE").stats()["max_bytes_reached"] >= 1


async def test_stable_stability_heals_a_lost_last_message(autojump_clock: Any) -> None:
    """Without HIGHEST_SEQNO, a STABILITY that shows more than B has makes B ask for it."""
    stack = StackConfig.of(
        "SIM",
        "DISCARD",
        ("NAKACK2", {"resend_last_seqno": False}),
        ("STABLE", {"desired_avg_gossip": 1.0}),
    )
    async with open_cluster(3, stack, seed=13) as cluster:
        a, b, _c = cluster.members

        def last(msg: Message) -> bool:
            return msg.payload == b"a3" and ids.NAKACK2 in msg.headers

        b.protocol("DISCARD").drop_if(last, direction="up")
        await a.send_many([b"a1", b"a2", b"a3"])
        await trio.sleep(0.5)
        assert [m.payload for m in b.delivered] == [b"a1", b"a2"]
        await cluster.wait_until_delivered(timeout=30)
        assert b.protocol("NAKACK2").stats()["xmit_reqs_sent"] >= 1
        assert a.protocol("NAKACK2").stats()["highest_seqno_sent"] == 0


@pytest.mark.parametrize("desired_avg_gossip", [0.0, 1000.0])
async def test_stable_jgrp2605_dont_loopback_sender_buffer_is_freed_by_max_bytes(
    autojump_clock: Any, desired_avg_gossip: float
) -> None:
    """JGRP-2605: B only multicasts with DONT_LOOPBACK, 10 x 5 KB, ``max_bytes`` 10 KB.

    B counts the bytes it sends, so it gossips too and the rounds A and C start
    complete: B's NAKACK2 buffer is freed with the periodic gossip off (0) or far
    away (1000 s). Before, B counted nothing, never voted, and kept all 10.
    """
    props = {"desired_avg_gossip": desired_avg_gossip, "max_bytes": 10_000}
    stack = StackConfig.of("SIM", "NAKACK2", ("STABLE", props))
    async with open_cluster(3, stack, seed=2605) as cluster:
        a, b, c = cluster.members
        for i in range(10):
            await b.send(f"{i}".encode() * 5000, flags=Flag.DONT_LOOPBACK)
        # DONT_LOOPBACK: B delivers none of its own (wait_until_delivered expects them).
        await wait_until(lambda: [len(m.delivered) for m in (a, c)] == [10, 10], timeout=5)
        assert b.delivered == []
        nak = b.protocol("NAKACK2")
        await wait_until(lambda: nak.stats()["sent_retained"] == 0, timeout=10)
        assert nak.stats()["sent_low"] == 10
        assert trio.current_time() < 100  # far before any timer round
        assert b.protocol("STABLE").stats()["max_bytes_reached"] >= 1


async def test_stable_burst_that_starts_a_round_mid_way_is_purged_with_gossip_off(
    autojump_clock: Any,
) -> None:
    """Gossip off, ``max_bytes`` 10 KB, 50 ms a hop. A's first 10 KB start a round on
    every member; the next 9 KB arrive after each member's digest and before its
    STABILITY; 1 KB comes later. Those 9 KB still count, so the last 1 KB makes 10 KB
    and a second round purges all of A's buffer. Before, each STABILITY forgot the
    9 KB and A kept 10 messages for good."""
    props = {"desired_avg_gossip": 0.0, "max_bytes": 10_000}
    stack = StackConfig.of("SIM", "NAKACK2", ("STABLE", props))
    async with open_cluster(3, stack, seed=14, min_delay=0.05, max_delay=0.05) as cluster:
        a = cluster.members[0]
        payloads = [f"{i:04}".encode() * 250 for i in range(20)]
        await a.send_many(payloads[:10])
        await trio.sleep(0.07)  # digests at 0 (A) and 0.05 (B, C); STABILITY at 0.1 and 0.15
        await a.send_many(payloads[10:19])
        await trio.sleep(1.0)
        await a.send(payloads[19])
        await cluster.wait_until_delivered(timeout=5)
        nak = a.protocol("NAKACK2")
        await wait_until(lambda: nak.stats()["sent_retained"] == 0, timeout=10)
        assert nak.stats()["sent_low"] == 20
        assert a.protocol("STABLE").stats()["stability_rounds"] == 2
