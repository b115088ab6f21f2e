"""The simulated network: seeded faults, partitions, lossless endpoints, foreign clusters."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from triogroups import Message, Stack, StackConfig, View
from triogroups.events import TmpView
from triogroups.testing import open_cluster, sim_config
from triogroups.transports import SendToHosts
from triogroups.transports.sim import SimNetwork, open_sim_network


async def _lossy_run(seed: int, **faults: Any) -> tuple[list[bytes], dict[str, int]]:
    async with open_cluster(2, "sim", seed=seed, **faults) as cluster:
        a, b = cluster.members
        for i in range(200):
            await a.send(str(i).encode(), b.address)
            await trio.sleep(0.01)  # one message per datagram, so counters count messages
        await trio.sleep(1)
        return [m.payload for m in b.delivered], cluster.network.stats()


async def test_loss_is_seeded_and_repeatable(autojump_clock: Any) -> None:
    first, stats = await _lossy_run(3, loss=0.3)
    again, _ = await _lossy_run(3, loss=0.3)
    other, _ = await _lossy_run(4, loss=0.3)
    assert first == again and first != other
    assert 100 < len(first) < 180 and stats["lost"] == 200 - len(first)


async def test_duplication_delivers_some_messages_twice(autojump_clock: Any) -> None:
    got, stats = await _lossy_run(1, duplicate=0.2)
    assert stats["duplicated"] > 10
    assert len(got) == 200 + stats["duplicated"]


async def test_delay_spread_reorders(autojump_clock: Any) -> None:
    got, _ = await _lossy_run(1, min_delay=0.001, max_delay=0.05)
    assert sorted(got) == sorted(str(i).encode() for i in range(200))
    assert got != [str(i).encode() for i in range(200)]


async def test_symmetric_partition_blocks_both_ways_until_healed(autojump_clock: Any) -> None:
    async with open_cluster(3, "sim") as cluster:
        a, b, c = cluster.members
        cluster.network.partition([a.address, b.address], [c.address])
        await a.send(b"a1")
        await c.send(b"c1")
        await trio.sleep(1)
        assert sorted(m.payload for m in b.delivered) == [b"a1"]
        assert [m.payload for m in c.delivered] == [b"c1"]
        cluster.network.heal()
        await a.send(b"a2")
        await trio.sleep(1)
        assert b"a2" in [m.payload for m in c.delivered]


async def test_one_way_block_is_asymmetric(autojump_clock: Any) -> None:
    async with open_cluster(2, "sim") as cluster:
        a, b = cluster.members
        cluster.network.block(a.address, b.address)
        await a.send(b"lost", b.address)
        await b.send(b"arrives", a.address)
        await trio.sleep(1)
        assert b.delivered == [] and [m.payload for m in a.delivered] == [b"arrives"]
        assert cluster.network.stats()["blocked"] == 1


async def test_tcp_stacks_run_on_lossless_endpoints_that_never_lose_or_reorder(
    autojump_clock: Any,
) -> None:
    tcp_like = StackConfig.from_toml('[[protocol]]\nname = "TCP"\n[[protocol]]\nname = "PASS"\n')
    async with open_sim_network(seed=1, loss=0.5, min_delay=0.001, max_delay=0.05) as net:
        cfg = sim_config(tcp_like, net)
        assert dict(cfg.layers[0].properties)["lossless"] is True
        async with trio.open_nursery() as nursery:
            a, b = Stack(cfg, "c", "A"), Stack(cfg, "c", "B")
            await nursery.start(a.run)
            await nursery.start(b.run)
            for i in range(100):
                await a.send([Message(b.address, str(i).encode())])
            got: list[bytes] = []
            while len(got) < 100:
                item = await b.receive()
                if isinstance(item, list):
                    got.extend(m.payload for m in item)
            assert got == [str(i).encode() for i in range(100)]
            nursery.cancel_scope.cancel()


async def test_fan_out_multicasts_like_tcp_to_the_view_and_the_tmp_view(
    autojump_clock: Any,
) -> None:
    """With ``fan_out`` a multicast goes to the members of the sender's view only (plus the
    joiners of a TmpView), as over TCP; without a view it goes to every endpoint."""
    async with open_cluster(3, StackConfig.of(("SIM", {"fan_out": True}), "PASS")) as cluster:
        a, b, c = cluster.members
        await a.send(b"before any view")
        await cluster.install_view([a, b])
        await a.send(b"in {A,B}")
        await a.stack.send(TmpView(View.create(a.address, 2, [a.address, b.address, c.address])))
        await a.send(b"to the joiner too")
        await trio.sleep(1)
        assert [m.payload for m in b.delivered] == [
            b"before any view",
            b"in {A,B}",
            b"to the joiner too",
        ]
        assert [m.payload for m in c.delivered] == [b"before any view", b"to the joiner too"]


async def test_another_clusters_traffic_is_dropped_and_counted(autojump_clock: Any) -> None:
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        cfg = StackConfig.of(("SIM", {"network": net.name}), "PASS")
        ours, theirs = Stack(cfg, "ours", "A"), Stack(cfg, "theirs", "X")
        await nursery.start(ours.run)
        await nursery.start(theirs.run)
        await theirs.send([Message(None, b"foreign")])
        await trio.sleep(1)
        stats = ours.protocols[0].stats()
        assert stats["decode_errors"] == {"foreign_cluster": 1}
        assert stats["msgs_received"] == 0
        nursery.cancel_scope.cancel()


def test_fault_rates_are_validated() -> None:
    with pytest.raises(ValueError, match="loss must be in"):
        SimNetwork(loss=1.5)
    with pytest.raises(ValueError, match="min_delay <= max_delay"):
        SimNetwork(min_delay=0.5, max_delay=0.1)


async def _failure_notes() -> list[str]:
    with pytest.raises(ExceptionGroup) as info:
        async with open_cluster(1, "sim", seed=1234):
            raise ValueError("scenario failed")
    return [n for e in [info.value, *info.value.exceptions] for n in getattr(e, "__notes__", [])]


async def test_a_failing_simulated_run_reports_its_seed(autojump_clock: Any) -> None:
    """On virtual time the seed replays the run: it is offered as the reproducer."""
    notes = await _failure_notes()
    assert any("virtual time: reproduce with seed=1234" in n for n in notes)


async def test_a_seed_on_the_real_clock_is_not_offered_as_a_reproducer() -> None:
    """Issue 12 item 5: on the real clock the same seed can pass and fail, so say so."""
    notes = await _failure_notes()
    assert any("seed=1234 on the real clock: a rerun may not replay it" in n for n in notes)
    assert not any("reproduce" in n for n in notes)


async def test_bound_endpoints_take_the_first_free_port_and_get_send_to_hosts(
    autojump_clock: Any,
) -> None:
    """With ``bind_port`` an endpoint takes the first free port of its range on the network's
    host, as TCP binds (a stopped one's port is free again), and discovery's `SendToHosts`
    reaches the endpoint listening at each address: what TCPPING needs to find members."""
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        sim = {"network": net.name, "bind_port": 7800, "port_range": 2}
        cfg = StackConfig.of(("SIM", sim), "PASS")
        a, b = Stack(cfg, "c", "A"), Stack(cfg, "c", "B")
        await nursery.start(a.run)
        await nursery.start(b.run)
        await trio.sleep(0.1)
        assert a.protocols[0].physical == (net.name, 7800)
        assert b.protocols[0].physical == (net.name, 7801)
        hosts = ((net.name, 7800), (net.name, 7801), (net.name, 7802))  # 7802: nobody
        await a.send(SendToHosts(hosts, (Message(None, b"who is there?"),)))
        item = await b.receive()
        while not isinstance(item, list):  # LocalPhysicalAddress comes up first
            item = await b.receive()
        assert [m.payload for m in item] == [b"who is there?"]
        assert net.stats()["unreachable"] == 1  # 7802; A's own address is skipped
        c_scope = trio.CancelScope()

        async def run_c() -> None:
            with c_scope:
                await Stack(cfg, "c", "C").run()

        nursery.start_soon(run_c)
        await trio.sleep(0.1)
        c_scope.cancel()
        await trio.sleep(0.1)
        d = Stack(cfg, "c", "D")
        await nursery.start(d.run)
        await trio.sleep(0.1)
        assert d.protocols[0].physical == (net.name, 7802)  # C's, free again
        nursery.cancel_scope.cancel()
