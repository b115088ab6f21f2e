"""Counters on simulated members: linearisable increments, a coordinator's crash, a merge."""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio

from tests.blocks.conftest import STACK, Member, split, start, wait_views
from triogroups import SimNetwork, open_channel, open_counter_service
from triogroups.address import Address
from triogroups.blocks._service import RETRY
from triogroups.testing._block_rules import Increment, counter_violations
from triogroups.view import MergeView


async def increment(member: Member, n: int, results: list[Increment], rng: random.Random) -> None:
    counter = member.counters.counter("n")
    for _ in range(n):
        start = trio.current_time()
        value = await counter.add_and_get(1)
        results.append(Increment(member.name, "n", value, start, trio.current_time()))
        await trio.sleep(rng.uniform(0.0, 0.05))


def assert_linearisable_increments(results: list[Increment], final: int) -> None:
    """The package's counter rules hold (each add_and_get(1) saw its own value, one called
    after another was answered a larger one), and the values are exactly 1..final: no
    update lost, none applied twice."""
    assert [text for _, text, _ in counter_violations(results)] == []
    assert sorted(r.value for r in results) == list(range(1, final + 1))


@pytest.mark.parametrize("seed", [1, 2])
async def test_counter_increments_from_many_members_are_linearisable(
    autojump_clock: Any, net: SimNetwork, seed: int
) -> None:
    rng = random.Random(seed)
    results: list[Increment] = []
    async with trio.open_nursery() as nursery:
        members = await start(nursery, net, "ABCD")
        with trio.fail_after(600):
            async with trio.open_nursery() as tasks:
                for member in members:
                    for _ in range(2):
                        tasks.start_soon(increment, member, 20, results, rng)
        final = await members[2].counters.counter("n").get()
        nursery.cancel_scope.cancel()
    assert final == 4 * 2 * 20
    assert_linearisable_increments(results, final)


async def test_counter_operations(autojump_clock: Any, net: SimNetwork) -> None:
    async with trio.open_nursery() as nursery:
        a, b = await start(nursery, net, "AB")
        n = b.counters.counter("n")
        assert await n.get() == 0
        await n.set(10)
        assert await a.counters.counter("n").get() == 10
        assert not await n.compare_and_set(3, 4)
        assert await a.counters.counter("n").compare_and_set(10, 4)
        assert await n.increment_and_get() == 5
        assert await n.add_and_get(-5) == 0
        with pytest.raises(TypeError, match="must be int"):
            await n.add_and_get(1.5)  # type: ignore[arg-type]
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("seed", [1, 2])
async def test_counter_survives_the_coordinators_crash_mid_run(
    autojump_clock: Any, net: SimNetwork, seed: int
) -> None:
    """B, C, D increment, three tasks each, while A (the coordinator, which keeps the
    counter) crashes: no increment lost or doubled, and the value is their number."""
    rng = random.Random(seed)
    results: list[Increment] = []
    async with trio.open_nursery() as nursery:
        a, b, c, d = await start(nursery, net, "ABCD")
        await b.counters.counter("n").set(0)
        with trio.fail_after(600):
            async with trio.open_nursery() as tasks:
                for member in (b, c, d):
                    for _ in range(3):  # updates from one member in flight at once
                        tasks.start_soon(increment, member, 10, results, rng)
                await trio.sleep(rng.uniform(0.3, 0.8))
                a.crash([b, c, d])
        await wait_views([b, c, d], 3)
        final = await d.counters.counter("n").get()
        nursery.cancel_scope.cancel()
    assert final == 3 * 30
    assert_linearisable_increments(results, final)


async def test_counter_keeps_its_value_when_the_coordinator_crashes(
    autojump_clock: Any, net: SimNetwork
) -> None:
    async with trio.open_nursery() as nursery:
        a, b, c = await start(nursery, net, "ABC")
        await c.counters.counter("n").set(42)
        a.crash([b, c])
        await wait_views([b, c], 2)
        assert await c.counters.counter("n").get() == 42
        nursery.cancel_scope.cancel()


