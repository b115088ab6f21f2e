"""The shipped udp and tcp presets form a group and deliver, over real loopback sockets."""

from __future__ import annotations

import random
import uuid

import pytest
import trio

from triogroups import StackConfig, open_channel


def _preset(name: str) -> StackConfig:
    """The preset on ports of its own, so parallel runs on this host do not meet."""
    config = StackConfig.preset(name)
    if name == "udp":
        return config.configure("UDP", mcast_port=random.randint(20000, 40000))
    base = random.randint(20000, 40000)
    config = config.configure("TCP", bind_port=base, port_range=20)
    return config.configure("TCPPING", initial_hosts=[f"127.0.0.1[{base}]"], port_range=3)


@pytest.mark.real
@pytest.mark.parametrize("preset", ["udp", "tcp"])
async def test_preset_members_join_one_view_and_deliver_multicasts_in_order(preset: str) -> None:
    config = _preset(preset)
    cluster = f"preset-{uuid.uuid4().hex[:8]}"
    with trio.fail_after(60):
        async with (
            open_channel(cluster, config, "A") as a,
            open_channel(cluster, config, "B") as b,
        ):
            while len(a.view.members) < 2 or len(b.view.members) < 2:
                await trio.sleep(0.05)
            assert a.view == b.view
            for i in range(50):
                await a.send(f"m{i}".encode())
            got = []
            async for msg in b:
                got.append(msg.payload)
                if len(got) == 50:
                    break
            assert got == [f"m{i}".encode() for i in range(50)]
