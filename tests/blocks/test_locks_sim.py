"""Locks on simulated members: mutual exclusion, fencing tokens, crashes and partitions.

Seeded runs on virtual time; a history of holds (`triogroups.testing._block_rules`) is
checked afterwards.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio

from tests.blocks.conftest import Member, split, start, wait_views
from triogroups import ChannelClosed, SimNetwork
from triogroups.testing._block_rules import LockHistory


async def contend(
    member: Member,
    history: LockHistory,
    name: str,
    rounds: int,
    rng: random.Random,
    longest: float = 0.2,
) -> None:
    """Hold ``name`` ``rounds`` times, each for up to ``longest`` seconds."""
    try:
        await hold_in_turn(member, history, name, rounds, rng, longest)
    except ChannelClosed:
        if not member.crashed:  # a crashed member's tasks die with it
            raise


async def hold_in_turn(
    member: Member,
    history: LockHistory,
    name: str,
    rounds: int,
    rng: random.Random,
    longest: float,
) -> None:
    for _ in range(rounds):
        async with member.locks.lock(name) as lock:
            view = member.channel.view
            names = [m.name for m in view.members]
            hold = history.acquired(member.name, name, lock.token, view.view_id, names)
            await trio.sleep(rng.uniform(0.0, longest))
            history.released(hold)
        await trio.sleep(rng.uniform(0.0, 0.1))


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_lock_mutual_exclusion_history(
    autojump_clock: Any, net: SimNetwork, seed: int
) -> None:
    """Four members, two tasks each, contend for two locks: no two owners at once and
    tokens strictly increasing (checked on the history)."""
    rng = random.Random(seed)
    history = LockHistory()
    async with trio.open_nursery() as nursery:
        members = await start(nursery, net, "ABCD")
        with trio.fail_after(600):
            async with trio.open_nursery() as tasks:
                for member in members:
                    for name in ("x", "x", "y"):
                        tasks.start_soon(contend, member, history, name, 8, rng)
        nursery.cancel_scope.cancel()
    assert len(history.holds) == 4 * 3 * 8
    assert history.violations() == []


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_lock_mutual_exclusion_across_the_coordinators_crash(
    autojump_clock: Any, net: SimNetwork, seed: int
) -> None:
    """As above while A, the coordinator, crashes mid-run (its tasks may hold a lock or
    wait): the history still shows one owner at a time among members of one view, and
    tokens that only grow."""
    rng = random.Random(seed)
    history = LockHistory()
    async with trio.open_nursery() as nursery:
        members = await start(nursery, net, "ABCD")
        a = members[0]
        with trio.fail_after(600):
            async with trio.open_nursery() as tasks:
                for member in members:
                    for name in ("x", "x", "y"):
                        # holds long enough to span the crash and the rebuild
                        tasks.start_soon(contend, member, history, name, 8, rng, 5.0)
                await trio.sleep(rng.uniform(1.0, 5.0))
                a.crash(members[1:])
        nursery.cancel_scope.cancel()
    assert sum(h.owner != "A" for h in history.holds) == 3 * 3 * 8
    assert history.violations() == []


async def test_owner_crash_releases_the_lock(autojump_clock: Any, net: SimNetwork) -> None:
    async with trio.open_nursery() as nursery:
        a, b, c = await start(nursery, net, "ABC")
        held = b.locks.lock("x")
        await held.acquire()
        assert not await c.locks.lock("x").try_lock(1.0)
        waiting = c.locks.lock("x")
        b.crash([a, c])
        with trio.fail_after(30):
            await waiting.acquire()
        assert waiting.token > held.token
        await wait_views([a, c], 2)
        nursery.cancel_scope.cancel()


async def test_owner_leave_releases_the_lock(autojump_clock: Any, net: SimNetwork) -> None:
    async with trio.open_nursery() as nursery:
        _, b, c = await start(nursery, net, "ABC")
        await b.locks.lock("x").acquire()
        b.leave()
        with trio.fail_after(30):
            async with c.locks.lock("x"):
                pass
        nursery.cancel_scope.cancel()


async def test_coordinator_crash_keeps_locks_and_tokens_grow(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """A (coordinator) crashes while B holds x: the next coordinator rebuilds the table
    from its backup and the members, so x stays B's; the next grant's token is larger
    than every earlier one."""
    history = LockHistory()
    async with trio.open_nursery() as nursery:
        a, b, c, d = await start(nursery, net, "ABCD")
        assert a.channel.view.coord == a.channel.address
        tokens = []
        for member in (a, c, d, b):
            async with member.locks.lock("x") as lock:
                tokens.append(lock.token)
        held = b.locks.lock("x")
        await held.acquire()
        hold = history.acquired("B", "x", held.token, b.channel.view.view_id)
        a.crash([b, c, d])
        await wait_views([b, c, d], 3)
        assert b.channel.view.coord == b.channel.address
        assert not await c.locks.lock("x").try_lock(2.0)  # still B's
        later = d.locks.lock("x")

        async def take_later() -> None:
            async with later:
                tokens.append(later.token)
                history.acquired("D", "x", later.token, d.channel.view.view_id)

        async with trio.open_nursery() as waiting:
            waiting.start_soon(take_later)
            await trio.sleep(1.0)
            assert len(tokens) == 4
            history.released(hold)
            tokens.append(held.token)
            await held.release()
        nursery.cancel_scope.cancel()
    assert tokens == sorted(set(tokens))
    assert history.violations() == []


async def test_try_lock_times_out_and_holds_nothing(autojump_clock: Any, net: SimNetwork) -> None:
    async with trio.open_nursery() as nursery:
        a, b = await start(nursery, net, "AB")
        held = a.locks.lock("x")
        await held.acquire()
        late = b.locks.lock("x")
        assert not await late.try_lock(0.5)
        assert not await late.try_lock(0)
        assert not late.held
        await held.release()
        assert await late.try_lock(0)  # free now: taken at once
        await late.release()
        assert b.locks.stats()["held_here"] == []
        nursery.cancel_scope.cancel()


async def test_a_lock_is_not_reentrant_and_released_by_its_own_task(
    autojump_clock: Any, net: SimNetwork
) -> None:
    async with trio.open_nursery() as nursery:
        (a,) = await start(nursery, net, "A")
        lock = a.locks.lock("x")
        await lock.acquire()
        with pytest.raises(RuntimeError, match="held by this task already"):
            await a.locks.lock("x").acquire()
        errors: list[BaseException] = []

        async def release_elsewhere() -> None:
            try:
                await lock.release()
            except RuntimeError as exc:
                errors.append(exc)

        async with trio.open_nursery() as other:
            other.start_soon(release_elsewhere)
        assert "another task" in str(errors[0])
        await lock.release()
        with pytest.raises(RuntimeError, match="not held"):
            await lock.release()
        nursery.cancel_scope.cancel()


async def test_cancelled_acquire_holds_nothing(autojump_clock: Any, net: SimNetwork) -> None:
    async with trio.open_nursery() as nursery:
        a, b = await start(nursery, net, "AB")
        held = a.locks.lock("x")
        await held.acquire()
        with trio.move_on_after(1.0):
            await b.locks.lock("x").acquire()
        await held.release()
        assert await a.locks.lock("x").try_lock(1.0)  # b's cancelled request is gone
        nursery.cancel_scope.cancel()


async def test_majority_mode_refuses_in_a_minority_partition(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """{A, B} | {C, D, E}: the minority (with the old coordinator) grants nothing, its
    owner learns its lock is lost, the majority grants it with a larger token."""
    history = LockHistory()
    async with trio.open_nursery() as nursery:
        members = await start(nursery, net, "ABCDE", majority=True)
        a, b, c, d, e = members
        held = b.locks.lock("x")
        await held.acquire()
        history.acquired("B", "x", held.token, b.channel.view.view_id)
        split(net, [a, b], [c, d, e])
        await wait_views([a, b], 2)
        await wait_views([c, d, e], 3)
        assert held.lost and not held.held
        assert not await a.locks.lock("y").try_lock(5.0)
        assert not await b.locks.lock("z").try_lock(5.0)
        taken = d.locks.lock("x")
        assert await taken.try_lock(5.0)
        history.acquired("D", "x", taken.token, d.channel.view.view_id)
        assert taken.token > held.token
        assert await c.locks.lock("y").try_lock(5.0)
        net.heal()
        await wait_views(members, 5, timeout=120)
        await trio.sleep(5.0)  # the merged view's table is rebuilt
        assert taken.held and held.lost
        assert not await a.locks.lock("x").try_lock(1.0)  # still D's after the merge
        nursery.cancel_scope.cancel()
    assert history.violations() == []


async def test_without_majority_both_sides_grant_and_the_merge_keeps_one_owner(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """CENTRAL_LOCK's behaviour: each side of a split grants x; after the heal the
    merged view keeps the owner with the larger token and tells the other it lost x."""
    async with trio.open_nursery() as nursery:
        a, b, c, d = await start(nursery, net, "ABCD")
        split(net, [a, b], [c, d])
        await wait_views([a, b], 2)
        await wait_views([c, d], 2)
        left, right = b.locks.lock("x"), d.locks.lock("x")
        assert await left.try_lock(5.0)
        assert await right.try_lock(5.0)
        net.heal()
        await wait_views([a, b, c, d], 4, timeout=120)
        with trio.fail_after(30):
            while left.held and right.held:
                await trio.sleep(0.1)
        winner, loser = (left, right) if left.token > right.token else (right, left)
        assert winner.held and not loser.held and loser.lost
        nursery.cancel_scope.cancel()


async def test_majority_mode_refuses_a_grant_that_arrives_in_a_minority_view(
    autojump_clock: Any, net: SimNetwork, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42, campaign udp-total-blocks seed 143: the coordinator A grants x to C in
    the full view A..E, and its answer reaches C only after C installed {A, C}, a view
    without a majority (held back here until then, as a network may delay it). C must
    not hold x there: the majority side frees it and grants it to another."""
    async with trio.open_nursery() as nursery:
        members = await start(nursery, net, "ABCDE", majority=True)
        a, b, c, d, e = members
        rpc = c.channel.rpc
        real_call_one = rpc.call_one

        async def answer_after_the_split(method: str, *args: Any, **kwargs: Any) -> Any:
            answer = await real_call_one(method, *args, **kwargs)
            if method.endswith("acquire"):
                while len(c.channel.view) != 2:
                    await trio.sleep(0.05)
            return answer

        monkeypatch.setattr(rpc, "call_one", answer_after_the_split)
        lock = c.locks.lock("x")
        taken: list[bool] = []

        async def take() -> None:
            taken.append(await lock.try_lock(3.0))

        nursery.start_soon(take)
        await trio.sleep(1.0)  # A granted x to C; the answer is on its way
        split(net, [a, c], [b, d, e])
        await wait_views([a, c], 2)
        await wait_views([b, d, e], 3)
        with trio.fail_after(30):
            while not taken:
                await trio.sleep(0.1)
        assert taken == [False] and not lock.held
        assert c.locks.stats()["refused_grants"] == 1
        assert await d.locks.lock("x").try_lock(10.0)  # the majority side's, now
        nursery.cancel_scope.cancel()


