"""The receive queue's rules (`Inbox`): bounded with back-pressure, in order across runs,
a parked reader woken by a put, close and cancellation, fairness, and state taken only
once the reader has finished what it was handed; and the same through a channel."""

from __future__ import annotations

import functools
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import trio
import trio.testing

from triogroups import (
    Address,
    Channel,
    ChannelClosed,
    Flag,
    Message,
    Received,
    SimNetwork,
    Stack,
    StackConfig,
    open_channel,
)
from triogroups._cadence import QUEUE_CHECKPOINT_AFTER, QUEUE_CHECKPOINT_EVERY, QUEUE_CLOCK_EVERY
from triogroups._channel._inbox import Inbox, received
from triogroups._channel._state import Alignment
from triogroups._payload import encode_payload
from triogroups._rpc._dispatcher import RPC_REQ, RPC_RSP, RpcHeader
from triogroups.protocols import ids

SRC = Address.random("A")
_TAGGED = int(Flag.TAGGED)  # a channel's payload that is not bytes: tagged, decoded


def msgs(first: int, count: int) -> list[Received]:
    return [received(SRC, i, b"", False, True) for i in range(first, first + count)]


def deadline(test: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Fail a test that hangs (a reader or writer never woken) instead of waiting forever."""

    @functools.wraps(test)
    async def bounded(*args: Any, **kwargs: Any) -> None:
        with trio.fail_after(10):
            await test(*args, **kwargs)

    return bounded


async def take(inbox: Inbox) -> int:
    """What `Channel.receive` and ``async for`` do: the fast path, else `Inbox.receive`."""
    item = inbox.take_ready()
    if item is None:
        item = await inbox.receive()
    value: int = item.payload
    return value


async def yields(step: Any) -> bool:
    try:
        with trio.testing.assert_no_checkpoints():
            await step()
    except AssertionError:
        return True
    return False


@deadline
async def test_inbox_writer_waits_when_full_and_resumes_at_half_not_per_message() -> None:
    """A full queue holds the writer back; it resumes once the reader took the queue
    down to half, and then refills it in one go: one wake-up per half queue."""
    inbox = Inbox(8)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(inbox.deliver_all, msgs(0, 40))
        await trio.testing.wait_all_tasks_blocked()
        assert inbox.depth == 8 and inbox.room == 0
        assert not inbox.offer(msgs(99, 1)[0])
        for taken in range(1, 5):
            assert await take(inbox) == taken - 1
            await trio.testing.wait_all_tasks_blocked()
            assert inbox.depth == 8 - taken, "the writer woke before the queue was down to half"
        assert await take(inbox) == 4
        await trio.testing.wait_all_tasks_blocked()
        assert inbox.depth == 8, "the writer did not refill the queue"
        for taken in range(1, 5):  # receive_nowait, too, wakes the writer at half
            assert inbox.receive_nowait().payload == 4 + taken
            await trio.testing.wait_all_tasks_blocked()
            assert inbox.depth == (8 if taken == 4 else 8 - taken)
        assert [await take(inbox) for _ in range(31)] == list(range(9, 40))
        assert inbox.depth == 0


@pytest.mark.parametrize("size", [1, 2, 3, 64])
@deadline
async def test_inbox_keeps_order_across_runs_and_waits(size: int) -> None:
    """Runs put at once (`put_nowait`) and runs that wait for room (`deliver_all`) reach
    a reader (one message at a time or in batches) in the order they were put, each
    once, whatever the queue's size (1 included: a full queue of one still moves)."""
    inbox = Inbox(size)
    rng = random.Random(size)
    total = 600
    got: list[int] = []

    async def write() -> None:
        sent = 0
        while sent < total:
            count = min(rng.randint(1, 70), total - sent)
            run = msgs(sent, count)
            if count <= inbox.room and rng.random() < 0.5:
                inbox.put_nowait(run)
            else:
                await inbox.deliver_all(run)
            sent += count
            if rng.random() < 0.3:
                await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        with trio.fail_after(10):
            while len(got) < total:
                if rng.random() < 0.3:
                    got.extend(m.payload for m in await inbox.receive_batch(rng.randint(1, 9)))
                else:
                    got.append(await take(inbox))
                if rng.random() < 0.3:  # the application's own work: the writer fills up
                    await trio.sleep(0)
    assert got == list(range(total))


@deadline
async def test_inbox_put_wakes_a_parked_reader() -> None:
    inbox = Inbox(8)
    got: list[int] = []
    batches: list[list[int]] = []
    async with trio.open_nursery() as nursery:

        async def read() -> None:
            got.append(await take(inbox))
            batches.append([m.payload for m in await inbox.receive_batch(10)])

        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        assert not got
        inbox.put_nowait(msgs(0, 1))
        await trio.testing.wait_all_tasks_blocked()
        assert got == [0] and not batches
        inbox.put_nowait(msgs(1, 3))
    assert batches == [[1, 2, 3]]


@deadline
async def test_inbox_close_wakes_a_waiting_reader_and_writer_and_counts_the_dropped() -> None:
    """Close: a waiting receive raises ChannelClosed, a writer waiting for room returns,
    and every message not read (queued, or still with the writer) counts as dropped."""
    inbox = Inbox(4)
    outcome: list[str] = []

    async def read() -> None:
        try:
            await inbox.receive()
        except ChannelClosed:
            outcome.append("reader closed")

    async def write() -> None:
        await inbox.deliver_all(msgs(0, 10))
        outcome.append("writer returned")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        inbox.close()
    assert outcome == ["reader closed"]
    inbox = Inbox(4)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        await trio.testing.wait_all_tasks_blocked()
        assert inbox.depth == 4
        inbox.close()
    assert outcome == ["reader closed", "writer returned"]
    assert inbox.dropped == 10 and inbox.depth == 0
    with pytest.raises(ChannelClosed):
        await take(inbox)
    with pytest.raises(ChannelClosed):
        inbox.receive_nowait()
    inbox.put_nowait(msgs(10, 2))
    assert inbox.dropped == 12


@deadline
async def test_inbox_cancelled_reader_takes_nothing_and_the_next_gets_everything(
    autojump_clock: Any,
) -> None:
    """Cancelled while it waits for a message, or at its periodic checkpoint, a receive
    took nothing: the next one gets the message it would have had."""
    inbox = Inbox(8)
    with trio.move_on_after(1) as scope:
        await take(inbox)
    assert scope.cancelled_caught
    inbox.put_nowait(msgs(0, 2))
    assert [await take(inbox), await take(inbox)] == [0, 1]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(take, inbox)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    inbox.put_nowait(msgs(2, 1))
    assert inbox.receive_nowait().payload == 2
    inbox = Inbox(2 * QUEUE_CHECKPOINT_EVERY)
    inbox.put_nowait(msgs(0, 2 * QUEUE_CHECKPOINT_EVERY))
    with trio.CancelScope() as scope:
        scope.cancel()
        while True:  # returns queued messages until its checkpoint is due, then is cancelled
            await take(inbox)
    assert scope.cancelled_caught
    assert await take(inbox) == QUEUE_CHECKPOINT_EVERY


@deadline
async def test_inbox_reader_that_always_finds_messages_checkpoints_every_queue_checkpoint(
    mock_clock: Any,
) -> None:
    """Taking queued messages does not yield, except once every `QUEUE_CHECKPOINT_EVERY`
    (so the reader stays fair and cancellable); batches count every message they take.
    The clock stands still here: only the count makes a checkpoint due."""
    calls = 4 * QUEUE_CHECKPOINT_EVERY
    inbox = Inbox(calls)
    inbox.put_nowait(msgs(0, calls))
    at = [i for i in range(calls) if await yields(lambda: take(inbox))]
    assert at == [QUEUE_CHECKPOINT_EVERY * k for k in (1, 2, 3)]
    inbox = Inbox(calls)
    inbox.put_nowait(msgs(0, calls))
    batch = 10
    batched = [await yields(lambda: inbox.receive_batch(batch)) for _ in range(calls // batch)]
    assert (
        calls // (QUEUE_CHECKPOINT_EVERY + batch) <= sum(batched) <= calls // QUEUE_CHECKPOINT_EVERY
    )
    with trio.CancelScope() as scope:
        scope.cancel()
        while True:
            await inbox.receive_batch(batch)
            inbox.put_nowait(msgs(0, batch))
    assert scope.cancelled_caught


@deadline
async def test_inbox_reader_with_a_slow_handler_checkpoints_after_queue_checkpoint_after(
    mock_clock: Any,
) -> None:
    """A reader whose handler takes 1 ms a message yields once `QUEUE_CHECKPOINT_AFTER`
    has passed, each time it asks the clock (every `QUEUE_CLOCK_EVERY` messages), not only
    every `QUEUE_CHECKPOINT_EVERY`: its process's other tasks wait at most ~0.13 s, not
    ~1 s. The clock starts at the reader's first visit, so the first interval is two."""
    step = 0.001
    assert QUEUE_CLOCK_EVERY * step >= QUEUE_CHECKPOINT_AFTER
    calls = 1000
    inbox = Inbox(calls)
    inbox.put_nowait(msgs(0, calls))
    at = []
    for i in range(calls):
        if await yields(lambda: take(inbox)):
            at.append(i)
        mock_clock.jump(step)  # the handler's millisecond
    period = QUEUE_CLOCK_EVERY + 1  # taken without a call, and the one `receive` returns
    assert at == list(range(2 * QUEUE_CLOCK_EVERY + 1, calls, period))
    # a fast handler: the clock is asked as often, and the count decides
    inbox = Inbox(calls)
    inbox.put_nowait(msgs(0, calls))
    at = [i for i in range(calls) if await yields(lambda: take(inbox))]
    assert at == []  # fewer than QUEUE_CHECKPOINT_EVERY, and no time passed
    assert calls < QUEUE_CHECKPOINT_EVERY


@deadline
async def test_inbox_snapshot_waits_until_the_reader_finished_everything_handed_over() -> None:
    """State is taken only once the reader is back in receive with nothing left: not
    while it holds a message, nor while messages are queued."""
    inbox = Inbox(8)
    inbox.put_nowait(msgs(0, 3))
    taken: list[int] = []

    async def state() -> str:
        taken.append(inbox.depth)
        return "state"

    async def snapshot() -> None:
        assert await inbox.snapshot(state) == "state"

    async with trio.open_nursery() as nursery:
        assert await take(inbox) == 0
        nursery.start_soon(snapshot)
        for expect in (1, 2):
            await trio.testing.wait_all_tasks_blocked()
            assert not taken
            assert await take(inbox) == expect
        await trio.testing.wait_all_tasks_blocked()
        assert not taken, "state taken while the reader still held the last message"
        nursery.start_soon(take, inbox)  # back in receive: finished
        await trio.testing.wait_all_tasks_blocked()
        assert taken == [0]
        inbox.put_nowait(msgs(3, 1))


def _accept_plain(align: Alignment, src: Address, seqno: int) -> bool:
    """`Alignment.accept` as it reads without its fast path."""
    if seqno <= align.floor.get(src, 0):
        return False
    last = align.delivered.get(src)
    if last is not None and seqno > last + 1:
        align.gaps += 1
    if last is None or seqno > last:
        align.delivered[src] = seqno
    return True


def _seqnos(rng: random.Random, senders: list[Address]) -> Iterator[tuple[Address, int]]:
    nxt = dict.fromkeys(senders, 1)
    for _ in range(400):
        src = rng.choice(senders)
        step = rng.choice((1, 1, 1, 2, 0, -1))
        yield src, max(1, nxt[src] + step - 1)
        nxt[src] = max(1, nxt[src] + step)


@pytest.mark.parametrize("seed", range(5))
def test_alignment_accept_equals_the_plain_rule(seed: int) -> None:
    """The fast path for a sender's next seqno decides and records as the plain rule
    does, with a floor from an installed state, gaps and repeats in between."""
    rng = random.Random(seed)
    senders = [Address.random(n) for n in "ABC"]
    fast, plain = Alignment(), Alignment()
    for step, (src, seqno) in enumerate(_seqnos(rng, senders)):
        if step == 150:
            applied = [(s, rng.randint(0, 30)) for s in senders[:2]]
            fast.install(applied)
            plain.install(applied)
        assert fast.accept(src, seqno) == _accept_plain(plain, src, seqno), (step, src, seqno)
        assert (fast.delivered, fast.gaps) == (plain.delivered, plain.gaps)


def _runs(rng: random.Random, senders: list[Address]) -> Iterator[tuple[Address, int]]:
    """`_seqnos` in runs: a sender's messages come several in a row, as in a batch."""
    seqnos = _seqnos(rng, senders)
    nxt = dict.fromkeys(senders, 1)
    for _ in range(60):
        src = rng.choice(senders)
        for _ in range(rng.randint(1, 8)):
            seqno = max(1, nxt[src] + rng.choice((0, 0, 0, 0, 1, -1)))
            yield src, seqno
            nxt[src] = seqno + 1
        yield next(seqnos)


@pytest.mark.parametrize("seed", range(8))
async def test_ready_run_aligns_each_message_as_accept_would(seed: int, stack: StackConfig) -> None:
    """`Channel._ready_run` accepts a run of one sender's next seqnos without a table
    write per message: what it hands over, drops as contained, and leaves in the table
    (with gaps) equals `Alignment.accept` message by message, with runs cut by other
    senders, repeats, gaps, messages without a state header, a stopper (an RPC request)
    and a state installed between batches."""
    rng = random.Random(seed)
    senders = [Address.random(n) for n in "ABC"]
    host = Stack(stack, "c", "Z")
    host._new_incarnation()
    ch = Channel(host)
    plain = Alignment()
    request = Message(
        None, encode_payload([1]), src=senders[0], headers={ids.RPC: RpcHeader(RPC_REQ, 5, "f")}
    )
    items = list(_runs(rng, senders))
    for first in range(0, len(items), 50):
        if first == 250:
            applied = [(s, rng.randint(0, 30)) for s in senders[:2]]
            ch._align.install(applied)
            plain.install(applied)
        batch: list[Message | Received] = []
        expected: list[tuple[Address, Any]] = []
        for k, (src, seqno) in enumerate(items[first : first + 50]):
            if rng.random() < 0.1:  # no state header: a unicast, not aligned
                batch.append(Message(Address.random("Z"), b"u", src=src))
                expected.append((src, b"u"))
                continue
            headers = {ids.APP_SEQNO: seqno}
            if rng.random() < 0.3:  # a value, tagged: decoded
                value: Any = k
                batch.append(
                    Message(None, encode_payload(k), src=src, flags=_TAGGED, headers=headers)
                )
            else:  # bytes, untagged: handed over as they are
                value = bytes([k])
                batch.append(Message(None, value, src=src, headers=headers))
            if _accept_plain(plain, src, seqno):
                expected.append((src, value))
        stop = rng.randrange(len(batch) + 1)
        batch.insert(stop, request)
        out: list[Received] = []
        i = 0
        while i < len(batch):
            i = ch._ready_run(batch, i, out, len(batch))
            if i < len(batch):
                assert batch[i] is request
                i += 1
        assert [(r.src, r.payload) for r in out] == expected
        assert (ch._align.delivered, ch._align.gaps) == (plain.delivered, plain.gaps)


async def test_channel_with_a_receive_buffer_of_one_delivers_everything_in_order(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """The smallest queue: the dispatcher waits for room after every message, and the
    reader wakes it; nothing is lost, doubled or reordered, with ``async for`` and with
    batches."""
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net, receive_buffer=1) as b,
    ):
        await a.send_many(list(range(300)))
        got: list[Any] = []
        with trio.fail_after(60):
            async for msg in b:
                got.append(msg.payload)
                if len(got) == 150:
                    break
            while len(got) < 300:
                got.extend(m.payload for m in await b.receive_batch(7))
        assert got == list(range(300))
        assert b.stats()["delivered"] == 300 and b.stats()["receive_queue"] == 0


async def test_reader_hands_runs_to_the_queue_answers_responses_between_and_leaves_requests(
    stack: StackConfig,
) -> None:
    """One batch from the stack mixing kinds: plain multicasts go to the receive queue in
    order, an RPC answer between them is handled on the spot (here a stale one, counted),
    and from the first RPC request on everything is left to the dispatcher, in order."""
    host = Stack(stack, "c", "A")
    host._new_incarnation()
    ch = Channel(host)
    src = Address.random("B")

    def app(value: int) -> Message:
        headers = {ids.APP_SEQNO: value + 1}
        return Message(None, encode_payload(value), src=src, flags=_TAGGED, headers=headers)

    answer = Message(None, encode_payload(1), src=src, headers={ids.RPC: RpcHeader(RPC_RSP, 99)})
    request = Message(
        None, encode_payload([1]), src=src, headers={ids.RPC: RpcHeader(RPC_REQ, 5, "echo")}
    )
    batch = [app(0), app(1), answer, app(2), request, app(3)]
    assert ch._hand_over(batch) == [request, batch[-1]]
    assert [ch.receive_nowait().payload for _ in range(3)] == [0, 1, 2]
    assert ch.rpc.stats()["responses_stale"] == 1
    assert ch.stats()["direct"] == 3 and ch.stats()["delivered"] == 3
