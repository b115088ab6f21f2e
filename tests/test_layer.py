"""The layer host: how a layer forwards what its protocol emits, in both directions."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from triogroups import Address, Message
from triogroups._layer import Inlet, LayerActor
from triogroups.extend import Protocol

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
    """Past _MAX_CROSS_BACKLOG waiting acks the up loop waits too: memory stays bounded
    when the layer below never makes room."""
    monkeypatch.setattr("triogroups._layer._MAX_CROSS_BACKLOG", 10)
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
