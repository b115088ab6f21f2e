"""Issue 5: reliable multicast among three member processes over real sockets.

Each member multicasts 10,000 messages; every member (the sender included)
must deliver all 30,000 exactly once, each sender's in send order:

- NAKACK2 (+ STABLE) over UDP multicast, DISCARD dropping 10% each way;
- MCAST over UDP multicast, DISCARD dropping 10% each way;
- NAKACK2 with ``xmit_interval=0`` (seed 003: seqnos order, TCP retransmits)
  over TCP, with no loss below it;
- NAKACK2 over UDP with 10 KB datagrams, one sender losing half of what it
  sends: every retransmission request must fit one datagram (issue 12 item 2).

With loss, DISCARD must have dropped and the protocol must have
retransmitted, so a run that lost nothing cannot pass. Afterwards every
sender must hold nothing it sent any more: STABLE purges NAKACK2, acks purge
MCAST's window.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from tests._members.processes import MemberProcess, check_tally, layer_stats
from triogroups.testing import free_ports

pytestmark = pytest.mark.real

STACKS = Path(__file__).parent / "stacks"
COUNT = 10_000
NAMES = "ABC"

#: Per reliability protocol: how many messages it still keeps of what it sent.
RETAINED: dict[str, Callable[[dict[str, Any]], int]] = {
    "NAKACK2": lambda stats: int(stats["sent_retained"]),
    "MCAST": lambda stats: int(stats["send_window"]["size"]),
}


def _udp_props(name: str, base: int) -> dict[str, dict[str, Any]]:
    """This run's multicast port; a DISCARD seed per member, so each loses differently."""
    return {"UDP": {"mcast_port": base}, "DISCARD": {"seed": base + ord(name)}}


def _tcp_props(name: str, base: int) -> dict[str, dict[str, Any]]:
    hosts = [f"127.0.0.1[{base + i}]" for i in range(len(NAMES))]
    return {
        "TCP": {"bind_port": base, "port_range": 10},
        "TCPPING": {"initial_hosts": hosts, "port_range": 0},
    }


async def _start(
    nursery: trio.Nursery, stack: str, props: Any, members: list[MemberProcess]
) -> None:
    """Three tallying members that found each other and installed the view [A, B, C]."""
    base = free_ports(11)
    cluster = f"mc-real-{uuid.uuid4().hex[:8]}"
    for name in NAMES:
        members.append(
            await MemberProcess.start(
                nursery,
                name,
                stack=str(STACKS / stack),
                cluster=cluster,
                props=props(name, base),
                tally=True,
            )
        )
    for m in members:
        await m.command("find", timeout=5.0 if props is _tcp_props else 1.0)
    for m in members:
        found = await m.wait_for(lambda e: e["event"] == "found")
        assert {f["uuid"] for f in found["members"]} == {o.uuid for o in members if o is not m}
    view = [[m.uuid, m.name] for m in members]
    for m in members:
        await m.command("view", members=view)
        await m.wait_for(lambda e: e["event"] == "view_sent")


async def _multicast_and_check(members: list[MemberProcess]) -> list[dict[str, Any]]:
    """Every member bursts COUNT multicasts; all deliver all; returns each member's stats."""
    for m in members:
        await m.burst(None, m.name, COUNT)
    want = {m.name: (m.uuid, COUNT) for m in members}
    for m in members:
        check_tally(m.name, await m.tally(at_least=COUNT * len(members)), want)
    stats = [await m.stats() for m in members]
    for m in members:  # nothing arrived twice after the count was reached
        check_tally(m.name, await m.tally(), want)
    return stats


async def _wait_until_purged(members: list[MemberProcess], protocol: str) -> None:
    """Poll each member's stats until it keeps none of its own multicasts."""
    for m in members:
        while RETAINED[protocol](layer_stats(await m.stats(), protocol)):
            await trio.sleep(0.2)


@pytest.mark.parametrize(
    ("stack", "protocol", "retransmitted"),
    [
        ("nakack2-udp.toml", "NAKACK2", "xmit_rsps_sent"),
        ("mcast-udp.toml", "MCAST", "retransmissions"),
    ],
)
async def test_three_members_deliver_10000_multicasts_each_exactly_once_with_10_percent_loss(
    stack: str, protocol: str, retransmitted: str
) -> None:
    members: list[MemberProcess] = []
    try:
        async with trio.open_nursery() as nursery:
            with trio.fail_after(240):
                await _start(nursery, stack, _udp_props, members)
                stats = await _multicast_and_check(members)
                for m, s in zip(members, stats, strict=True):
                    discard = layer_stats(s, "DISCARD")
                    assert discard["dropped_down"] > 0 and discard["dropped_up"] > 0, m.name
                    assert layer_stats(s, protocol)[retransmitted] > 0, m.name
                await _wait_until_purged(members, protocol)
                for m in members:
                    assert await m.stop() == 0
    finally:
        for m in members:
            m.kill()


async def test_three_members_over_tcp_with_nakack2_xmit_interval_0_deliver_every_multicast() -> (
    None
):
    """Seed 003: without retransmission, TCP alone makes 30,000 multicasts arrive, in order."""
    members: list[MemberProcess] = []
    try:
        async with trio.open_nursery() as nursery:
            with trio.fail_after(240):
                await _start(nursery, "nakack2-tcp-noxmit.toml", _tcp_props, members)
                stats = await _multicast_and_check(members)
                for m, s in zip(members, stats, strict=True):
                    nakack2 = layer_stats(s, "NAKACK2")
                    assert not nakack2["xmit_task_running"], m.name
                    assert nakack2["xmit_reqs_sent"] == 0 and nakack2["xmit_rsps_sent"] == 0, m.name
                await _wait_until_purged(members, "NAKACK2")
                for m in members:
                    assert await m.stop() == 0
    finally:
        for m in members:
            m.kill()


async def test_nakack2_xmit_reqs_fit_10_kb_datagrams_when_half_of_20000_multicasts_are_lost() -> (
    None
):
    """Issue 12 item 2 (JGRP-1868): max_bundle_size 10 KB, max_xmit_req_size 5000.

    A multicasts 20,000 messages and loses about half of them (and of its
    retransmissions) on the way down. B and C ask for thousands of scattered
    seqnos, which as ranges take more than a datagram: each request is cut
    to fit one, nothing is dropped as oversized, and all members deliver all.
    """

    def props(name: str, base: int) -> dict[str, dict[str, Any]]:
        loss = 0.5 if name == "A" else 0.0
        return {"UDP": {"mcast_port": base}, "DISCARD": {"down_loss": loss, "seed": base}}

    members: list[MemberProcess] = []
    try:
        async with trio.open_nursery() as nursery:
            with trio.fail_after(240):
                await _start(nursery, "nakack2-udp-small-bundles.toml", props, members)
                a = members[0]
                await a.burst(None, "a", 20_000)
                want = {"a": (a.uuid, 20_000)}
                for m in members:
                    check_tally(m.name, await m.tally(at_least=20_000), want)
                stats = {m.name: await m.stats() for m in members}
                assert layer_stats(stats["A"], "DISCARD")["dropped_down"] > 5000
                for name, s in stats.items():
                    assert layer_stats(s, "UDP").get("dropped_oversized", 0) == 0, name
                for name in "BC":
                    assert layer_stats(stats[name], "NAKACK2")["xmit_reqs_capped"] > 0, name
                for m in members:
                    assert await m.stop() == 0
    finally:
        for m in members:
            m.kill()
