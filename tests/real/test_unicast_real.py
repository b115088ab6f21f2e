"""Issue 4: UNICAST3 between two member processes over real UDP and TCP, 10% loss each way.

Each member sends 10,000 unicasts to the other while DISCARD drops a tenth of
everything going down and coming up. Every message must be delivered exactly
once and in send order; DISCARD must have dropped messages and UNICAST3 must
have retransmitted, so the test cannot pass on a run that lost nothing; and
acks must purge both send windows in the end.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from tests._members.processes import MemberProcess, check_tally, layer_stats
from triogroups.testing import free_ports

pytestmark = pytest.mark.real

STACKS = Path(__file__).parent / "stacks"
COUNT = 10_000


def _props(transport: str, name: str, base: int) -> dict[str, dict[str, Any]]:
    """Ports of this run only; a DISCARD seed per member, so the two lose differently."""
    discard = {"DISCARD": {"seed": base + ord(name)}}
    if transport == "udp":
        return {"UDP": {"mcast_port": base}, **discard}
    return {
        "TCP": {"bind_port": base, "port_range": 10},
        "TCPPING": {"initial_hosts": [f"127.0.0.1[{base + i}]" for i in range(2)], "port_range": 0},
        **discard,
    }


async def _connect(members: list[MemberProcess], find_timeout: float) -> None:
    """Discovery until each member knows the other, then the view [A, B] by hand."""
    for m in members:
        await m.command("find", timeout=find_timeout)
    for m in members:
        found = await m.wait_for(lambda e: e["event"] == "found")
        assert {f["uuid"] for f in found["members"]} == {o.uuid for o in members if o is not m}
    view = [[m.uuid, m.name] for m in members]
    for m in members:
        await m.command("view", members=view)
        await m.wait_for(lambda e: e["event"] == "view_sent")


@pytest.mark.parametrize("transport", ["udp", "tcp"])
async def test_unicast3_delivers_10000_each_way_exactly_once_in_order_with_10_percent_loss(
    transport: str,
) -> None:
    base = free_ports(11)
    cluster = f"uc-real-{uuid.uuid4().hex[:8]}"
    stack = str(STACKS / f"unicast3-{transport}.toml")
    members: list[MemberProcess] = []
    try:
        async with trio.open_nursery() as nursery:
            with trio.fail_after(240):
                for name in "AB":
                    members.append(
                        await MemberProcess.start(
                            nursery,
                            name,
                            stack=stack,
                            cluster=cluster,
                            props=_props(transport, name, base),
                            tally=True,
                        )
                    )
                await _connect(members, find_timeout=1.0 if transport == "udp" else 5.0)
                a, b = members
                await a.burst(b.uuid, "A", COUNT)
                await b.burst(a.uuid, "B", COUNT)
                check_tally(b.name, await b.tally(at_least=COUNT), {"A": (a.uuid, COUNT)})
                check_tally(a.name, await a.tally(at_least=COUNT), {"B": (b.uuid, COUNT)})
                for m in members:
                    stats = await m.stats()
                    discard = layer_stats(stats, "DISCARD")
                    assert discard["dropped_down"] > 0 and discard["dropped_up"] > 0, m.name
                    assert layer_stats(stats, "UNICAST3")["retransmissions"] > 0, m.name
                for m in members:  # acks purge the send windows: nothing is kept
                    while layer_stats(await m.stats(), "UNICAST3")["unacked"]:
                        await trio.sleep(0.2)
                for m in members:  # nothing arrived twice after the count was reached
                    check_tally(
                        m.name,
                        await m.tally(),
                        {o.name: (o.uuid, COUNT) for o in members if o is not m},
                    )
                    assert await m.stop() == 0
    finally:
        for m in members:
            m.kill()
