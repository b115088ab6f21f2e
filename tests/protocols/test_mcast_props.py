"""MCAST's delivery contract and bounded memory under random faults (hypothesis, virtual time)."""

from __future__ import annotations

from dataclasses import dataclass

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Flag, StackConfig
from triogroups.testing import SimCluster, SimMember, open_cluster

_XMIT = 0.05
#: Parked messages a member may hold beyond its window: what is in flight between the
#: application and MCAST (the stack's top channel holds 16 items of one message here).
_PARKED_SLACK = 2 * 16


@dataclass
class Scenario:
    members: int
    seed: int
    loss: float
    duplicate: float
    max_delay: float
    capacity: int
    counts: list[int]
    oob_every: int
    partition: tuple[float, float, int] | None


scenarios = st.builds(
    Scenario,
    members=st.integers(3, 5),
    seed=st.integers(0, 2**16),
    loss=st.floats(0.0, 0.3),
    duplicate=st.floats(0.0, 0.2),
    max_delay=st.floats(0.001, 0.05),
    capacity=st.integers(4, 16),
    counts=st.lists(st.integers(0, 60), min_size=5, max_size=5),
    oob_every=st.integers(0, 4),
    partition=st.none() | st.tuples(st.floats(0.0, 0.5), st.floats(0.1, 1.5), st.integers(1, 30)),
)


def _check_bounded(member: SimMember, capacity: int) -> None:
    stats = member.protocol("MCAST").stats()
    assert stats["send_window"]["size"] <= capacity - 1, stats["send_window"]
    assert all(w["size"] <= capacity - 1 for w in stats["receive_windows"].values())
    assert stats["parked_messages"] <= _PARKED_SLACK, stats["parked_messages"]


async def _run(s: Scenario) -> None:
    stack = StackConfig.of("SIM", ("MCAST", {"capacity": s.capacity, "xmit_interval": _XMIT}))
    with trio.fail_after(300):  # virtual seconds: a stuck run fails instead of hanging
        async with open_cluster(
            s.members,
            stack,
            seed=s.seed,
            loss=s.loss,
            duplicate=s.duplicate,
            min_delay=0.001,
            max_delay=s.max_delay,
        ) as cluster:

            async def sender(member: SimMember, count: int) -> None:
                for i in range(count):
                    oob = s.oob_every and i % s.oob_every == 0
                    await member.send(f"{member.name}{i}".encode(), flags=Flag.OOB if oob else 0)
                    if i % 7 == 0:
                        await trio.sleep(0.003)

            async def partition(
                cluster: SimCluster, start: float, length: float, mask: int
            ) -> None:
                await trio.sleep(start)
                side = [m.address for i, m in enumerate(cluster.members) if mask >> i & 1]
                rest = [m.address for m in cluster.members if m.address not in side]
                cluster.network.partition(side, rest)
                await trio.sleep(length)
                cluster.network.heal()

            async def watch_memory(cancel: trio.CancelScope) -> None:
                with cancel:
                    while True:
                        for member in cluster.members:
                            _check_bounded(member, s.capacity)
                        await trio.sleep(0.01)

            watch = trio.CancelScope()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch_memory, watch)
                if s.partition is not None:
                    nursery.start_soon(partition, cluster, *s.partition)
                async with trio.open_nursery() as senders:
                    for member, count in zip(cluster.members, s.counts, strict=False):
                        senders.start_soon(sender, member, count)
                await cluster.wait_until_delivered(timeout=120)
                watch.cancel()
            cluster.check_contract()
            await trio.sleep(20 * _XMIT)  # acks (and last-seqno resends) settle
            for member in cluster.members:
                stats = member.protocol("MCAST").stats()
                assert stats["send_window"]["size"] == 0 and stats["parked_messages"] == 0, stats
                assert all(w["size"] == 0 for w in stats["receive_windows"].values()), stats


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_mcast_delivers_exactly_once_in_order_with_bounded_memory_under_faults(
    s: Scenario,
) -> None:
    """3-5 members all sending, loss up to 30%, duplication, reordering, healing partitions.

    Every member delivers every message exactly once, per-sender FIFO (OOB may
    overtake); windows never hold more than capacity - 1 messages, parked
    messages stay within what is in flight above MCAST, and once acks settle
    nothing is retained at all.
    """
    trio.run(_run, s, clock=trio.testing.MockClock(autojump_threshold=0))
