"""Actor, ActorRef and unsupervised spawn: mailboxes, hooks, crashes, cancellation."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from triogroups.actors import Actor, ActorCrashed, ActorGone, MailboxFull, spawn


class Collector(Actor):
    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.log: list[str] = []

    async def started(self) -> None:
        self.log.append("started")

    async def handle(self, message: Any) -> None:
        self.seen.append(message)

    async def stopped(self) -> None:
        self.log.append("stopped")

    def stats(self) -> dict[str, Any]:
        return {"seen": len(self.seen)}


class Gated(Collector):
    """Does not read its mailbox until the gate opens."""

    mailbox_size = 2

    def __init__(self) -> None:
        super().__init__()
        self.gate = trio.Event()

    async def started(self) -> None:
        await self.gate.wait()


class Bomb(Actor):
    def __init__(self) -> None:
        self.stopped_called = False

    async def handle(self, message: Any) -> None:
        explode_deliberately(message)

    async def stopped(self) -> None:
        self.stopped_called = True


def explode_deliberately(message: Any) -> None:
    raise KeyError(message)


async def test_spawn_delivers_messages_in_send_order(autojump_clock: trio.abc.Clock) -> None:
    actor = Collector()
    async with trio.open_nursery() as nursery:
        ref = spawn(nursery, actor, name="collector")
        for i in range(3):
            await ref.send(i)
        ref.send_nowait(3)
        await ref.send(4)
        await trio.testing.wait_all_tasks_blocked()
        assert actor.seen == [0, 1, 2, 3, 4]
        assert ref.name == actor.name == "collector"
        stats = ref.stats()
        assert stats["processed"] == 5
        assert stats["state"] == "running"
        assert stats["actor"] == {"seen": 5}
        nursery.cancel_scope.cancel()


async def test_spawn_default_name_is_the_class_name(autojump_clock: trio.abc.Clock) -> None:
    async with trio.open_nursery() as nursery:
        ref = spawn(nursery, Collector())
        assert ref.name == "Collector"
        nursery.cancel_scope.cancel()


async def test_messages_sent_before_the_actor_started_wait_in_the_mailbox(
    autojump_clock: trio.abc.Clock,
) -> None:
    actor = Collector()
    async with trio.open_nursery() as nursery:
        ref = spawn(nursery, actor)
        ref.send_nowait("early")
        assert actor.log == []
        await trio.testing.wait_all_tasks_blocked()
        assert actor.log == ["started"]
        assert actor.seen == ["early"]
        nursery.cancel_scope.cancel()


async def test_send_nowait_raises_mailbox_full_at_capacity(autojump_clock: trio.abc.Clock) -> None:
    actor = Gated()
    async with trio.open_nursery() as nursery:
        ref = spawn(nursery, actor)
        ref.send_nowait(1)
        ref.send_nowait(2)
        with pytest.raises(MailboxFull, match="capacity 2"):
            ref.send_nowait(3)
        stats = ref.stats()
        assert (stats["mailbox_depth"], stats["mailbox_capacity"]) == (2, 2)
        actor.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert actor.seen == [1, 2]
        nursery.cancel_scope.cancel()


def test_mailbox_full_is_a_would_block() -> None:
    assert issubclass(MailboxFull, trio.WouldBlock)


async def test_send_waits_while_the_mailbox_is_full(autojump_clock: trio.abc.Clock) -> None:
    actor = Gated()
    sent = trio.Event()

    async def send_third(ref_: Any) -> None:
        await ref_.send(3)
        sent.set()

    async with trio.open_nursery() as nursery:
        ref = spawn(nursery, actor)
        await ref.send(1)
        await ref.send(2)
        nursery.start_soon(send_third, ref)
        await trio.testing.wait_all_tasks_blocked()
        assert not sent.is_set()
        assert ref.stats()["senders_waiting"] == 1
        actor.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert sent.is_set()
        assert actor.seen == [1, 2, 3]
        nursery.cancel_scope.cancel()


async def test_send_to_an_actor_that_returned_raises_actor_gone(
    autojump_clock: trio.abc.Clock,
) -> None:
    class OneShot(Actor):
        async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
            await mailbox.receive()

    async with trio.open_nursery() as nursery:
        ref = spawn(nursery, OneShot(), name="oneshot")
        await ref.send("only")
    assert ref.stats()["state"] == "stopped"
    with pytest.raises(ActorGone, match="'oneshot' is stopped"):
        await ref.send("late")
    with pytest.raises(ActorGone):
        ref.send_nowait("late")


async def test_a_sender_waiting_on_a_full_mailbox_gets_actor_gone_when_it_stops(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with trio.open_nursery() as outer, trio.open_nursery() as inner:
        ref = spawn(inner, Gated())
        ref.send_nowait(1)
        ref.send_nowait(2)
        outcome: list[str] = []

        async def blocked_send() -> None:
            try:
                await ref.send(3)
            except ActorGone:
                outcome.append("gone")

        outer.start_soon(blocked_send)
        await trio.testing.wait_all_tasks_blocked()
        inner.cancel_scope.cancel()
    assert outcome == ["gone"]


async def test_crash_of_a_spawned_actor_raises_actor_crashed_with_the_original(
    autojump_clock: trio.abc.Clock,
) -> None:
    actor = Bomb()
    with pytest.RaisesGroup(ActorCrashed) as info:
        async with trio.open_nursery() as nursery:
            ref = spawn(nursery, actor, name="bomb")
            await ref.send("fuse")
    crashed = info.value.exceptions[0]
    assert isinstance(crashed, ActorCrashed)
    assert crashed.actor == "bomb"
    assert isinstance(crashed.exception, KeyError)
    assert crashed.__cause__ is crashed.exception
    assert "explode_deliberately" in crashed.traceback
    assert "'bomb' crashed: KeyError" in str(crashed)
    assert not actor.stopped_called
    assert ref.stats()["state"] == "stopped"


async def test_cancellation_is_not_a_crash_and_runs_stopped(
    autojump_clock: trio.abc.Clock,
) -> None:
    actor = Collector()
    async with trio.open_nursery() as nursery:
        ref = spawn(nursery, actor)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert actor.log == ["started", "stopped"]
    with pytest.raises(ActorGone):
        ref.send_nowait("late")


async def test_stopped_runs_after_a_normal_return(autojump_clock: trio.abc.Clock) -> None:
    class Quitter(Collector):
        async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
            self.log.append("run")

    actor = Quitter()
    async with trio.open_nursery() as nursery:
        spawn(nursery, actor)
    assert actor.log == ["started", "run", "stopped"]


async def test_stopped_hook_is_bounded_by_stop_timeout(autojump_clock: trio.abc.Clock) -> None:
    class Stubborn(Actor):
        stop_timeout = 0.5

        async def stopped(self) -> None:
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        spawn(nursery, Stubborn())
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
        cancelled_at = trio.current_time()
    assert trio.current_time() - cancelled_at == pytest.approx(0.5)


async def test_an_actor_without_handle_crashes_on_its_first_message(
    autojump_clock: trio.abc.Clock,
) -> None:
    with pytest.RaisesGroup(
        pytest.RaisesExc(ActorCrashed, check=lambda e: isinstance(e.exception, NotImplementedError))
    ):
        async with trio.open_nursery() as nursery:
            ref = spawn(nursery, Actor())
            await ref.send("hello")


async def test_negative_mailbox_size_is_rejected(autojump_clock: trio.abc.Clock) -> None:
    class Broken(Actor):
        mailbox_size = -1

    async with trio.open_nursery() as nursery:
        with pytest.raises(ValueError, match="mailbox_size must be >= 0, got -1"):
            spawn(nursery, Broken())
