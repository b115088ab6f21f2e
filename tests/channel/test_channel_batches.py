"""Batches end to end at the channel: `send_many`, `receive_batch`/`batches`, and an
``async for`` that drains what is ready without a scheduler pass per message."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from triogroups import Address, Message, Received, SimNetwork, StackConfig, open_channel
from triogroups._channel._inbox import RECEIVE_BUFFER, received
from triogroups.protocols import ids
from triogroups.testing import wait_until


async def _wait_queued(ch: Any, n: int) -> None:
    await wait_until(lambda: ch.stats()["receive_queue"] >= n, timeout=30, interval=0.01)


async def test_send_many_sends_every_payload_in_order_as_one_batch(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """100 payloads go down the stack as one batch (one handler call in the top layer)
    and reach every member, the sender included, in order and each once."""
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net) as b,
    ):
        top = a.stack.stats()["layers"][-1]["host"]
        await a.send_many(list(range(100)))
        with trio.fail_after(5):
            while (after := a.stack.stats()["layers"][-1]["host"])["msgs_down"] == top["msgs_down"]:
                await trio.sleep(0.001)
        assert after["msgs_down"] - top["msgs_down"] == 100
        assert after["batches_down"] - top["batches_down"] == 1
        for ch in (a, b):
            got: list[Any] = []
            with trio.fail_after(30):
                while len(got) < 100:
                    got.extend(m.payload for m in await ch.receive_batch())
            assert got == list(range(100))
        assert a.stats()["sent"] == 100 and a.stats()["seqno"] == 100


async def test_send_many_checks_every_payload_before_sending_any(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with open_channel("c", stack, "A", network=net) as a:
        with pytest.raises(TypeError):
            await a.send_many([1, 2, object()])
        await a.send_many([])
        assert a.stats().get("sent", 0) == 0 and a.stats()["seqno"] == 0
        await a.send_many([b"x"])
        assert [m.payload for m in await a.receive_batch()] == [b"x"]


async def test_receive_batch_hands_over_everything_ready_up_to_max_messages(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with open_channel("c", stack, "A", network=net) as a:
        for i in range(50):
            await a.send(i)
        await _wait_queued(a, 50)
        first = await a.receive_batch(max_messages=20)
        rest = await a.receive_batch()
        assert [m.payload for m in first] == list(range(20))
        assert [m.payload for m in rest] == list(range(20, 50))
        with pytest.raises(ValueError, match="max_messages must be >= 1, got 0"):
            await a.receive_batch(0)


async def test_batches_yields_until_the_channel_closes(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with open_channel("c", stack, "A", network=net) as a:
        await a.send_many([1, 2, 3])
        await _wait_queued(a, 3)
        seen: list[list[Any]] = []
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                async for batch in a.batches():
                    seen.append([m.payload for m in batch])

            nursery.start_soon(read)
            await wait_until(lambda: seen, timeout=5, interval=0.01)
            await a.aclose()
        assert seen == [[1, 2, 3]]


async def test_async_for_takes_ready_messages_without_a_scheduler_pass_each(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Messages already in the receive queue are handed over without a checkpoint each
    (one every 64 keeps the reader fair and cancellable)."""
    async with open_channel("c", stack, "A", network=net) as a:
        await a.send_many(list(range(60)))
        await _wait_queued(a, 60)
        got = [(await a.receive()).payload]
        with trio.testing.assert_no_checkpoints():
            async for msg in a:
                got.append(msg.payload)
                if len(got) == 60:
                    break
        assert got == list(range(60))


def test_received_factory_equals_the_plain_constructor() -> None:
    """`received` (the speed trick every delivery uses) builds the same immutable record as
    ``Received(...)``, with every field set."""
    src = Address.random("A")
    fast = received(src, [1, "x"], b"raw", True, False)
    assert fast == Received(src, [1, "x"], b"raw", True, False)
    assert type(fast) is Received
    assert [getattr(fast, name) for name in Received._fields] == [
        src,
        [1, "x"],
        b"raw",
        True,
        False,
    ]
    with pytest.raises(AttributeError):
        fast.oob = False  # type: ignore[misc]


async def test_send_builds_in_line_the_message_the_general_path_builds(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """`Channel.send` builds an ordered multicast of bytes numbered, in one step
    (`_send_loop.multicast`, compiled where built): every `Message` slot is set, and it
    equals what `_app_message` and `_stamp_all` make (a slot added to Message and
    forgotten there fails here)."""
    async with open_channel("c", stack, "A", network=net) as a:
        await a.send(b"in line")  # left in the channel until this task yields
        (fast,) = a._outgoing
        assert type(fast) is Message and fast.payload == b"in line"
        general = a._app_message(b"in line", None, False, False)
        assert a._stamp_all([general]) == 1
        slots = Message.__slots__
        assert [getattr(fast, n) for n in slots if n != "headers"] == [
            getattr(general, n) for n in slots if n != "headers"
        ]
        assert fast.headers == {ids.APP_SEQNO: 1}
        assert general.headers == {ids.APP_SEQNO: 2}


async def test_reader_hands_plain_messages_to_the_queue_while_the_dispatcher_is_idle(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """With nothing pending at the dispatcher, multicasts reach the receive queue from the
    reader's task (counted in ``direct``), in order and each once."""
    async with open_channel("c", stack, "A", network=net) as a:
        await a.send_many(list(range(40)))
        await _wait_queued(a, 40)
        assert [m.payload for m in await a.receive_batch()] == list(range(40))
        assert a.stats()["direct"] == 40 and a.stats()["delivered"] == 40


async def test_a_burst_of_thousands_the_application_has_not_read_yet_skips_the_dispatcher(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """The default receive queue takes a burst of several thousand messages that arrive
    before the application reads: every one goes to the queue from the reader's task
    (``direct``), none through the dispatcher. With a queue of 256 (the old default) all
    but the first 256 took the dispatcher's hop, what made a full-speed member ~15% slower."""
    burst = 3000
    assert burst < RECEIVE_BUFFER
    async with open_channel("c", stack, "A", network=net) as a:
        for start in range(0, burst, 500):
            await a.send_many(list(range(start, start + 500)))
        await _wait_queued(a, burst)
        got = [m.payload for m in await a.receive_batch(max_messages=burst)]
        assert got == list(range(burst))
        assert a.stats()["direct"] == burst and a.stats()["delivered"] == burst


async def test_order_holds_when_the_queue_fills_and_rpc_requests_come_between(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """A receive queue of 2 that fills, and RPC requests that take the dispatcher's path
    between multicasts: every multicast still arrives once and in send order."""
    calls: list[int] = []
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel(
            "c", stack, "B", network=net, receive_buffer=2, handlers={"note": calls.append}
        ) as b,
    ):
        peer = b.address

        async def send() -> None:
            for i in range(60):
                await a.send(i)
                if i % 7 == 0:
                    await a.rpc.call_one("note", i, to=peer)

        got: list[Any] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            with trio.fail_after(60):
                while len(got) < 60:
                    got.append((await b.receive()).payload)
                    await trio.sleep(0.001)
        assert got == list(range(60))
        assert calls == list(range(0, 60, 7))
