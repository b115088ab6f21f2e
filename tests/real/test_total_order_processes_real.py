"""Total order through member processes over UDP on loopback: the coordinator is killed.

Four processes run the shipped ``udp-total`` stack with DISCARD dropping 10% of what
arrives at each. Every member bursts multicasts; the coordinator's process is killed
(SIGKILL) once it has delivered some of them. The three survivors deliver one identical
sequence, in which every survivor's messages are all present, once, in send order. Every
wait is bounded by a generous deadline; nothing asserts on durations.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from tests._members.group_processes import describe, start_group, wait_same_view
from triogroups.testing import free_ports

pytestmark = pytest.mark.real

COUNT = 1000
DEADLINE = 120


def _props() -> dict[str, dict[str, Any]]:
    return {
        "UDP": {"mcast_port": free_ports()},
        "DISCARD": {"up_loss": 0.1},
        "GMS": {"join_timeout": 1.0, "view_ack_collection_timeout": 1.0},
    }


def _sequencer(stats: dict[str, Any]) -> dict[str, Any]:
    """SEQUENCER's stats in a member's ``stats`` event."""
    layer = next(layer for layer in stats["layers"] if layer["protocol"] == "SEQUENCER")
    found: dict[str, Any] = layer["stats"]
    return found


async def test_total_order_processes_coordinator_killed_mid_stream_one_sequence() -> None:
    cluster = f"total-{uuid.uuid4().hex[:8]}"
    async with trio.open_nursery() as nursery:
        members = await start_group(
            nursery, ["A", "B", "C", "D"], stack="udp-total", cluster=cluster, props=_props()
        )
        a, *stayed = members
        try:
            with trio.fail_after(DEADLINE):
                await wait_same_view(members)
                marks = {m.name: len(m.events) for m in stayed}
                for m in members:
                    await m.command("burst", to=None, prefix=m.name, count=COUNT)
                await a.wait_until(lambda m: len(m.delivered()) >= 200)
                a.kill()

                def complete(got: list[tuple[str, str]]) -> bool:
                    payloads = [p for _, p in got]
                    return all(
                        sum(p.startswith(f"{m.name}-") for p in payloads) >= COUNT for m in stayed
                    )

                for m in stayed:
                    await m.wait_delivered_since(marks[m.name], complete)
                await trio.sleep(2)  # anything doubled or late would show by now
                sequences = {m.name: m.delivered_since(marks[m.name]) for m in stayed}
                recoveries = [_sequencer(await m.stats())["recoveries"] for m in stayed]
        except trio.TooSlowError:
            raise AssertionError(f"total order stalled: {describe(members)}") from None
        finally:
            for m in members:
                if m.alive:
                    m.kill()
    assert sorted(recoveries) == [0, 0, 1]  # the next coordinator recovered, once
    first = sequences["B"]
    assert all(seq == first for seq in sequences.values()), {
        n: len(s) for n, s in sequences.items()
    }
    payloads = [p for _, p in first]
    assert len(set(payloads)) == len(payloads)
    for m in stayed:
        assert [p for p in payloads if p.startswith(f"{m.name}-")] == [
            f"{m.name}-{i}" for i in range(COUNT)
        ]
