"""A campaign member's lock and counter services: a channel beside its `SimMember`.

A `SimMember` is a bare stack, without the channel and its group RPC that the lock and
counter services run on, so on the ``-blocks`` presets every member incarnation also
opens a channel of its own (named after it, in a group of its own on the same
simulated network and stack, with an address drawn from the seed) running both
services and the `blocks_load` workload. It shares its member's fate: the run starts,
pauses, resumes, kills and lets it leave with the member, and blocks what a split
blocks for both addresses. Its history file (``traffic`` False: it sends no traffic)
holds its views and its ``lock``, ``unlock`` and ``count`` records.

Decisions: a kill stops the channel's transport and stack before cancelling it, so the
graceful leave a closing channel tries never leaves (a killed process says nothing);
the join waits as long as the run lasts (a split may keep the member out until the
quiet period); all members of a run use the same ``majority`` mode, drawn from the
seed, as every member of a group must.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import trio

from triogroups._channel import Channel, open_channel
from triogroups.address import Address
from triogroups.blocks import open_counter_service, open_lock_service
from triogroups.chaos._blocks_load import blocks_load
from triogroups.config import StackConfig
from triogroups.testing._cluster import SimCluster
from triogroups.testing._history import HistoryWriter
from triogroups.transports.sim import SimTransport
from triogroups.view import View

__all__ = ["BlocksMember"]

_RATE = 1.0  # lock and counter operations per second per member
_GROUP = "campaign-blocks"


class BlocksMember:
    """One incarnation's channel with the lock and counter services (module docstring)."""

    def __init__(
        self,
        cluster: SimCluster,
        config: StackConfig,
        name: str,
        rng: random.Random,
        *,
        majority: bool,
        until: float,
        on_address: Callable[[Address], None],
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.name = name
        self.rng = rng
        self.majority = majority
        self.until = until
        self.on_address = on_address
        self.channel: Channel | None = None
        self.history: HistoryWriter | None = None
        self.scope = trio.CancelScope()  # the whole member: cancelled by a kill
        self.body = trio.CancelScope()  # the services: cancelled by a leave
        self._recorded: View | None = None
        self._resumed: trio.Event | None = None

    def _new_address(self, name: str) -> Address:
        address = self.cluster.new_address(name)
        self.on_address(address)
        return address

    async def run(self) -> None:
        """Join, run the services and the workload until cancelled (`kill`, `leave`)."""
        with self.scope:
            async with open_channel(
                _GROUP,
                self.config,
                f"{self.name}.blocks",
                network=self.cluster.network,
                handle_signals=False,
                connect_timeout=3600.0,
                new_address=self._new_address,
            ) as ch:
                self.channel = ch
                directory = self.cluster.history
                assert directory is not None
                path = Path(directory) / f"{ch.name}-{ch.address.uuid:032x}.jsonl"
                self.history = HistoryWriter(
                    path, ch.address, trio.current_time, name=ch.name, traffic=False
                )
                with self.body:
                    async with (
                        open_lock_service(ch, majority=self.majority) as locks,
                        open_counter_service(ch) as counters,
                        trio.open_nursery() as nursery,
                    ):
                        nursery.start_soon(self._follow_views, ch)
                        await blocks_load(
                            locks,
                            counters,
                            self.history,
                            self.rng,
                            rate=_RATE,
                            view=lambda: ch.view,
                            caught_up=self._caught_up,
                            clock=trio.current_time,
                            until=self.until,
                        )
                        nursery.cancel_scope.cancel()

    async def _follow_views(self, ch: Channel) -> None:
        async for view in ch.views():
            assert self.history is not None
            self.history.view(view)
            self._recorded = view

    async def _caught_up(self) -> View:
        """The current view once recorded; waits while the member is paused (a stopped
        process does nothing)."""
        while self._resumed is not None:
            await self._resumed.wait()
        assert self.channel is not None
        for _ in range(1000):
            view = self.channel.view
            if self._recorded is not None and self._recorded.view_id == view.view_id:
                return view
            await trio.sleep(0)
        return self.channel.view

    def _hold_io(self, stop: bool) -> None:
        """Stop (or restart) the channel's stack clock and its simulated endpoint."""
        if self.channel is None:
            return
        stack = self.channel.stack
        try:
            transport = stack.protocols[0]
        except RuntimeError:  # the stack is not running (not yet, or no more)
            return
        assert isinstance(transport, SimTransport)
        if stop:
            stack.pause()
            transport.pause()
        else:
            stack.resume()
            transport.resume()

    def pause(self) -> None:
        """Stop its stack's clock and its network endpoint, as `SimMember.pause` does."""
        if self._resumed is None:
            self._resumed = trio.Event()
            self._hold_io(True)

    def resume(self) -> None:
        """Let it run on from now, as `SimMember.resume` does."""
        if self._resumed is not None:
            self._hold_io(False)
            self._resumed.set()
            self._resumed = None

    def kill(self) -> None:
        """Stop at once without a leave, as a killed process."""
        self._hold_io(True)
        self.scope.cancel()

    def leave(self) -> None:
        """Stop the workload and leave gracefully (the channel's close)."""
        self.body.cancel()
