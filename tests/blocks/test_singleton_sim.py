"""The cluster singleton on simulated members, in virtual time.

A history of the actor's starts and stops and of each member's views
(`_checker.SingletonHistory`) shows one instance at a time in a view; the restart
after the coordinator's crash or leave is measured on virtual time against the bound
the how-to states (failure detection plus the view's installation).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
import trio

from tests.blocks._checker import Run, SingletonHistory
from tests.blocks.conftest import STACK
from triogroups import (
    Actor,
    Address,
    Channel,
    ChildSpec,
    Restart,
    SimNetwork,
    Singleton,
    open_channel,
    open_sim_network,
    open_singleton,
)

_FD = STACK.layers[STACK.names().index("FD_ALL3")].properties
_VERIFY = STACK.layers[STACK.names().index("VERIFY_SUSPECT")].properties
#: Crash to the next coordinator's start, as the how-to states it: suspected within
#: FD_ALL3's timeout + interval after the last heartbeat, excluded VERIFY_SUSPECT's
#: timeout later, plus the new view's installation (a round trip on the simulated
#: network; 1 s is generous).
CRASH_BOUND = _FD["timeout"] + _FD["interval"] + _VERIFY["timeout"] + 1.0
#: A leave: the coordinator stops the actor, leaves, and the next view is installed.
LEAVE_BOUND = 1.0


class Probe(Actor):
    """The singleton under test: notes its start and stop in the history."""

    def __init__(self, member: Member) -> None:
        self.member = member
        self.run_: Run | None = None

    async def started(self) -> None:
        self.run_ = self.member.history.started(self.member.name, self.member.channel.view)

    async def handle(self, message: Any) -> None:
        if message == "crash":
            if self.run_ is not None:  # no `stopped` after a crash
                self.member.history.stopped(self.run_)
            raise RuntimeError("the probe crashes on purpose")

    async def stopped(self) -> None:
        if self.run_ is not None:
            self.member.history.stopped(self.run_)


class Member:
    """One member running the singleton, and noting the views it installs."""

    def __init__(self, net: SimNetwork, history: SingletonHistory, name: str) -> None:
        self.net = net
        self.history = history
        self.name = name
        self.scope = trio.CancelScope()
        self.leaving = trio.Event()
        self.crashed_at: float | None = None
        self.channel: Channel
        self.singleton: Singleton

    @property
    def address(self) -> Address:
        return self.channel.address

    async def run(self, *, task_status: trio.TaskStatus[Member] = trio.TASK_STATUS_IGNORED) -> None:
        with self.scope:
            async with (
                open_channel("one", STACK, self.name, network=self.net, handle_signals=False) as ch,
                trio.open_nursery() as nursery,
            ):
                self.channel = ch
                await nursery.start(self._views)
                spec = ChildSpec("probe", lambda: Probe(self), Restart.PERMANENT)
                async with open_singleton(ch, spec) as singleton:
                    self.singleton = singleton
                    task_status.started(self)
                    await self.leaving.wait()
                nursery.cancel_scope.cancel()  # the views end with the channel only

    async def _views(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        views = self.channel.views()
        task_status.started()
        async for view in views:
            self.history.installed(self.name, view)

    def leave(self) -> None:
        """Leave gracefully: the block ends, the singleton stops, the channel leaves."""
        self.leaving.set()

    def crash(self, others: Sequence[Member]) -> None:
        """Stop at once without a leave, as a killed process (cut off first)."""
        self.net.partition([self.address], [m.address for m in others])
        self.crashed_at = trio.current_time()
        self.scope.cancel()


async def start(
    nursery: trio.Nursery, net: SimNetwork, history: SingletonHistory, names: str
) -> list[Member]:
    members = [await nursery.start(Member(net, history, n).run) for n in names]
    await wait_views(members, len(names))
    return members


async def wait_views(members: Sequence[Member], size: int, timeout: float = 60) -> None:
    with trio.fail_after(timeout):
        while len({m.channel.view for m in members}) != 1 or len(members[0].channel.view) != size:
            await trio.sleep(0.05)


async def settled(history: SingletonHistory, members: Sequence[Member]) -> None:
    """Until exactly one of ``members`` runs it, the coordinator of their one view, and
    every one of them says it runs there."""
    names = {m.name for m in members}
    with trio.fail_after(60):
        while True:
            coord = members[0].channel.view.coord
            if (
                [name for name in history.running() if name in names] == [coord.name]
                and all(m.singleton.location == coord for m in members)
                and all(m.channel.view.coord == coord for m in members)
            ):
                return
            await trio.sleep(0.05)


async def test_singleton_runs_on_the_coordinator_only(autojump_clock: Any) -> None:
    history = SingletonHistory()
    async with open_sim_network(seed=1) as net, trio.open_nursery() as nursery:
        a, b, c = await start(nursery, net, history, "ABC")
        await settled(history, [a, b, c])
        assert a.singleton.running and a.singleton.ref is not None
        assert not b.singleton.running and b.singleton.ref is None
        assert b.singleton.location == a.address
        assert b.singleton.stats()["location"] == str(a.address)
        nursery.cancel_scope.cancel()
    assert [run.member for run in history.runs] == ["A"]
    assert history.violations() == []


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_singleton_restarts_on_the_next_coordinator_after_a_crash(
    autojump_clock: Any, seed: int
) -> None:
    """A, the coordinator, crashes at a random moment: the next coordinator starts
    the actor within the bound, and B, C and D say it runs there."""
    history = SingletonHistory()
    rng = random.Random(seed)
    async with open_sim_network(seed=seed) as net, trio.open_nursery() as nursery:
        a, b, c, d = await start(nursery, net, history, "ABCD")
        await trio.sleep(rng.uniform(0.0, 3.0))
        moved = b.singleton.locations()
        assert await moved.__anext__() == a.address
        a.crash([b, c, d])
        assert a.crashed_at is not None
        with trio.fail_after(60):
            assert await moved.__anext__() in (b.address, c.address, d.address)
        await settled(history, [b, c, d])
        delay = history.runs[-1].start - a.crashed_at
        print(f"singleton restart after the coordinator's crash (seed {seed}): {delay:.3f} s")
        assert history.runs[-1].member == b.channel.view.coord.name
        assert delay <= CRASH_BOUND
        nursery.cancel_scope.cancel()
    assert history.violations() == []


@pytest.mark.parametrize("seed", [1, 2])
async def test_singleton_restarts_on_the_next_coordinator_after_a_leave(
    autojump_clock: Any, seed: int
) -> None:
    """A, the coordinator, leaves: it stops the actor before it leaves, and the next
    coordinator starts it once the view without A is installed: never two at once."""
    history = SingletonHistory()
    async with open_sim_network(seed=seed) as net, trio.open_nursery() as nursery:
        a, b, c = await start(nursery, net, history, "ABC")
        await settled(history, [a, b, c])
        left = trio.current_time()
        a.leave()
        await wait_views([b, c], 2)
        await settled(history, [b, c])
        stop, restart = history.runs[0].end, history.runs[-1].start
        assert stop is not None and stop <= restart
        delay = restart - left
        print(f"singleton restart after the coordinator's leave (seed {seed}): {delay:.3f} s")
        assert delay <= LEAVE_BOUND
        assert [run.member for run in history.runs] == ["A", b.channel.view.coord.name]
        nursery.cancel_scope.cancel()
    assert history.violations() == []


async def test_singleton_stays_when_another_member_leaves_or_joins(autojump_clock: Any) -> None:
    history = SingletonHistory()
    async with open_sim_network(seed=5) as net, trio.open_nursery() as nursery:
        a, b, c = await start(nursery, net, history, "ABC")
        c.leave()
        await wait_views([a, b], 2)
        d = await nursery.start(Member(net, history, "D").run)
        await wait_views([a, b, d], 3)
        await settled(history, [a, b, d])
        assert [run.member for run in history.runs] == ["A"]
        assert a.singleton.stats()["starts"] == 1
        nursery.cancel_scope.cancel()
    assert history.violations() == []


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_singleton_merge_of_two_sides_leaves_exactly_one(
    autojump_clock: Any, seed: int
) -> None:
    """A split runs one on each side (each side is a view of its own); the heal and merge
    stop one of them, on the member that is not the merged view's coordinator."""
    history = SingletonHistory()
    async with open_sim_network(seed=seed) as net, trio.open_nursery() as nursery:
        members = await start(nursery, net, history, "ABCD")
        a, b, c, d = members
        net.partition([a.address, b.address], [c.address, d.address])
        await wait_views([a, b], 2)
        await wait_views([c, d], 2)
        await settled(history, [a, b])
        await settled(history, [c, d])
        assert sorted(history.running()) == ["A", "C"]
        net.heal()
        await wait_views(members, 4, timeout=120)
        await settled(history, members)
        assert len(history.running()) == 1
        assert history.running() == [members[0].channel.view.coord.name]
        nursery.cancel_scope.cancel()
    assert history.violations() == []


