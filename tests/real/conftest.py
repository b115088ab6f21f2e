"""Shared set-up of the in-process real-socket tests: presets on ports of their own, and
two channels that have formed one view."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from triogroups import Channel, StackConfig, open_channel
from triogroups.testing import free_ports, wait_until

PresetOnOwnPorts = Callable[[str], StackConfig]
TwoChannels = Callable[[StackConfig], AbstractAsyncContextManager[tuple[Channel, Channel]]]


def _preset_on_own_ports(name: str) -> StackConfig:
    """A UDP or TCP preset on ports of its own, so parallel runs on this host do not meet."""
    config = StackConfig.preset(name)
    if config.names()[0] == "UDP":
        return config.configure("UDP", mcast_port=free_ports())
    base = free_ports(21)
    config = config.configure("TCP", bind_port=base, port_range=20)
    return config.configure("TCPPING", initial_hosts=[f"127.0.0.1[{base}]"], port_range=3)


@asynccontextmanager
async def _two_channels(config: StackConfig) -> AsyncIterator[tuple[Channel, Channel]]:
    """Channels A and B of a fresh cluster, once both see the view of the two."""
    cluster = f"real-{uuid.uuid4().hex[:8]}"
    async with (
        open_channel(cluster, config, "A") as a,
        open_channel(cluster, config, "B") as b,
    ):
        await wait_until(lambda: len(a.view.members) >= 2 and len(b.view.members) >= 2, timeout=120)
        yield a, b


@pytest.fixture
def preset_on_own_ports() -> PresetOnOwnPorts:
    return _preset_on_own_ports


@pytest.fixture
def two_channels() -> TwoChannels:
    return _two_channels
