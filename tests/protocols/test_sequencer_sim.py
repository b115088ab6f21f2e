"""Total order (SEQUENCER, the ``udp-total`` preset) on the simulated network, in virtual time.

Members multicast concurrently under 10% loss; in some runs the coordinator crashes or
leaves mid-stream. Every member that stays delivers one sequence, identical at each of
them, in which every message of a member that stays appears exactly once (and in its
sender's order); what a crashed coordinator sent is in it at all of them or at none.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

from triogroups.testing import (
    SimCluster,
    SimMember,
    check_histories,
    open_cluster,
    read_histories,
)

#: Virtual seconds a scenario may take: a stuck recovery fails the test instead of hanging it.
_GUARD = 180
_N = 60  # multicasts per member


async def _stream(member: SimMember, index: int, count: int = _N) -> None:
    """``count`` multicasts, a few at a time, so the stream spans the fault."""
    for k in range(count):
        await member.send(b"%d-%d" % (index, k))
        if k % 5 == 0:
            await trio.sleep(0.02)


async def _formed(cluster: SimCluster) -> SimMember:
    """Wait for the one view of every member, then turn on 10% loss; its coordinator."""
    view = await cluster.wait_for_view()
    cluster.network.set_faults(loss=0.1)
    return next(m for m in cluster.members if m.address == view.coord)


def _assert_one_order(stayed: list[SimMember], senders: dict[int, SimMember]) -> None:
    """One identical sequence at every member in ``stayed``: each message of ``senders``
    once, in its sender's order; nothing doubled."""
    sequences = {m.name: [d.payload for d in m.delivered] for m in stayed}
    first = next(iter(sequences.values()))
    assert all(seq == first for seq in sequences.values()), {
        name: len(seq) for name, seq in sequences.items()
    }
    doubled = [p for p, n in Counter(first).items() if n > 1]
    assert doubled == []
    for index in senders:
        prefix = b"%d-" % index
        assert [p for p in first if p.startswith(prefix)] == [
            b"%d-%d" % (index, k) for k in range(_N)
        ]
    sources = {m.name: [(d.src, d.payload) for d in m.delivered] for m in stayed}
    assert len({tuple(s) for s in sources.values()}) == 1  # the forwarder is the source


