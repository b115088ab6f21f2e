"""The layer host: how a layer forwards what its protocol emits, in both directions."""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import pytest
import trio

from triogroups import Address, Message
from triogroups._layer import MAX_QUEUED_MESSAGES, Inlet, LayerActor
from triogroups._layer._ways import MAX_CROSS_BACKLOG, Outbox, ready
from triogroups.events import Unsuspect
from triogroups.extend import Protocol
from triogroups.protocols.passthrough import PassThrough

_PEER = Address(0xB, "B")


class _Acker(Protocol):
    """Passes every batch up and answers each with one ack going down (as UNICAST3 does)."""

    name = "TEST_ACKER"

    def up(self, batch: list[Message], now: float) -> None:
        self.send_up(batch)
        self.send_down([Message(_PEER, b"ack")])


def _layer(protocol: Protocol, size: int) -> tuple[LayerActor, dict[str, Any]]:
    down_in, up_in, down_out, up_out = (Inlet(size) for _ in range(4))
    layer = LayerActor(protocol, down_in, up_in, down_out, up_out, lambda _l, _b: None)
    ends = {"from_above": down_in, "from_below": up_in, "to_below": down_out.receiver}
    ends["to_above"] = up_out.receiver
    return layer, ends


async def test_an_up_loop_is_not_held_up_by_a_full_channel_below(autojump_clock: Any) -> None:
    """Acks emitted while handling up traffic wait in the down outbox; the up loop
    keeps delivering. Awaiting them would deadlock two members over TCP, each
    one's reader waiting for its own writer, which waits for the other's reader."""
    acker = _Acker()
    acker.start(Address(0xA, "A"), "c", 0.0)
    layer, ends = _layer(acker, size=2)
    mailbox_s, mailbox_r = trio.open_memory_channel[Any](0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(layer.run, mailbox_r)
        with trio.fail_after(5):
            for i in range(50):  # nobody reads "to_below": it is full after two acks
                await ends["from_below"].send([Message(None, str(i).encode(), src=_PEER)])
                got = await ends["to_above"].receive()
                assert [m.payload for m in got] == [str(i).encode()]
        acks: list[Message] = []
        with trio.fail_after(5):
            while len(acks) < 50:  # the stuck acks then leave, all and in order
                acks.extend(await ends["to_below"].receive())
        assert [m.payload for m in acks] == [b"ack"] * 50
        nursery.cancel_scope.cancel()
    mailbox_s.close()


async def test_the_other_directions_backlog_is_bounded(
    monkeypatch: Any, autojump_clock: Any
) -> None:
    """Past MAX_CROSS_BACKLOG waiting acks the up loop waits too: memory stays bounded
    when the layer below never makes room."""
    monkeypatch.setattr("triogroups._layer._ways.MAX_CROSS_BACKLOG", 10)
    acker = _Acker()
    acker.start(Address(0xA, "A"), "c", 0.0)
    layer, ends = _layer(acker, size=2)
    mailbox_s, mailbox_r = trio.open_memory_channel[Any](0)
    delivered = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(layer.run, mailbox_r)

        async def read_above() -> None:
            nonlocal delivered
            async for batch in ends["to_above"]:
                delivered += len(batch)

        nursery.start_soon(read_above)
        for i in range(40):
            with trio.move_on_after(0.1):
                await ends["from_below"].send([Message(None, str(i).encode(), src=_PEER)])
        await trio.sleep(0.5)
        assert delivered < 40  # the up loop stopped taking...
        assert layer._down_out.backlog() == 11  # ...once more than 10 acks waited below
        nursery.cancel_scope.cancel()
    mailbox_s.close()


class _StuckTimer(Protocol):
    """A tick that forgets to move its deadline (the GMS bundling bug found by the
    membership property tests)."""

    name = "TEST_STUCK_TIMER"

    def next_deadline(self) -> float:
        return 1.0


async def test_a_tick_that_leaves_its_deadline_due_crashes_the_layer(autojump_clock: Any) -> None:
    """Ticking again at once would spin forever at one (virtual) time: the host fails
    loudly instead, naming the protocol, and the stack's supervisor takes over."""
    stuck = _StuckTimer()
    stuck.start(Address(0xA, "A"), "c", 0.0)
    layer, _ends = _layer(stuck, size=2)
    _mailbox_s, mailbox_r = trio.open_memory_channel[Any](0)
    with trio.fail_after(5), pytest.raises(RuntimeError, match=r"TEST_STUCK_TIMER\.tick must"):
        await layer.run(mailbox_r)
    assert trio.current_time() == 1.0 and layer.ticks == 1


def _batch(n: int) -> list[Message]:
    return [Message(None, b"m", src=_PEER) for _ in range(n)]


def test_an_up_inbox_is_bounded_in_messages_not_only_in_batches() -> None:
    """A batch is one item however many messages it holds: bounded in items alone, the
    inboxes above a reliability layer held tens of thousands of messages it had already
    acked (bench_channel, udp-mcast: RSS rose with each new high-water mark). Past
    MAX_QUEUED_MESSAGES the producer is refused; an empty inbox takes any batch; the
    way down (its flow control waits at the top) keeps its bound in items."""
    _, ends = _layer(PassThrough(), size=16)  # not running: every item waits in the inbox
    up = ends["from_below"]
    big = MAX_QUEUED_MESSAGES + 500
    up.send_nowait(_batch(big))  # into an empty inbox
    with pytest.raises(trio.WouldBlock):
        up.send_nowait(_batch(1))
    assert up.queued == 1 and up.messages == big
    down = ends["from_above"]
    for _ in range(3):
        down.send_nowait(_batch(big))
    assert down.buffered() == 3


async def test_a_batch_larger_than_the_bound_goes_in_once_the_inbox_is_empty(
    autojump_clock: Any,
) -> None:
    """A producer with a batch above MAX_QUEUED_MESSAGES waits for an empty inbox; the
    layer taking the last item, here an event, must wake it (a lost wake-up stalled a
    udp-mcast member for good: senders blocked, the member suspected)."""
    layer, ends = _layer(PassThrough(), size=16)
    up = ends["from_below"]
    up.send_nowait(Unsuspect(_PEER))
    big = _batch(MAX_QUEUED_MESSAGES + 1)
    mailbox_s, mailbox_r = trio.open_memory_channel[Any](0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(up.send, big)
        await trio.sleep(1)
        assert up.queued == 1  # still waiting: the event fills the inbox for it
        nursery.start_soon(layer.run, mailbox_r)
        with trio.fail_after(5):
            assert await ends["to_above"].receive() == Unsuspect(_PEER)
            assert len(await ends["to_above"].receive()) == len(big)
        nursery.cancel_scope.cancel()
    mailbox_s.close()


async def test_every_way_into_a_layer_asks_the_one_readiness_rule(autojump_clock: Any) -> None:
    """Issue 40 item 3: `ready` is the one copy of "may this layer run its handler in the
    caller's task now" (it was written out three times: `Inlet._ready`, `offer_inline`,
    `_Outbox.put`). Each of its conditions alone makes an item wait in the inbox, and an
    item offered while the layer is ready runs through it inline."""
    layer, ends = _layer(PassThrough(), size=16)
    up: Inlet = ends["from_below"]
    assert not ready(layer, up)  # not running
    layer.ready = True
    assert ready(layer, up)
    up.send_nowait(_batch(1))  # ran inline: passed on above at once
    assert up.queued == 0 and ends["to_above"].receive_nowait()
    same, other = layer._up_out, layer._down_out
    for block, unblock in (
        (lambda: same._rest.append([]), same._rest.clear),
        (lambda: other._rest.extend([[]] * (MAX_CROSS_BACKLOG + 1)), other._rest.clear),
        (lambda: setattr(layer, "ready", False), lambda: setattr(layer, "ready", True)),
    ):
        block()
        assert not ready(layer, up)
        up.send_nowait(_batch(1))  # waits in the inbox for the layer's loop
        assert up.queued == 1
        assert not ready(layer, up)  # something waits in the inbox: not ready either
        up.took(up.receiver.receive_nowait())
        unblock()
        assert ready(layer, up)
    other._rest.extend([[]] * MAX_CROSS_BACKLOG)  # at the bound: still ready
    assert ready(layer, up)


def test_the_hop_path_spells_out_ready_exactly() -> None:
    """`Outbox.put`, the path of every hop, writes `ready`'s expression out instead of calling
    it (53 calls per RPC round trip); it must stay the same expression, names aside."""
    ready_src = textwrap.dedent(inspect.getsource(ready))
    returned = [n for n in ast.walk(ast.parse(ready_src)) if isinstance(n, ast.Return)]
    assert len(returned) == 1 and returned[0].value is not None
    plain = ast.dump(returned[0].value).replace("'inlet'", "'out'")
    put_src = textwrap.dedent(inspect.getsource(Outbox.put))
    spelt = [
        ast.dump(n.test.operand)
        for n in ast.walk(ast.parse(put_src))
        if isinstance(n, ast.If)
        and isinstance(n.test, ast.UnaryOp)
        and isinstance(n.test.op, ast.Not)
        and isinstance(n.test.operand, ast.BoolOp)
    ]
    assert spelt == [plain]
