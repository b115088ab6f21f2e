"""State transfer on join: the joiner's state plus what it delivers afterwards contains
every ordered multicast exactly once, in each sender's order."""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio

from triogroups import (
    Address,
    Channel,
    SimNetwork,
    StackConfig,
    StateTransferFailed,
    open_channel,
)
from triogroups._channel._state import Alignment, first_gap
from triogroups.testing import wait_until


class Ledger:
    """An application whose state is every (sender, value) it applied, in order."""

    def __init__(self, delay: float = 0.0, seed: int = 0) -> None:
        self.applied: list[tuple[str, int]] = []
        self.set_calls = 0
        self.delay = delay
        self.rng = random.Random(seed)

    def get_state(self) -> list[list[Any]]:
        return [list(entry) for entry in self.applied]

    def set_state(self, state: list[list[Any]]) -> None:
        self.set_calls += 1
        self.applied = [(str(s), int(v)) for s, v in state]

    async def consume(self, ch: Channel) -> None:
        async for msg in ch:
            if self.delay:
                await trio.sleep(self.rng.random() * self.delay)
            self.applied.append((msg.src.name, msg.payload))

    def values(self, sender: str) -> list[int]:
        return [v for s, v in self.applied if s == sender]


async def test_joiner_gets_the_coordinators_state_before_its_first_message(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    la, lb = Ledger(), Ledger()
    async with (
        open_channel("c", stack, "A", network=net, state=la) as a,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(la.consume, a)
        for i in range(20):
            await a.send(i)
        await wait_until(lambda: len(la.applied) == 20)
        async with open_channel("c", stack, "B", network=net, state=lb) as b:
            assert lb.set_calls == 1
            assert lb.values("A") == list(range(20))
            for i in range(20, 30):
                await a.send(i)
            assert [(await b.receive()).payload for _ in range(10)] == list(range(20, 30))
        nursery.cancel_scope.cancel()


async def test_state_is_taken_once_the_coordinator_finished_what_it_had_queued(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """The coordinator's reader is slow: messages still queued when STATE_REQ arrives
    end up in the state, because state is taken only when the reader is idle."""
    la, lb = Ledger(), Ledger()

    async def slow(ch: Channel) -> None:
        async for msg in ch:
            await trio.sleep(1.0)
            la.applied.append((msg.src.name, msg.payload))

    async with (
        open_channel("c", stack, "A", network=net, state=la) as a,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(slow, a)
        for i in range(10):
            await a.send(i)
        await trio.sleep(0.1)
        assert len(la.applied) < 10
        async with open_channel("c", stack, "B", network=net, state=lb) as b:
            assert lb.values("A") == list(range(10))
            with pytest.raises(trio.WouldBlock):
                b.receive_nowait()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_state_transfer_is_exact_while_members_keep_sending(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig, seed: int
) -> None:
    """Lossy, reordering network; A and C send throughout B's join; readers are slow."""
    net.set_faults(loss=0.05, min_delay=0.001, max_delay=0.02)
    # A lost last message is healed by STABLE's rounds: make them frequent.
    stack = stack.configure("STABLE", desired_avg_gossip=1.0)
    count = 60
    ledgers = {name: Ledger(delay=0.05, seed=seed + i) for i, name in enumerate("ACB")}
    async with (
        open_channel("c", stack, "A", network=net, state=ledgers["A"]) as a,
        open_channel("c", stack, "C", network=net, state=ledgers["C"]) as c,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(ledgers["A"].consume, a)
        nursery.start_soon(ledgers["C"].consume, c)

        async def send(ch: Channel) -> None:
            rng = random.Random(seed)
            for i in range(count):
                await ch.send(i)
                await trio.sleep(rng.random() * 0.1)

        nursery.start_soon(send, a)
        nursery.start_soon(send, c)
        await trio.sleep(1.0)
        async with open_channel("c", stack, "B", network=net, state=ledgers["B"]) as b:
            assert ledgers["B"].set_calls == 1
            nursery.start_soon(ledgers["B"].consume, b)
            await wait_until(
                lambda: all(len(ledger.applied) == 2 * count for ledger in ledgers.values())
            )
            for name, ledger in ledgers.items():
                for sender in "AC":
                    assert ledger.values(sender) == list(range(count)), (name, sender)
            assert b.stats()["seqno_gaps"] == 0
            nursery.cancel_scope.cancel()


async def test_a_member_alone_starts_with_its_own_state(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    ledger = Ledger()
    ledger.applied = [("earlier", 1)]
    async with open_channel("c", stack, "A", network=net, state=ledger) as a:
        await a.send(5)
        assert (await a.receive()).payload == 5
    assert ledger.set_calls == 0
    assert ledger.applied == [("earlier", 1)]


async def test_a_coordinator_without_state_leaves_the_joiner_its_own(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    lb = Ledger()
    async with open_channel("c", stack, "A", network=net) as a:
        await a.send(1)
        async with open_channel("c", stack, "B", network=net, state=lb) as b:
            await a.send(2)
            assert (await b.receive()).payload == 2
    assert lb.set_calls == 0


async def test_state_transfer_fails_when_the_coordinator_never_finishes_a_message(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with open_channel("c", stack, "A", network=net, state=Ledger()) as a:
        await a.send(1)
        await a.receive()  # and never comes back: A is busy for good
        with pytest.raises(StateTransferFailed, match="within 5"):
            async with open_channel("c", stack, "B", network=net, state=Ledger(), state_timeout=5):
                pass


async def test_joiner_asks_the_next_coordinator_when_the_one_it_asked_leaves(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    la, lc, lb = Ledger(), Ledger(), Ledger()
    joined = trio.Event()
    async with (
        trio.open_nursery() as nursery,
        open_channel("c", stack, "A", network=net, state=la) as a,
        open_channel("c", stack, "C", network=net, state=lc) as c,
    ):
        nursery.start_soon(lc.consume, c)
        for i in range(5):
            await a.send(i)
        await a.receive()  # A reads one message and stays busy: it cannot answer
        await wait_until(lambda: len(lc.applied) == 5)

        async def join_b() -> None:
            async with open_channel("c", stack, "B", network=net, state=lb) as b:
                assert b.view.coord == c.address
                joined.set()
                await trio.sleep_forever()

        nursery.start_soon(join_b)
        await wait_until(lambda: len(a.view) == 3)
        await trio.sleep(1.0)
        assert not joined.is_set()
        await a.aclose()  # the coordinator B asked leaves; B must turn to C
        with trio.fail_after(30):
            await joined.wait()
        assert lb.values("A") == list(range(5))
        nursery.cancel_scope.cancel()


async def test_joiner_asks_again_while_the_member_it_asked_is_behind(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """D, the next coordinator, misses C's messages (C->D blocked) that B holds: B
    refuses D's state until D has caught up, instead of losing those messages."""
    la, ld, lc, lb = Ledger(), Ledger(), Ledger(), Ledger()
    joined = trio.Event()
    b_channel: list[Channel] = []
    async with (
        trio.open_nursery() as nursery,
        open_channel("c", stack, "A", network=net, state=la) as a,
        open_channel("c", stack, "D", network=net, state=ld) as d,
        open_channel("c", stack, "C", network=net, state=lc) as c,
    ):
        nursery.start_soon(ld.consume, d)
        nursery.start_soon(lc.consume, c)
        net.block(c.address, d.address)
        for i in range(10):
            await c.send(i)
        await a.receive()  # A stays busy with this one: it never answers B

        async def join_b() -> None:
            async with open_channel("c", stack, "B", network=net, state=lb) as b:
                b_channel.append(b)
                joined.set()
                await lb.consume(b)

        nursery.start_soon(join_b)
        await wait_until(lambda: len(a.view) == 4)
        for i in range(10, 20):
            await c.send(i)
        await a.aclose()
        await trio.sleep(5)
        assert not joined.is_set()
        assert ld.values("C") == []
        net.heal()
        await c.send(20)  # D sees the gap and has C's messages retransmitted
        with trio.fail_after(60):
            await joined.wait()
        assert b_channel[0].stats()["state_responses_behind"] >= 1
        await wait_until(lambda: len(lb.values("C")) >= 21)
        assert lb.values("C") == list(range(21))
        nursery.cancel_scope.cancel()


async def test_a_state_that_cannot_be_sent_fails_the_join_not_the_coordinator(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    class Opaque(Ledger):
        def get_state(self) -> Any:
            return object()

    async with open_channel("c", stack, "A", network=net, state=Opaque()) as a:
        with pytest.raises(StateTransferFailed):
            async with open_channel("c", stack, "B", network=net, state=Ledger(), state_timeout=3):
                pass
        assert a.stats()["states_not_sent"] >= 1
        await a.send("still working")
        assert (await a.receive()).payload == "still working"


def test_alignment_drops_what_the_state_contains_and_counts_gaps() -> None:
    a, b = Address(1, "a"), Address(2, "b")
    align = Alignment()
    align.install([(a, 3)])
    assert [align.accept(a, n) for n in (2, 3, 4, 5)] == [False, False, True, True]
    assert align.accept(b, 7) and align.gaps == 0  # a sender's first message may be any seqno
    assert align.accept(b, 9) and align.gaps == 1
    assert dict(align.snapshot()) == {a: 5, b: 9}


def test_first_gap_finds_a_sender_whose_first_held_message_does_not_follow_the_state() -> None:
    a, b = Address(1, "a"), Address(2, "b")
    assert first_gap([(a, 4), (b, 1), (a, 5)], [(a, 3)]) is None
    assert first_gap([(a, 4), (b, 2)], [(a, 3)]) == b
    assert first_gap([(a, 6)], [(a, 3)]) == a
    assert first_gap([(a, 2)], [(a, 3)]) is None  # already contained: dropped on release
