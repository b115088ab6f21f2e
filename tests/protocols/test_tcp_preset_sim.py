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