async def test_without_backups_a_counter_dies_with_the_coordinator(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """num_backups=0, as in JGroups: only the coordinator had the value."""
    async with trio.open_nursery() as nursery:
        a, b, c = await start(nursery, net, "ABC", num_backups=0)
        await c.counters.counter("n").set(42)
        a.crash([b, c])
        await wait_views([b, c], 2)
        assert await c.counters.counter("n").get() == 0
        nursery.cancel_scope.cancel()


async def test_after_a_merge_the_merge_leaders_side_wins(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """Each side of a split counts on (every member keeps a copy, so both sides start
    from 100); after the heal every member reads the value of the side the merged
    view's coordinator was on."""
    async with trio.open_nursery() as nursery:
        a, b, c, d = await start(nursery, net, "ABCD", num_backups=3)
        await a.counters.counter("n").set(100)
        split(net, [a, b], [c, d])
        await wait_views([a, b], 2)
        await wait_views([c, d], 2)
        await b.counters.counter("n").add_and_get(1)
        await d.counters.counter("n").add_and_get(50)
        await c.counters.counter("only-cd").set(7)
        net.heal()
        await wait_views([a, b, c, d], 4, timeout=120)
        leader = a.channel.view.coord
        expected = 101 if leader in (a.channel.address, b.channel.address) else 150
        with trio.fail_after(30):
            values = {await m.counters.counter("n").get() for m in (a, b, c, d)}
        assert values == {expected}
        assert await a.counters.counter("only-cd").get() == 7
        nursery.cancel_scope.cancel()


async def test_an_update_whose_answer_died_with_the_coordinator_is_not_applied_twice(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """A applies D's increment and copies it to its backups, but its answer never
    reaches D (A to D is cut), then A crashes: D asks B, the next coordinator, which
    answers from the copy instead of adding again."""
    async with trio.open_nursery() as nursery:
        a, b, c, d = await start(nursery, net, "ABCD", num_backups=2)
        counter = d.counters.counter("n")
        assert await counter.add_and_get(1) == 1
        net.block(a.channel.address, d.channel.address)
        async with trio.open_nursery() as calls:
            results: list[int] = []

            async def call() -> None:
                results.append(await counter.add_and_get(1))

            calls.start_soon(call)
            with trio.fail_after(30):
                while b.counters._copy.entries["n"].value != 2:
                    await trio.sleep(0.01)
            a.crash([b, c, d])
        assert results == [2]
        assert await counter.get() == 2
        nursery.cancel_scope.cancel()


async def test_a_coordinator_applies_no_update_from_a_member_outside_its_view(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """Campaign udp-total-blocks seed 72152: D, coordinator, applied A's increment (1) but
    its answer never reached A, then installed a view without A and forgot A's answers;
    A, still in D's old view, asked D again and D added a second time (3), while C, which
    took over A's side, had the copy with 1. A coordinator now tells a caller outside its
    view to ask again (its own view's coordinator), and changes nothing."""
    async with trio.open_nursery() as nursery:
        a, b, c = await start(nursery, net, "ABC")
        outsider = Address.random("X").to_bytes()
        answer = await a.counters._on_add_and_get("n", [1], [outsider, 1, 1])
        assert answer == RETRY
        assert await c.counters.counter("n").get() == 0
        assert await b.counters.counter("n").add_and_get(1) == 1
        nursery.cancel_scope.cancel()


async def test_an_update_of_a_member_dropped_and_merged_back_is_not_applied_twice(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """A, coordinator, applies C's increment and copies it to B, but its answer never
    reaches C (A to C is cut). C then falls silent towards A and B, so they install a
    view without it, while C, which still hears B, stays in the old view and keeps asking
    A. Once the network heals a merge takes C back, and A rebuilds the counter from A's
    own table and B's copy, both of one version: C's resent increment is answered with
    the 1 that was applied for it, not added again (it had been, 2, when A's table forgot
    C's answers as the view dropped it and the rebuild picked A's entry)."""
    async with trio.open_nursery() as nursery:
        a, b, c = await start(nursery, net, "ABC")
        net.block(a.channel.address, c.channel.address)
        results: list[int] = []

        async def call() -> None:
            results.append(await c.counters.counter("n").add_and_get(1))

        async with trio.open_nursery() as calls:
            calls.start_soon(call)
            with trio.fail_after(30):
                while "n" not in b.counters._copy.entries:
                    await trio.sleep(0.01)
            net.block(c.channel.address, a.channel.address)
            net.block(c.channel.address, b.channel.address)
            await wait_views([a, b], 2)
            assert len(c.channel.view) == 3  # C never saw the view that dropped it
            net.heal()
        await wait_views([a, b, c], 3)
        assert isinstance(c.channel.view, MergeView)
        assert results == [1]
        assert await b.counters.counter("n").get() == 1
        nursery.cancel_scope.cancel()


async def test_a_counter_service_opened_again_on_a_channel_goes_on_counting(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """A's second counter service on the same channel goes on with the first one's
    seqnos: starting again at 1 its updates were below A's floor at the coordinator
    (refused as stale), or answered with the first service's remembered results."""
    async with trio.open_nursery() as nursery:
        await start(nursery, net, "B")
        async with open_channel("blocks", STACK, "A", network=net, handle_signals=False) as ch:
            with trio.fail_after(60):
                while len(ch.view.members) < 2:
                    await trio.sleep(0.1)
            values = []
            for _ in range(2):
                async with open_counter_service(ch) as counters:
                    for _ in range(2):
                        values.append(await counters.counter("n").add_and_get(1))
            assert values == [1, 2, 3, 4]
        nursery.cancel_scope.cancel()
