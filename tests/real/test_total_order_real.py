"""Total order (the ``udp-total`` preset) over real UDP sockets on loopback."""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts
from triogroups import Channel, StackConfig, open_channel

pytestmark = pytest.mark.real

_COUNT = 300


async def _members(stack: AsyncExitStack, config: StackConfig, names: list[str]) -> list[Channel]:
    """Channels joined one at a time (the first coordinates), once all see one view."""
    cluster = f"real-{uuid.uuid4().hex[:8]}"
    channels = [
        await stack.enter_async_context(open_channel(cluster, config, name)) for name in names
    ]
    while any(len(ch.view.members) < len(names) for ch in channels):
        await trio.sleep(0.05)
    return channels


async def _send(ch: Channel, count: int) -> None:
    for i in range(count):
        await ch.send(f"{ch.name}-{i}".encode(), total_order=True)
        if i % 50 == 0:
            await trio.sleep(0.01)


async def test_total_order_real_three_senders_deliver_one_sequence(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """Three members multicast 300 each at once with ``total_order=True``: every member
    delivers the same sequence of all 900, each sender's in its order."""
    names = ["A", "B", "C"]
    with trio.fail_after(120):
        async with AsyncExitStack() as stack:
            channels = await _members(stack, preset_on_own_ports("udp-total"), names)
            got: dict[str, list[bytes]] = {}

            async def receive(ch: Channel) -> None:
                got[ch.name] = [(await ch.receive()).payload for _ in range(_COUNT * 3)]

            async with trio.open_nursery() as nursery:
                for ch in channels:
                    nursery.start_soon(receive, ch)
                    nursery.start_soon(_send, ch, _COUNT)
    assert got["A"] == got["B"] == got["C"]
    for name in names:
        assert [p for p in got["A"] if p.startswith(name.encode())] == [
            f"{name}-{i}".encode() for i in range(_COUNT)
        ]


async def test_total_order_real_coordinator_leaves_mid_stream(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """The coordinator A multicasts 100 and closes its channel while B and C stream 300
    each: B and C deliver one identical sequence with all 700 messages, once each."""
    with trio.fail_after(120):
        async with AsyncExitStack() as stack:
            a, b, c = await _members(stack, preset_on_own_ports("udp-total"), ["A", "B", "C"])
            got: dict[str, list[bytes]] = {}

            async def receive(ch: Channel) -> None:
                got[ch.name] = [(await ch.receive()).payload for _ in range(100 + 2 * _COUNT)]

            async def coordinator() -> None:
                await _send(a, 100)
                assert await a.aclose()  # the leave flushed

            async with trio.open_nursery() as nursery:
                for ch in (b, c):
                    nursery.start_soon(receive, ch)
                    nursery.start_soon(_send, ch, _COUNT)
                nursery.start_soon(coordinator)
            assert b.view.coord == b.address
            stats = b.stack.protocol("SEQUENCER").stats()
            assert stats["recoveries"] == 1 and stats["forward_table"] == 0
    assert got["B"] == got["C"]
    assert len(set(got["B"])) == len(got["B"])
    assert sorted(p for p in got["B"] if p.startswith(b"A-")) == sorted(
        f"A-{i}".encode() for i in range(100)
    )
