"""The replicated dictionary on simulated members: replicas converge under loss.

Three writers write 1,000 times each to 50 shared keys at once under 10% loss, on a
SEQUENCER stack: every replica ends equal (with per-sender order only, two writers of
one key would leave them different). A member restarted mid-run gets the dictionary
by state transfer and ends equal too. Seeded runs on virtual time.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
import trio

from tests.blocks.conftest import STACK
from triogroups import (
    ChannelClosed,
    ReplicatedDict,
    SimNetwork,
    open_replicated_dict,
    open_sim_network,
)

#: The blocks' stack (failure detection, MERGE3) with SEQUENCER above the reliable layers.
TOTAL = STACK.insert_above("UNICAST3", "SEQUENCER")
WRITES = 1000
KEYS = 50


class Replica:
    """One member holding a replica, until its scope is cancelled."""

    def __init__(self, net: SimNetwork, name: str) -> None:
        self.net = net
        self.name = name
        self.scope = trio.CancelScope()
        self.store: ReplicatedDict

    async def run(
        self, *, task_status: trio.TaskStatus[Replica] = trio.TASK_STATUS_IGNORED
    ) -> None:
        with self.scope:
            async with open_replicated_dict(
                "kv", TOTAL, self.name, network=self.net, handle_signals=False
            ) as store:
                self.store = store
                task_status.started(self)
                await trio.sleep_forever()


async def write(replica: Replica, index: int, rng: random.Random, count: int = WRITES) -> None:
    """``count`` puts to random shared keys, each value naming its writer and number."""
    for i in range(count):
        await replica.store.put(f"k{rng.randrange(KEYS)}", [replica.name, i])
        if rng.random() < 0.1:
            await trio.sleep(rng.uniform(0.0, 0.02))


async def converged(replicas: Sequence[Replica], applied: int, timeout: float = 300) -> None:
    """Until every replica applied ``applied`` writes (by delivery or in its state)."""
    with trio.fail_after(timeout):
        while any(r.store.stats()["applied"] < applied for r in replicas):
            await trio.sleep(0.5)


async def wait_members(replicas: Sequence[Replica], size: int) -> None:
    with trio.fail_after(60):
        while any(len(r.store.channel.view) != size for r in replicas):
            await trio.sleep(0.05)


def assert_identical(replicas: Sequence[Replica]) -> dict[Any, Any]:
    snapshots = {r.name: r.store.snapshot() for r in replicas}
    first = next(iter(snapshots.values()))
    different = [name for name, data in snapshots.items() if data != first]
    assert not different, f"replicas {different} differ from {next(iter(snapshots))}"
    assert len(first) == KEYS
    return first


@pytest.mark.parametrize("seed", [1, 2])
async def test_replicated_dict_three_writers_under_loss_end_identical(
    autojump_clock: Any, seed: int
) -> None:
    """3 writers x 1,000 writes on 50 shared keys, 10% loss: identical replicas."""
    rng = random.Random(seed)
    async with open_sim_network(seed=seed) as net, trio.open_nursery() as nursery:
        replicas = [await nursery.start(Replica(net, name).run) for name in "ABC"]
        await wait_members(replicas, 3)
        net.set_faults(loss=0.1)
        async with trio.open_nursery() as writers:
            for i, replica in enumerate(replicas):
                writers.start_soon(write, replica, i, random.Random(rng.random()))
        await converged(replicas, 3 * WRITES)
        assert_identical(replicas)
        assert all(r.store.stats()["writes"] == WRITES for r in replicas)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(("seed", "how"), [(1, "leave"), (2, "crash")])
async def test_replicated_dict_member_restarted_mid_run_gets_the_state(
    autojump_clock: Any, seed: int, how: str
) -> None:
    """As above, and D (a reader) leaves or crashes mid-run and joins again: the new D
    gets the dictionary by state transfer and ends identical to the writers."""
    rng = random.Random(seed)
    async with open_sim_network(seed=seed) as net, trio.open_nursery() as nursery:
        replicas = [await nursery.start(Replica(net, name).run) for name in "ABCD"]
        await wait_members(replicas, 4)
        net.set_faults(loss=0.1)
        writers, d = replicas[:3], replicas[3]
        async with trio.open_nursery() as writing:
            for i, replica in enumerate(writers):
                writing.start_soon(write, replica, i, random.Random(rng.random()))
            await trio.sleep(rng.uniform(2.0, 4.0))
            if how == "crash":
                net.partition([d.store.channel.address], [r.store.channel.address for r in writers])
            d.scope.cancel()
            await wait_members(writers, 3)
            await trio.sleep(1.0)
            again = await nursery.start(Replica(net, "D").run)
            assert again.store.stats()["states_set"] == 1
            assert len(again.store) > 0  # the writes so far came by the state
        await converged(writers, 3 * WRITES)
        with trio.fail_after(120):
            while again.store.snapshot() != writers[0].store.snapshot():
                await trio.sleep(0.5)
        assert_identical([*writers, again])
        nursery.cancel_scope.cancel()


async def test_replicated_dict_operations_and_errors(autojump_clock: Any) -> None:
    async with open_sim_network(seed=3) as net, trio.open_nursery() as nursery:
        a, b = [await nursery.start(Replica(net, name).run) for name in "AB"]
        await wait_members([a, b], 2)
        await a.store.put("x", {"nested": [1, 2]})
        await a.store.put(7, b"raw")
        assert a.store["x"] == {"nested": [1, 2]} and a.store.get(7) == b"raw"
        with trio.fail_after(10):
            while len(b.store) < 2:
                await trio.sleep(0.05)
        assert await b.store.delete("x") is True
        assert await b.store.delete("x") is False
        assert "x" not in b.store and sorted(b.store) == [7]
        with pytest.raises(TypeError, match="keys must be str, bytes or int"):
            await a.store.put(("a", 1), 1)
        with pytest.raises(TypeError, match="keys must be str, bytes or int"):
            await a.store.put(True, 1)
        await a.store.clear()
        assert len(a.store) == 0
        nursery.cancel_scope.cancel()
    with pytest.raises(ChannelClosed):
        await a.store.put("late", 1)


async def test_replicated_dict_refuses_a_stack_without_sequencer(autojump_clock: Any) -> None:
    """A stack that orders per sender only cannot keep replicas equal: refused at once,
    naming SEQUENCER and the stack's layers."""
    async with open_sim_network(seed=1) as net:
        with pytest.raises(ValueError, match=r"needs SEQUENCER in the stack .*got SIM, PING"):
            async with open_replicated_dict("kv", STACK, "A", network=net):
                pass
        with pytest.raises(ValueError, match="needs SEQUENCER"):
            async with open_replicated_dict("kv", "udp", "A", network=net):
                pass
