"""Back-pressure, cancellation and stack restarts as the channel sees them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from triogroups import (
    Channel,
    ChannelClosed,
    Message,
    Received,
    SimNetwork,
    Stack,
    StackConfig,
    open_channel,
)
from triogroups.protocols import ids
from triogroups.protocols.mcast import ACK, as_header
from triogroups.testing import wait_until

#: MFC with little credit: a sender blocks soon when a receiver stops reading.
FLOW = StackConfig.of(
    "SIM",
    "PING",
    "NAKACK2",
    "UNICAST3",
    "STABLE",
    "GMS",
    ("MFC", {"max_credits": 20_000, "max_block_time": 0.2}),
    "FRAG",
)


async def drain(ch: Channel, into: list[Received]) -> None:
    async for msg in ch:
        into.append(msg)


async def test_a_receiver_that_stops_reading_stops_the_sender_and_nothing_is_lost(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """Bounded receive queue -> the stack stops -> MFC runs out of credit -> send awaits."""
    payload = bytes(1_000)
    async with (
        open_channel("c", FLOW, "A", network=net) as a,
        open_channel("c", FLOW, "B", network=net, receive_buffer=8) as b,
        trio.open_nursery() as nursery,
    ):
        own: list[Received] = []
        nursery.start_soon(drain, a, own)
        sent = 0

        async def sender() -> None:
            nonlocal sent
            for i in range(3000):
                await a.send(i.to_bytes(4, "big") + payload)
                sent += 1

        nursery.start_soon(sender)
        await trio.sleep(30)
        assert 0 < sent < 3000, "the sender should be blocked by flow control"
        assert b.stats()["receive_queue"] == 8
        got: list[Received] = []
        with trio.fail_after(60):
            while len(got) < 3000:
                got.append(await b.receive())
        assert [int.from_bytes(m.payload[:4], "big") for m in got] == list(range(3000))
        assert sent == 3000
        nursery.cancel_scope.cancel()


async def test_a_cancelled_send_was_not_sent_and_gives_its_seqno_back(
    autojump_clock: Any,
) -> None:
    """A stack that is not running takes ``channel_size`` items, then every send waits."""
    stack = Stack(FLOW, "c", "A", channel_size=2)
    stack._new_incarnation()
    ch = Channel(stack)
    await ch.send(b"one")
    await ch.send(b"two")
    with trio.move_on_after(1) as scope:
        await ch.send(b"three")
    assert scope.cancelled_caught
    assert ch.stats()["seqno"] == 2
    with pytest.raises(trio.WouldBlock):
        ch.send_nowait(b"four")
    first = await stack._down.receiver.receive()
    assert isinstance(first, list)
    ch.send_nowait(b"five")
    queued = [first, await stack._down.receiver.receive(), await stack._down.receiver.receive()]
    seen = [(m.payload, m.headers[ids.APP_SEQNO]) for b in queued for m in b]
    assert seen == [(b"one", 1), (b"two", 2), (b"five", 3)]


async def test_sends_waiting_for_room_raise_channel_closed_when_another_task_closes(
    autojump_clock: Any, sent_down: Callable[[Stack], list[Message]]
) -> None:
    """A send waiting for room in the stack, and one waiting behind it for its turn, raise
    ChannelClosed once another task closes the channel (as a Trio channel's waiting
    senders do), give their seqnos back and put nothing into the stack; what was sent
    before stays sent, in order."""
    stack = Stack(FLOW, "c", "A", channel_size=2)
    stack._new_incarnation()
    ch = Channel(stack, close_timeout=0.1)
    await ch.send(b"one")
    await ch.send(b"two")
    outcomes: list[str] = []

    async def blocked(payload: bytes) -> None:
        try:
            await ch.send(payload)
        except ChannelClosed:
            outcomes.append(f"{payload.decode()} closed")
        else:
            outcomes.append(f"{payload.decode()} sent")

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocked, b"three")  # waits for room in the stack
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(blocked, b"four")  # waits for the send lock behind it
            await trio.testing.wait_all_tasks_blocked()
            await ch.aclose()
    assert sorted(outcomes) == ["four closed", "three closed"]
    assert ch.stats()["seqno"] == 2 and ch.stats()["sent"] == 2
    assert [m.payload for m in sent_down(stack)] == [b"one", b"two"]


def _is_mcast_ack(msg: Message) -> bool:
    hdr = as_header(msg.headers.get(ids.MCAST))
    return hdr is not None and hdr.type == ACK


#: Stacks in which member C stops B's senders for good: C never acks (MCAST's window
#: fills), or never grants credits (MFC); no failure detection, so only a graceful leave
#: takes B out of the view.
_HELD_BACK = {
    "mcast-window": (
        StackConfig.of("SIM", "PING", "DISCARD", ("MCAST", {"capacity": 8}), "UNICAST3", "GMS"),
        _is_mcast_ack,
    ),
    "mfc-credits": (
        StackConfig.of(
            "SIM", "PING", "NAKACK2", "UNICAST3", "GMS", "DISCARD", ("MFC", {"max_credits": 2000})
        ),
        lambda m: ids.MFC in m.headers,
    ),
}


@pytest.mark.parametrize("held_back", sorted(_HELD_BACK))
async def test_a_channel_whose_stack_holds_back_its_senders_still_leaves_when_it_closes(
    autojump_clock: Any, net: SimNetwork, held_back: str
) -> None:
    """B's stack holds back senders (a full MCAST window, no MFC credits) and a message
    B sent waits in the channel when B closes. The close handed it to the stack before
    the leave, so it waited for room that never came: after ``leave_timeout`` the
    channel stopped without leaving and A kept B in its view. Now the close lets what
    was sent into the stack at once and B leaves gracefully."""
    stack, never = _HELD_BACK[held_back]
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "C", network=net) as c,
        open_channel("c", stack, "B", network=net) as b,
    ):
        await wait_until(
            lambda: len(a.view.members) >= 3 and len(b.view.members) >= 3, interval=0.1
        )
        c.stack.protocol("DISCARD").drop_if(never, count=None)
        for _ in range(40):
            await b.send(b"x" * 100)
        await trio.sleep(2)
        assert b.stack.stats()["senders_blocked"]
        await b.send(b"last")
        await b.aclose()
        assert b.stats().get("leave_timeouts", 0) == 0
        await wait_until(lambda: b.address not in a.view, timeout=1, interval=0.01)


async def test_senders_that_wait_reach_the_stack_in_seqno_order(autojump_clock: Any) -> None:
    stack = Stack(FLOW, "c", "A", channel_size=1)
    stack._new_incarnation()
    ch = Channel(stack)
    async with trio.open_nursery() as nursery:
        for i in range(20):
            nursery.start_soon(ch.send, i)
        seqnos = []
        for _ in range(20):
            (msg,) = await stack._down.receiver.receive()  # type: ignore[misc]
            seqnos.append(msg.headers[ids.APP_SEQNO])
    assert seqnos == list(range(1, 21))


async def test_the_channel_rejoins_with_a_new_address_after_its_stack_restarts(
    autojump_clock: Any, net: SimNetwork
) -> None:
    stack = StackConfig.of(
        "SIM",
        "PING",
        "DISCARD",
        ("FD_ALL3", {"interval": 0.5, "timeout": 2.0}),
        ("VERIFY_SUSPECT", {"timeout": 0.5}),
        "NAKACK2",
        "UNICAST3",
        "STABLE",
        "GMS",
    )
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net) as b,
    ):
        old = b.address

        def crash(msg: Message) -> bool:
            raise RuntimeError("injected layer crash")

        b.stack.protocol("DISCARD").drop_if(crash, direction="up")
        await a.send(b"trigger")
        await wait_until(
            lambda: b.address != old and b.address in a.view and b.view == a.view, timeout=30
        )
        # the old incarnation vanished: failure detection removes it
        await wait_until(lambda: old not in a.view, timeout=30)
        assert b.stats()["rejoins"] == 1
        await a.send(b"after", to=b.address)
        with trio.fail_after(10):
            while (await b.receive()).payload != b"after":
                pass
