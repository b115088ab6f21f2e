"""FRAG over real loopback sockets: large messages leave as fragments and arrive whole.

The shipped presets, two channels each: over UDP multicast with DISCARD dropping
10% of what arrives below NAKACK2 (so fragments are lost and retransmitted),
and over TCP (lossless; DISCARD may not sit below its NAKACK2). A payload above
FRAG's ``max_message_size`` is refused at `Channel.send` and the group goes on.
"""

from __future__ import annotations

import random

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts, TwoChannels
from triogroups import Channel, MessageTooLarge, StackConfig

FRAG_SIZE = 8_000  # small fragments: a 100 KB message is 13 datagrams or frames
MAX_MESSAGE = 1 << 20


def _payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _config(base: StackConfig, preset: str) -> StackConfig:
    """Small fragments and (UDP) 10% loss below NAKACK2."""
    config = base.configure("FRAG", frag_size=FRAG_SIZE, max_message_size=MAX_MESSAGE)
    if preset == "udp":
        return config.insert_above("VERIFY_SUSPECT", "DISCARD", up_loss=0.1)
    return config


async def _receive(ch: Channel, count: int) -> list[bytes]:
    got: list[bytes] = []
    async for msg in ch:
        got.append(msg.payload)
        if len(got) == count:
            break
    return got


@pytest.mark.real
@pytest.mark.parametrize("preset", ["udp", "tcp"])
async def test_frag_large_multicasts_and_unicasts_arrive_whole_and_in_order_over_real_sockets(
    preset: str, preset_on_own_ports: PresetOnOwnPorts, two_channels: TwoChannels
) -> None:
    config = _config(preset_on_own_ports(preset), preset)
    multicasts = [_payload(100_000 + i, i) for i in range(10)]
    unicasts = [_payload(60_000 + i, 100 + i) for i in range(5)]
    with trio.fail_after(120):
        async with two_channels(config) as (a, b):
            with pytest.raises(MessageTooLarge):
                await a.send(bytes(MAX_MESSAGE + 1))
            for payload in multicasts:
                await a.send(payload)
            for payload in unicasts:
                await a.send(payload, to=b.address)
            got = await _receive(b, len(multicasts) + len(unicasts))
            own = await _receive(a, len(multicasts))  # A's own multicasts come back too
            frag_a, frag_b = a.stack.protocol("FRAG").stats(), b.stack.protocol("FRAG").stats()
            lost = b.stack.protocol("DISCARD").stats() if preset == "udp" else None
    # unicasts and multicasts of one sender are ordered separately (UNICAST3 vs NAKACK2)
    assert [p for p in got if p in multicasts] == multicasts
    assert [p for p in got if p in unicasts] == unicasts
    assert own == multicasts
    assert frag_a["fragments_sent"] >= 15 * (60_000 // FRAG_SIZE)
    assert frag_b["reassembled"] == 15
    if lost is not None:
        assert lost["dropped_up"] > 0