async def test_singleton_actor_crash_is_restarted_in_place(autojump_clock: Any) -> None:
    """The actor's own crash is its supervisor's business: restarted on the same member,
    the location does not move."""
    history = SingletonHistory()
    async with open_sim_network(seed=2) as net, trio.open_nursery() as nursery:
        a, b = await start(nursery, net, history, "AB")
        ref = a.singleton.ref
        assert ref is not None
        await ref.send("crash")
        with trio.fail_after(10):
            while len(history.runs) < 2 or history.running() != ["A"]:
                await trio.sleep(0.05)
        assert ref.stats()["restarts"] == 1
        assert b.singleton.location == a.address
        assert a.singleton.stats()["starts"] == 1
        nursery.cancel_scope.cancel()


async def test_open_singleton_refuses_an_instance_and_a_name_that_differs(
    autojump_clock: Any,
) -> None:
    async with (
        open_sim_network(seed=1) as net,
        open_channel("one", STACK, "A", network=net, handle_signals=False) as ch,
    ):
        with pytest.raises(TypeError, match="not an instance"):
            async with open_singleton(ch, Actor()):  # type: ignore[arg-type]
                pass
        with pytest.raises(ValueError, match="differs from the ChildSpec's name"):
            async with open_singleton(ch, ChildSpec("x", Actor), name="y"):
                pass
        with pytest.raises(TypeError, match="ChildSpec or a factory"):
            async with open_singleton(ch, 3):  # type: ignore[arg-type]
                pass
        async with open_singleton(ch, Actor, name="plain") as one:
            assert one.name == "plain" and one.running and one.location == ch.address
        assert one.location is None and not one.running