@pytest.mark.parametrize(("n", "seed"), [(3, 1), (3, 2), (5, 1), (5, 3)])
async def test_sequencer_concurrent_senders_under_loss_deliver_one_order(
    autojump_clock: Any, n: int, seed: int
) -> None:
    """3 and 5 members multicast 60 each at once under 10% loss: one order everywhere."""
    with trio.fail_after(_GUARD):
        async with open_cluster(n, "udp-total", seed=seed) as cluster:
            await _formed(cluster)
            async with trio.open_nursery() as nursery:
                for i, member in enumerate(cluster.members):
                    nursery.start_soon(_stream, member, i)
            await trio.sleep(20)
            _assert_one_order(cluster.members, dict(enumerate(cluster.members)))
            cluster.check_contract()
            coordinator = [m.protocol("SEQUENCER").stats() for m in cluster.members]
            assert sum(s["bcast_msgs"] for s in coordinator) == n * _N


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_sequencer_coordinator_crash_mid_stream_loses_and_doubles_nothing(
    autojump_clock: Any, seed: int
) -> None:
    """4 members stream under 10% loss; the coordinator is killed after a third of its
    stream. The survivors deliver one identical sequence with each of their messages
    once: what they had forwarded to it goes again to the next coordinator (FLUSH), and
    what it multicast and only some received reaches the others through the tails."""
    with trio.fail_after(_GUARD):
        async with open_cluster(4, "udp-total", seed=seed) as cluster:
            coord = await _formed(cluster)

            async def crash() -> None:
                await trio.sleep(0.2)
                coord.kill()

            async with trio.open_nursery() as nursery:
                for i, member in enumerate(cluster.members):
                    if member is coord:
                        nursery.start_soon(_stream, member, i, _N // 3)
                    else:
                        nursery.start_soon(_stream, member, i)
                nursery.start_soon(crash)
            stayed = [m for m in cluster.members if m is not coord]
            await cluster.wait_for_view(stayed)
            await trio.sleep(20)
            senders = {i: m for i, m in enumerate(cluster.members) if m is not coord}
            _assert_one_order(stayed, senders)
            new_coord = next(m for m in stayed if m.protocol("SEQUENCER").is_coord)
            assert new_coord.protocol("SEQUENCER").stats()["recoveries"] == 1


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_sequencer_coordinator_leave_mid_stream_loses_and_doubles_nothing(
    autojump_clock: Any, seed: int
) -> None:
    """As the crash, but the coordinator leaves (GMS's flush, then the view without it)
    while the others keep streaming: the forwards it stopped multicasting at the flush
    go to the next coordinator, and everything it sent is delivered by everyone."""
    with trio.fail_after(_GUARD):
        async with open_cluster(4, "udp-total", seed=seed) as cluster:
            coord = await _formed(cluster)

            async def leave() -> None:
                await trio.sleep(0.2)
                await coord.disconnect()
                coord.kill()

            async with trio.open_nursery() as nursery:
                for i, member in enumerate(cluster.members):
                    nursery.start_soon(_stream, member, i, _N // 3 if member is coord else _N)
                nursery.start_soon(leave)
            stayed = [m for m in cluster.members if m is not coord]
            await cluster.wait_for_view(stayed)
            await trio.sleep(20)
            senders = {i: m for i, m in enumerate(cluster.members) if m is not coord}
            _assert_one_order(stayed, senders)
            index = cluster.members.index(coord)
            first = [d.payload for d in stayed[0].delivered]
            assert [p for p in first if p.startswith(b"%d-" % index)] == [
                b"%d-%d" % (index, k) for k in range(_N // 3)
            ]


async def test_sequencer_fragmented_messages_keep_their_place_in_the_order(
    autojump_clock: Any,
) -> None:
    """FRAG sits above SEQUENCER: each fragment is forwarded and multicast on its own, and
    receivers reassemble by the forwarder. Large messages among small ones from three
    senders under loss arrive whole, in one order at every member."""
    with trio.fail_after(_GUARD):
        async with open_cluster(3, "udp-total", seed=5) as cluster:
            await _formed(cluster)
            big = {i: bytes([65 + i]) * 150_000 for i in range(3)}

            async def mixed(member: SimMember, index: int) -> None:
                for k in range(10):
                    await member.send(big[index] if k % 3 == 0 else b"%d-%d" % (index, k))
                    await trio.sleep(0.01)

            async with trio.open_nursery() as nursery:
                for i, member in enumerate(cluster.members):
                    nursery.start_soon(mixed, member, i)
            await trio.sleep(30)
            sequences = [[d.payload for d in m.delivered] for m in cluster.members]
            assert len(sequences[0]) == 30
            assert sequences[1] == sequences[0] and sequences[2] == sequences[0]
            assert sum(p in big.values() for p in sequences[0]) == 12


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_sequencer_partition_and_merge_then_one_order_again(
    autojump_clock: Any, seed: int
) -> None:
    """Two halves of a group stream apart (each orders its own half), then merge: nothing
    waits for ever (the tails of the other half are not awaited), nothing is doubled at
    any member, and what every member multicasts after the merge view is delivered by all
    in one order. Across the partition no order is promised (see the design page)."""
    with trio.fail_after(_GUARD):
        async with open_cluster(4, "udp-total", seed=seed) as cluster:
            await _formed(cluster)
            a, b, c, d = cluster.members
            cluster.partition([a, b], [c, d])
            await cluster.wait_for_view([a, b])
            await cluster.wait_for_view([c, d])
            async with trio.open_nursery() as nursery:
                for i, member in enumerate(cluster.members):
                    nursery.start_soon(_stream, member, i, 20)
            cluster.heal()
            await cluster.wait_for_view()
            marks = {m.name: len(m.delivered) for m in cluster.members}
            async with trio.open_nursery() as nursery:
                for i, member in enumerate(cluster.members):
                    nursery.start_soon(_stream, member, 10 + i, _N)
            await trio.sleep(20)
            after = {
                m.name: [d.payload for d in m.delivered[marks[m.name] :]] for m in cluster.members
            }
            for m in cluster.members:
                everything = [d.payload for d in m.delivered]
                assert len(set(everything)) == len(everything), m.name
            merged = {b"10", b"11", b"12", b"13"}  # the senders' indexes after the merge
            tail = {n: [p for p in seq if p.split(b"-")[0] in merged] for n, seq in after.items()}
            assert all(len(seq) == 4 * _N for seq in tail.values()), {
                n: len(s) for n, s in tail.items()
            }
            assert len({tuple(seq) for seq in tail.values()}) == 1
            for m in cluster.members:
                assert not m.protocol("SEQUENCER").stats()["recovering"]


@pytest.mark.parametrize("seed", [1, 8])
async def test_sequencer_two_coordinators_crash_one_after_the_other(
    autojump_clock: Any, seed: int
) -> None:
    """5 members stream under 10% loss; the coordinator is killed, and the member that
    takes over is killed 0.3 s after its view: the third coordinator recovers from the
    logs again (the second's queue died with it; the forwarders still had everything),
    and the three survivors deliver one identical sequence with all they sent, once."""
    with trio.fail_after(_GUARD):
        async with open_cluster(5, "udp-total", seed=seed) as cluster:
            view = await cluster.wait_for_view()
            cluster.network.set_faults(loss=0.1)
            by_address = {m.address: m for m in cluster.members}
            first, second = by_address[view.members[0]], by_address[view.members[1]]

            async def slow_stream(member: SimMember, index: int, count: int) -> None:
                for k in range(count):
                    await member.send(b"%d-%d" % (index, k))
                    await trio.sleep(0.05)

            async def crashes() -> None:
                await trio.sleep(1.0)
                first.kill()
                while second.view is None or first.address in second.view:
                    await trio.sleep(0.01)
                await trio.sleep(0.3)
                second.kill()

            async with trio.open_nursery() as nursery:
                for i, member in enumerate(cluster.members):
                    count = 20 if member is first else _N if member is second else 2 * _N
                    nursery.start_soon(slow_stream, member, i, count)
                nursery.start_soon(crashes)
            stayed = [m for m in cluster.members if m not in (first, second)]
            await cluster.wait_for_view(stayed)
            await trio.sleep(30)
            sequences = [[d.payload for d in m.delivered] for m in stayed]
            assert sequences[1] == sequences[0] and sequences[2] == sequences[0]
            assert len(set(sequences[0])) == len(sequences[0])
            for i, member in enumerate(cluster.members):
                if member in stayed:
                    mine = [p for p in sequences[0] if p.startswith(b"%d-" % i)]
                    assert mine == [b"%d-%d" % (i, k) for k in range(2 * _N)]


@pytest.mark.parametrize("seed", [1, 2])
async def test_sequencer_tcp_total_coordinator_crash_mid_stream_one_order_and_the_checker_agrees(
    autojump_clock: Any, tmp_path: Path, seed: int
) -> None:
    """The ``tcp-total`` preset (TCP's lossless fan-out links, SEQUENCER above NAKACK2 and
    UNICAST3): 4 members stream at once and the coordinator is killed mid-stream. The
    survivors deliver one identical sequence with all they sent, once, and the history
    checker (its **total_order** rule on the recorded histories) finds nothing."""
    with trio.fail_after(_GUARD):
        async with open_cluster(4, "tcp-total", seed=seed, history=tmp_path) as cluster:
            view = await cluster.wait_for_view()
            coord = next(m for m in cluster.members if m.address == view.coord)

            async def crash() -> None:
                await trio.sleep(0.2)
                coord.kill()

            async with trio.open_nursery() as nursery:
                for i, member in enumerate(cluster.members):
                    nursery.start_soon(_stream, member, i, _N // 3 if member is coord else _N)
                nursery.start_soon(crash)
            stayed = [m for m in cluster.members if m is not coord]
            await cluster.wait_for_view(stayed)
            await trio.sleep(20)
            senders = {i: m for i, m in enumerate(cluster.members) if m is not coord}
            _assert_one_order(stayed, senders)
    histories = read_histories(tmp_path)
    sends = [line for h in histories for line in h.of("send")]
    assert sends and all(line.record.get("total") for line in sends)
    assert check_histories(histories) == []
