"""How often sends yield to the scheduler: one helper (`triogroups._cadence`) for the stack,
the channel and its receive queue, and the behaviour `Channel.send` documents."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest
import trio
import trio.testing

from triogroups import (
    Channel,
    ChannelClosed,
    Message,
    SimNetwork,
    Stack,
    StackConfig,
    open_channel,
)
from triogroups._cadence import SEND_CHECKPOINT_EVERY, Cadence, due


def test_cadence_says_every_nth_call_yields() -> None:
    cadence = Cadence(4)
    assert [cadence.tick() for _ in range(9)] == [False, False, False, True] * 2 + [False]
    assert [due(n, 4) for n in range(1, 9)] == [False, False, False, True] * 2
    with pytest.raises(ValueError, match="every must be >= 1, got 0"):
        Cadence(0)


async def _yields(send: Any) -> bool:
    try:
        with trio.testing.assert_no_checkpoints():
            await send()
    except AssertionError:
        return True
    return False


async def test_channel_send_yields_once_per_send_checkpoint_interval_unlike_trios_send(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """With room in the stack, exactly every `SEND_CHECKPOINT_EVERY`th send checkpoints and
    the others return without yielding (so a loop of sends stays cancellable, and a burst is
    one batch).
    Trio's own memory channel checkpoints on every send."""
    calls = 4 * SEND_CHECKPOINT_EVERY
    yielded = []
    async with open_channel("c", stack, "A", network=net) as a:
        for _ in range(calls):
            yielded.append(await _yields(lambda: a.send(b"x")))
            await trio.testing.wait_all_tasks_blocked()  # the stack takes it: room for the next
    at = [i for i, y in enumerate(yielded) if y]
    assert len(at) == calls // SEND_CHECKPOINT_EVERY, at
    assert {later - earlier for earlier, later in pairwise(at)} == {SEND_CHECKPOINT_EVERY}
    tx, rx = trio.open_memory_channel[bytes](100)
    async with tx, rx:
        assert all([await _yields(lambda: tx.send(b"x")) for _ in range(10)])


async def test_a_loop_of_channel_sends_can_be_cancelled(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Sends that never yielded could not be cancelled: the periodic checkpoint ends it."""
    async with open_channel("c", stack, "A", network=net) as a:
        sent = 0
        with trio.move_on_after(0) as scope:
            while True:
                await a.send(b"x")
                sent += 1
        assert scope.cancelled_caught and sent < SEND_CHECKPOINT_EVERY


async def test_a_send_that_yields_while_the_channel_closes_sends_nothing(
    autojump_clock: Any, sent_down: Callable[[Stack], list[Message]]
) -> None:
    """`Channel.send` checks that the channel is open again after its periodic checkpoint:
    a channel closed by another task meanwhile refuses the send (ChannelClosed), which took
    no seqno and put nothing into the stack. (Trio runs the closer and the resumed sender
    in either order, so the closing send is the first or the second to yield. The stack
    does not run here: its queue holds every send up to the second, or the sender would
    wait for room that never comes.)"""
    stack = Stack(
        StackConfig.of("SIM", "PING", "NAKACK2", "GMS"),
        "c",
        "A",
        channel_size=4 * SEND_CHECKPOINT_EVERY,
    )
    stack._new_incarnation()
    ch = Channel(stack, close_timeout=0.1)
    sent = 0
    with trio.fail_after(60):  # a send left waiting for room fails here, not hangs
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ch.aclose)  # runs at one of the loop's checkpoints
            with pytest.raises(ChannelClosed):
                while True:
                    await ch.send(b"x")
                    sent += 1
    assert sent in (SEND_CHECKPOINT_EVERY - 1, 2 * SEND_CHECKPOINT_EVERY - 1)
    assert ch.stats()["seqno"] == sent
    assert len(sent_down(stack)) == sent
