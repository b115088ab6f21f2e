"""Property tests: hypothesis drives simulated NAKACK2 + STABLE clusters through faults.

3 to 5 members all send, regular and OOB, over a network that loses up to
30%, duplicates and reorders, and is split by a partition that later heals.
Every member must deliver every message exactly once and per-sender in order
(the kit's contract checker), and after STABLE rounds nothing is retained:
the senders' buffers, the receive windows and the queues are all empty.
The no-retransmission mode gets the same check over the lossless (TCP)
endpoint, where it must never ask for a retransmission.
"""

from __future__ import annotations

from dataclasses import dataclass

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Flag, StackConfig
from triogroups.testing import SimCluster, open_cluster, wait_until

_SETTINGS = settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass
class _Run:
    members: int
    seed: int
    loss: float
    duplicate: float
    max_delay: float
    use_mcast_xmit: bool
    sends: list[tuple[int, int, bool]]  # (sender, how many, OOB)
    split: list[bool]  # which side of the partition each member is on
    partition_at: int
    heal_at: int


@st.composite
def _runs(draw: st.DrawFn, *, lossy: bool = True) -> _Run:
    n = draw(st.integers(3, 5))
    sends = draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, 4), st.booleans()),
                 min_size=6, max_size=30)
    )  # fmt: skip
    first = draw(st.integers(0, len(sends) - 1))
    return _Run(
        members=n,
        seed=draw(st.integers(0, 2**16)),
        loss=draw(st.floats(0.0, 0.3)) if lossy else 0.0,
        duplicate=draw(st.floats(0.0, 0.2)) if lossy else 0.0,
        max_delay=draw(st.floats(0.001, 0.05)),
        use_mcast_xmit=draw(st.booleans()),
        sends=sends,
        split=draw(st.lists(st.booleans(), min_size=n, max_size=n)),
        partition_at=first if lossy else len(sends),
        heal_at=draw(st.integers(first, len(sends))),
    )


async def _drive(cluster: SimCluster, run: _Run) -> None:
    members = cluster.members
    side_a = [m.address for m, s in zip(members, run.split, strict=True) if s]
    side_b = [m.address for m, s in zip(members, run.split, strict=True) if not s]
    count = 0
    for step, (sender, many, oob) in enumerate(run.sends):
        if step == run.partition_at and side_a and side_b:
            cluster.network.partition(side_a, side_b)
        if step == run.heal_at:
            cluster.network.heal()
        member = members[sender]
        payloads = [f"{member.name}-{count + i}".encode() for i in range(many)]
        count += many
        await member.send_many(payloads, flags=Flag.OOB if oob else 0)
        await trio.sleep(0.05)
    cluster.network.heal()
    await cluster.wait_until_delivered(timeout=300)


async def _retained_drops_to_zero(cluster: SimCluster) -> None:
    await wait_until(
        lambda: not any(m.protocol("NAKACK2").retained() for m in cluster.members),
        timeout=300,
        interval=0.5,
    )


async def _lossy(run: _Run) -> None:
    stack = StackConfig.of(
        "SIM",
        ("NAKACK2", {"xmit_interval": 0.2, "use_mcast_xmit": run.use_mcast_xmit}),
        ("STABLE", {"desired_avg_gossip": 1.0}),
    )
    faults = {"loss": run.loss, "duplicate": run.duplicate, "max_delay": run.max_delay}
    async with open_cluster(run.members, stack, seed=run.seed, **faults) as cluster:
        await _drive(cluster, run)
        await _retained_drops_to_zero(cluster)
        cluster.check_contract()


async def _tcp(run: _Run) -> None:
    stack = StackConfig.of(
        "TCP", ("NAKACK2", {"xmit_interval": 0}), ("STABLE", {"desired_avg_gossip": 1.0})
    )
    async with open_cluster(run.members, stack, seed=run.seed, max_delay=run.max_delay) as cluster:
        await _drive(cluster, run)
        await _retained_drops_to_zero(cluster)
        for member in cluster.members:
            stats = member.protocol("NAKACK2").stats()
            assert stats["xmit_reqs_sent"] == 0 and stats["highest_seqno_sent"] == 0


@_SETTINGS
@given(_runs())
def test_nakack2_property_contract_and_bounded_memory_under_loss_and_partitions(run: _Run) -> None:
    """Loss <= 30%, duplication, reordering, a healing partition: exactly once, FIFO, purged."""
    trio.run(_lossy, run, clock=trio.testing.MockClock(autojump_threshold=0))


@_SETTINGS
@given(_runs(lossy=False))
def test_seed003_property_no_retransmission_over_tcp_orders_and_purges(run: _Run) -> None:
    """xmit_interval=0 over a lossless transport: the same contract, never a retransmission."""
    trio.run(_tcp, run, clock=trio.testing.MockClock(autojump_threshold=0))
