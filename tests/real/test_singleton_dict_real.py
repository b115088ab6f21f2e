"""The cluster singleton and the replicated dictionary over real UDP sockets on loopback.

Members are channels in this process on the presets (on ports of their own). Deadlines
are generous; nothing is timed.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts
from triogroups import (
    Actor,
    Channel,
    ReplicatedDict,
    Singleton,
    StackConfig,
    open_channel,
    open_replicated_dict,
    open_singleton,
)

pytestmark = pytest.mark.real


async def test_singleton_real_moves_on_a_leave_and_on_a_crash(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """A, B, C on `udp`: the actor runs on A; A leaves and the next coordinator runs it
    (after A stopped it); that one is killed without a leave and the last member runs it
    once failure detection excluded it. Never two instances at once."""
    config = preset_on_own_ports("udp")
    cluster = f"one-{uuid.uuid4().hex[:8]}"
    events: list[tuple[str, str]] = []
    handles: dict[str, Singleton] = {}
    channels: dict[str, Channel] = {}
    leave = {name: trio.Event() for name in "ABC"}
    scopes = {name: trio.CancelScope() for name in "ABC"}

    class Probe(Actor):
        def __init__(self, name: str) -> None:
            self.member = name

        async def started(self) -> None:
            events.append((self.member, "start"))

        async def stopped(self) -> None:
            events.append((self.member, "stop"))

    def running() -> list[str]:
        on: list[str] = []
        for name, what in events:
            if what == "start":
                on.append(name)
            else:
                on.remove(name)
        return on

    async def member(name: str, *, task_status: trio.TaskStatus[None]) -> None:
        with scopes[name]:
            async with (
                open_channel(cluster, config, name) as ch,
                open_singleton(ch, lambda: Probe(name), name="probe") as singleton,
            ):
                handles[name], channels[name] = singleton, ch
                task_status.started()
                await leave[name].wait()

    async def until(check: Any) -> None:
        while not check():
            assert len(running()) <= 1, events
            await trio.sleep(0.05)

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            for name in "ABC":
                await nursery.start(member, name)
            await until(lambda: all(len(ch.view) == 3 for ch in channels.values()))
            assert running() == ["A"] and handles["B"].location == channels["A"].address
            leave["A"].set()
            await until(lambda: len(running()) == 1 and running() != ["A"])
            assert events[:2] == [("A", "start"), ("A", "stop")]
            second = running()[0]
            last = next(n for n in "BC" if n != second)
            scopes[second].cancel()  # no leave: the others find out by failure detection
            await until(lambda: last in running())
            assert handles[last].running and handles[last].location == channels[last].address
            leave[last].set()
    assert running() == []


async def test_replicated_dict_real_three_writers_end_identical(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """Three members on `udp-total` write 300 times each to 20 shared keys at once; a
    fourth joins midway and gets the state: all four replicas end equal.

    Each writer ends with a write of its own key ``end-<name>``: once every replica holds
    the three, every write before them in the one order is applied everywhere. (Counting
    900 writes applied at each writer stalled at load, issue 42: A and B start writing as
    soon as their view holds C, and C's state, taken later, already holds their first
    writes, which C then rightly never applies; measured 900 and 901 of 903.)"""
    config: StackConfig = preset_on_own_ports("udp-total")
    cluster = f"kv-{uuid.uuid4().hex[:8]}"
    stores: dict[str, ReplicatedDict] = {}
    done = trio.Event()

    async def member(name: str, writes: int, *, task_status: trio.TaskStatus[None]) -> None:
        async with open_replicated_dict(cluster, config, name) as store:
            stores[name] = store
            task_status.started()
            while len(store.channel.view) < 3:  # the writers start together
                await trio.sleep(0.05)
            rng = random.Random(name)
            for i in range(writes):
                await store.put(f"k{rng.randrange(20)}", [name, i])
            if writes:
                await store.put(f"end-{name}", writes)
            await done.wait()

    with trio.fail_after(180):
        async with trio.open_nursery() as nursery:
            for name in "ABC":
                await nursery.start(member, name, 300)
            while any(store.stats()["writes"] < 100 for store in stores.values()):
                await trio.sleep(0.05)
            await nursery.start(member, "D", 0)
            assert stores["D"].stats()["states_set"] == 1
            ends = [f"end-{n}" for n in "ABC"]
            while not all(e in s for s in stores.values() for e in ends):
                await trio.sleep(0.1)
            replicas = {repr(sorted(s.items())) for s in stores.values()}
            assert len(replicas) == 1  # every write is before the ends in the one order
            done.set()
    assert len(stores["A"]) == 20 + len(ends)
    assert all(s.stats()["writes"] == 301 for n, s in stores.items() if n != "D")