async def test_a_coordinator_whose_service_lags_its_channel_s_view_grants_nothing(
    autojump_clock: Any, net: SimNetwork, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42, campaign udp-total-blocks seed 70122: the coordinator's service takes the
    channel's views one at a time, and a view's whole copy to a fresh backup that does
    not answer holds it there (held back here until the heal, as a cut-off backup holds
    it up to ``timeout``). Meanwhile its channel installed a minority view {A}; the
    service's table and majority were still those of {A, C, D, E}, and A granted x to
    itself while the majority side gave it to D. A now serves only once its service has
    caught up with the channel's view."""
    async with trio.open_nursery() as nursery:
        members = await start(nursery, net, "ABCDE", majority=True)
        a, b, c, d, e = members
        assert a.channel.view.coord == a.channel.address
        rpc = a.channel.rpc
        real_call = rpc.call
        healed = trio.Event()

        async def copy_answered_after_the_heal(method: str, *args: Any, **kwargs: Any) -> Any:
            if method == "triogroups.locks.copy":
                await healed.wait()
            return await real_call(method, *args, **kwargs)

        monkeypatch.setattr(rpc, "call", copy_answered_after_the_heal)
        b.leave()  # C becomes A's backup: A's service waits on its copy
        await wait_views([a, c, d, e], 4)
        split(net, [a], [c, d, e])
        await wait_views([a], 1)
        await wait_views([c, d, e], 3)
        taken = d.locks.lock("x")
        assert await taken.try_lock(5.0)
        stale = a.locks.lock("x")
        assert not await stale.try_lock(2.0)
        rebuilds = a.locks.stats()["rebuilds"] + c.locks.stats()["rebuilds"]
        net.heal()
        await wait_views([a, c, d, e], 4, timeout=120)
        healed.set()
        with trio.fail_after(30):  # the merged view's coordinator rebuilds its table
            while a.locks.stats()["rebuilds"] + c.locks.stats()["rebuilds"] == rebuilds:
                await trio.sleep(0.1)
        await trio.sleep(1.0)
        assert taken.held and not taken.lost
        assert not await a.locks.lock("x").try_lock(1.0)  # still D's after the merge
        nursery.cancel_scope.cancel()
