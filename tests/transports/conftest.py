"""Real-socket fixtures: transports on 127.0.0.1, run without a stack."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from triogroups import Address, Message
from triogroups.events import Item, LocalPhysicalAddress
from triogroups.testing import free_ports
from triogroups.transports.base import Transport


@dataclass
class Endpoint:
    """A running transport and the two ends of its channels."""

    transport: Any
    down: trio.MemorySendChannel[Item]
    up: trio.MemoryReceiveChannel[Item]
    physical: tuple[str, int]

    @property
    def address(self) -> Address:
        assert self.transport.local_address is not None
        return self.transport.local_address  # type: ignore[no-any-return]

    async def receive(self, count: int) -> list[Message]:
        """The next ``count`` messages that come up (events are skipped)."""
        got: list[Message] = []
        with trio.fail_after(20):
            while len(got) < count:
                item = await self.up.receive()
                if isinstance(item, list):
                    got.extend(item)
        return got


OpenEndpoint = Callable[..., Awaitable[Endpoint]]


@pytest.fixture
def cluster_name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def mcast_port() -> int:
    return free_ports()


@pytest.fixture
def open_endpoint(nursery: trio.Nursery, cluster_name: str) -> OpenEndpoint:
    """``await open_endpoint(UdpTransport, "A", **props)`` -> a running `Endpoint`."""

    async def open_(
        cls: type[Transport],
        name: str,
        *,
        cluster: str | None = None,
        up_size: int = 64,
        down_size: int = 64,
        **props: Any,
    ) -> Endpoint:
        transport = cls(**props)
        transport.start(Address.random(name), cluster or cluster_name, trio.current_time())
        down_send, down_recv = trio.open_memory_channel[Item](down_size)
        up_send, up_recv = trio.open_memory_channel[Item](up_size)
        await nursery.start(transport.serve, down_recv, up_send)
        first = await up_recv.receive()
        assert isinstance(first, LocalPhysicalAddress)
        return Endpoint(transport, down_send, up_recv, first.physical)

    return open_
