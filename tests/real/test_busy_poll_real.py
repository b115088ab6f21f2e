"""Busy polling for real: member processes over UDP multicast and TCP, and group RPC through
the full presets, deliver as without it, and each transport parks its poller once idle."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests._members.processes import MemberProcess, layer_stats
from tests.real.conftest import PresetOnOwnPorts, TwoChannels
from tests.real.test_three_members import STACKS, run_three, tcp_props, udp_props
from triogroups import Channel

pytestmark = pytest.mark.real

WINDOW = "200us"


def _busy_poll(stats: dict[str, Any], transport: str) -> dict[str, Any]:
    return layer_stats(stats, transport)["busy_poll"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("transport", "stack", "props", "find_timeout"),
    [
        ("UDP", "udp-transport.toml", udp_props, 1.0),
        ("TCP", "tcp-transport.toml", tcp_props, 5.0),
    ],
)
async def test_busy_polling_member_processes_deliver_everything_and_stop_spinning_when_idle(
    transport: str, stack: str, props: Any, find_timeout: float
) -> None:
    """Three member processes with ``busy_poll`` set exchange unicasts and multicasts
    (all delivered, multicasts in order per sender); every member's poller ran, and
    once the traffic has stopped none of them is spinning."""
    layers = props()
    layers[transport]["busy_poll"] = WINDOW

    async def every_poller_ran_and_parked(members: list[MemberProcess]) -> None:
        for m in members:
            while True:
                polled = _busy_poll(await m.stats(), transport)
                if polled["windows"] >= 1 and not polled["spinning"]:
                    break
                await trio.sleep(0.05)

    await run_three(
        str(STACKS / stack), layers, find_timeout, then=every_poller_ran_and_parked, seconds=60
    )


@pytest.mark.parametrize("preset", ["udp", "tcp"])
async def test_group_rpc_with_busy_polling_answers_every_call_through_the_full_preset(
    preset: str, preset_on_own_ports: PresetOnOwnPorts, two_channels: TwoChannels
) -> None:
    """``rpc.call_one`` between two channels on the full preset with ``busy_poll`` set:
    every call comes back with its own answer, both transports busy-polled, and both
    pollers park once the calls stop. Turned off at run time (`Stack.set_property`),
    the calls go on answering and no poller spins again."""
    transport = preset.upper()
    config = preset_on_own_ports(preset).configure(transport, busy_poll=WINDOW)

    def polled(ch: Channel) -> dict[str, Any]:
        return _busy_poll(ch.stack.stats(), transport)

    with trio.fail_after(120):
        async with two_channels(config) as (a, b):
            b.rpc.register("echo", lambda payload: payload)
            for i in range(200):
                payload = i.to_bytes(4, "big") * 250
                assert await a.rpc.call_one("echo", payload, to=b.address) == payload
            for ch in (a, b):
                assert polled(ch)["windows"] >= 1
                while polled(ch)["spinning"]:
                    await trio.sleep(0.05)
            for ch in (a, b):
                await ch.stack.set_property(transport, "busy_poll", 0)
            spun = [polled(ch)["windows"] for ch in (a, b)]
            for i in range(50):
                payload = i.to_bytes(4, "big") * 250
                assert await a.rpc.call_one("echo", payload, to=b.address) == payload
            assert [polled(ch)["windows"] for ch in (a, b)] == spun
