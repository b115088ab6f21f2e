"""Locks and counters on channels over the simulated network, in virtual time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import trio

from triogroups import (
    Channel,
    CounterService,
    LockService,
    SimNetwork,
    StackConfig,
    open_channel,
    open_counter_service,
    open_lock_service,
    open_sim_network,
)

#: Membership with failure detection, so a member cut off the network is suspected and
#: leaves the view (a crash, as the others see it), and MERGE3 so a healed split merges.
STACK = StackConfig.of(
    "SIM",
    "PING",
    ("MERGE3", {"min_interval": 1.0, "max_interval": 2.0}),
    ("FD_ALL3", {"interval": 0.5, "timeout": 2.0}),
    ("VERIFY_SUSPECT", {"timeout": 0.5}),
    "NAKACK2",
    "UNICAST3",
    "STABLE",
    "GMS",
    "FRAG",
)


@pytest.fixture
async def net() -> AsyncIterator[SimNetwork]:
    async with open_sim_network(seed=11) as network:
        yield network


class Member:
    """One member: its channel and the lock and counter services it runs."""

    def __init__(self, net: SimNetwork) -> None:
        self.net = net
        self.scope = trio.CancelScope()
        self.crashed = False
        self.channel: Channel
        self.locks: LockService
        self.counters: CounterService

    @property
    def name(self) -> str:
        return self.channel.name

    async def run(
        self,
        name: str,
        options: dict[str, Any],
        *,
        task_status: trio.TaskStatus[Member] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with self.scope:
            async with (
                open_channel("blocks", STACK, name, network=self.net, handle_signals=False) as ch,
                open_lock_service(ch, **options) as locks,
                open_counter_service(ch, num_backups=options.get("num_backups", 1)) as counters,
            ):
                self.channel, self.locks, self.counters = ch, locks, counters
                task_status.started(self)
                await trio.sleep_forever()

    def crash(self, others: Sequence[Member]) -> None:
        """Stop at once without a leave, as a killed process: cut off the network first,
        so nothing it would still send reaches anyone."""
        self.net.partition([self.channel.address], [m.channel.address for m in others])
        self.crashed = True
        self.scope.cancel()

    def leave(self) -> None:
        """Leave gracefully (the channel's exit sends the leave)."""
        self.scope.cancel()


async def start(nursery: trio.Nursery, net: SimNetwork, names: str, **options: Any) -> list[Member]:
    """Members ``names`` (each with both services), once all share one view."""
    members = [await nursery.start(Member(net).run, n, options) for n in names]
    await wait_views(members, len(names))
    return members


def split(net: SimNetwork, *sides: Sequence[Member]) -> None:
    """Partition the network between ``sides`` (both ways)."""
    net.partition(*([m.channel.address for m in side] for side in sides))


async def wait_views(members: Sequence[Member], size: int, timeout: float = 60) -> None:
    """Until every one of ``members`` has one and the same view of ``size`` members."""
    with trio.fail_after(timeout):
        while len({m.channel.view for m in members}) != 1 or len(members[0].channel.view) != size:
            await trio.sleep(0.05)
