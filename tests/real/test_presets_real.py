"""The shipped udp and tcp presets form a group and deliver, over real loopback sockets."""

from __future__ import annotations

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts, TwoChannels


@pytest.mark.real
@pytest.mark.parametrize("preset", ["udp", "tcp"])
async def test_preset_members_join_one_view_and_deliver_multicasts_in_order(
    preset: str, preset_on_own_ports: PresetOnOwnPorts, two_channels: TwoChannels
) -> None:
    config = preset_on_own_ports(preset)
    with trio.fail_after(60):
        async with two_channels(config) as (a, b):
            assert a.view == b.view
            for i in range(50):
                await a.send(f"m{i}".encode())
            got = []
            async for msg in b:
                got.append(msg.payload)
                if len(got) == 50:
                    break
            assert got == [f"m{i}".encode() for i in range(50)]
