"""Channels on the simulated network, in virtual time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio

from triogroups import Message, SimNetwork, Stack, StackConfig, open_sim_network

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


@pytest.fixture
def sent_down() -> Callable[[Stack], list[Message]]:
    """What a stack that does not run holds at its top: every message in its send queue,
    in order (events left out), taken without waiting."""

    def take(stack: Stack) -> list[Message]:
        msgs: list[Message] = []
        while True:
            try:
                item = stack._down.receiver.receive_nowait()
            except trio.WouldBlock:
                return msgs
            if isinstance(item, list):
                msgs.extend(item)

    return take
