"""Channels on the simulated network, in virtual time."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from triogroups import SimNetwork, StackConfig, open_sim_network

#: Membership plus the reliability layers: enough for every channel guarantee.
STACK = StackConfig.of("SIM", "PING", "NAKACK2", "UNICAST3", "STABLE", "GMS", "FRAG")


@pytest.fixture
def stack() -> StackConfig:
    return STACK


@pytest.fixture
async def net() -> AsyncIterator[SimNetwork]:
    """A simulated network; tests also take ``autojump_clock`` (pytest-trio only uses a
    clock the test itself asks for)."""
    async with open_sim_network(seed=7) as network:
        yield network
