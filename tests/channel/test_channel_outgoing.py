"""`Channel.send` leaves its message in the channel until the task yields; the flusher then
hands every message sent meanwhile to the stack as one batch (see `_channel`'s docstring)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from triogroups import Channel, Received, SimNetwork, Stack, StackConfig, open_channel
from triogroups._cadence import SEND_CHECKPOINT_EVERY
from triogroups.testing import wait_until


def _top(ch: Channel) -> dict[str, Any]:
    """The top layer's host counters (``batches_down``, ``msgs_down``)."""
    host: dict[str, Any] = ch.stack.stats()["layers"][-1]["host"]
    return host


@asynccontextmanager
async def _a_and_b(net: SimNetwork, stack: StackConfig) -> AsyncIterator[tuple[Channel, Channel]]:
    """Members A and B of group "c" on ``net``."""
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net) as b,
    ):
        yield a, b


async def _receive(ch: Channel, n: int) -> list[Received]:
    got: list[Received] = []
    with trio.fail_after(30):
        while len(got) < n:
            got.append(await ch.receive())
    return got


async def test_a_loop_of_sends_goes_down_in_batches_not_one_by_one(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """320 sends from one task reach the top layer in at most eleven batches (one per
    yield, and the layer may merge some), not 320, and every member gets every message
    once and in order."""
    count = 10 * SEND_CHECKPOINT_EVERY
    async with _a_and_b(net, stack) as (a, b):
        before = _top(a)
        for i in range(count):
            await a.send(i)
        for ch in (a, b):
            assert [m.payload for m in await _receive(ch, count)] == list(range(count))
        after = _top(a)
        assert after["msgs_down"] - before["msgs_down"] == count
        batches = after["batches_down"] - before["batches_down"]
        assert batches <= count // SEND_CHECKPOINT_EVERY + 1
        assert a.stats()["sent"] == count and a.stats()["outgoing"] == 0


async def test_a_sent_message_waits_in_the_channel_until_the_task_yields(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with _a_and_b(net, stack) as (a, b):
        before = _top(a)["msgs_down"]
        await a.send(b"one")
        await a.send(b"two", to=b.address)
        assert a.stats()["outgoing"] == 2 and _top(a)["msgs_down"] == before
        await trio.testing.wait_all_tasks_blocked()
        assert a.stats()["outgoing"] == 0 and _top(a)["msgs_down"] == before + 2
        assert sorted(m.payload for m in await _receive(b, 2)) == [b"one", b"two"]


async def test_every_other_way_down_takes_the_outgoing_messages_first(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """`send_nowait`, `send_many` and an RPC sent after some `send` calls, with no yield
    between, reach every member after them: nothing overtakes a message sent earlier."""
    async with _a_and_b(net, stack) as (a, b):
        b.rpc.register("delivered", lambda: b.stats().get("delivered", 0))
        await a.send(0)
        await a.send(1)
        a.send_nowait(2)
        await a.send(3)
        await a.send_many([4, 5])
        await a.send(6)
        await a.send(7)
        rsps = await a.rpc.call("delivered", exclude_self=True)  # ordered with multicasts
        assert rsps[b.address].value == 8  # 0..7 were handed to B's queue before it
        assert [m.payload for m in await _receive(b, 8)] == list(range(8))


async def test_a_send_that_returned_is_sent_even_if_its_task_is_cancelled_next(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with _a_and_b(net, stack) as (a, b):
        with trio.CancelScope() as scope:
            await a.send(b"kept")
            scope.cancel()
            await trio.sleep(1)
        assert scope.cancelled_caught
        assert [m.payload for m in await _receive(b, 1)] == [b"kept"]


async def test_messages_sent_just_before_leaving_reach_the_group(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """A task that sends and leaves at once, without yielding: the leave goes after the
    messages, so every other member gets them."""
    async with open_channel("c", stack, "B", network=net) as b:
        async with open_channel("c", stack, "A", network=net) as a:
            await wait_until(lambda: len(b.view) >= 2, timeout=30, interval=0.01)
            for i in range(5):
                await a.send(i)
            assert a.stats()["outgoing"] == 5
        assert [m.payload for m in await _receive(b, 5)] == list(range(5))


async def test_messages_outgoing_when_the_stack_restarts_are_dropped_and_counted(
    autojump_clock: Any, stack: StackConfig
) -> None:
    """A restarted member starts its seqnos again, so what the old incarnation had yet to
    hand over cannot go: it is counted as dropped, and the seqnos start from 0."""
    the_stack = Stack(stack, "c", "A")
    the_stack._new_incarnation()
    ch = Channel(the_stack)
    async with trio.open_nursery() as nursery:
        ch._nursery = nursery
        nursery.start_soon(ch._flush_loop)
        await trio.testing.wait_all_tasks_blocked()
        await ch.send(b"old")
        await ch.send(b"old")
        assert ch.stats()["outgoing"] == 2
        the_stack._new_incarnation()
        stats = ch.stats()
        assert stats["outgoing"] == 0 and stats["dropped"]["restarted"] == 2
        assert stats["seqno"] == 0
        nursery.cancel_scope.cancel()
