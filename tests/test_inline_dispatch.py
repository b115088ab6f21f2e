"""Run to completion through idle layers: a neighbour runs a ready layer's handler inline.

The layer host's rules (see `triogroups._layer`): a handler runs in the caller's task only
when the layer is running, not inside a handler, has nothing waiting in that direction's
inbox and its outboxes have room; otherwise the item goes through the bounded channel.
"""

from __future__ import annotations

import math
from typing import Any

import trio
import trio.testing

from triogroups import Address, Message, Stack, StackConfig, open_channel
from triogroups._layer import Inlet, LayerActor, after_chain
from triogroups.events import Item, Suspect
from triogroups.extend import Protocol
from triogroups.testing import wait_until
from triogroups.transports.sim import open_sim_network

_A = Address(0xA, "A")
_B = Address(0xB, "B")


class _Bounce(Protocol):
    """Passes batches up followed by an event; a b"reply" going down is looped back up
    as b"looped" (as a transport's loopback does)."""

    name = "TEST_BOUNCE"

    def up(self, batch: list[Message], now: float) -> None:
        self.send_up(batch)
        self.pass_up(Suspect((_B,)))

    def down(self, batch: list[Message], now: float) -> None:
        for msg in batch:
            if msg.payload == b"reply":
                self.send_up_one(Message(None, b"looped", src=_A))


class _TickingBounce(_Bounce):
    """As TEST_BOUNCE, and its one tick (at 1 s) emits a batch and an event up."""

    name = "TEST_TICKING_BOUNCE"

    def __init__(self, **props: Any) -> None:
        super().__init__(**props)
        self._next = 1.0

    def tick(self, now: float) -> None:
        self._next = math.inf
        self.up([Message(None, b"tick", src=_A)], now)

    def next_deadline(self) -> float:
        return self._next


class _Reply(Protocol):
    """Passes every batch up and answers each message with a b"reply" going down."""

    name = "TEST_REPLY"

    def up(self, batch: list[Message], now: float) -> None:
        self.send_up(batch)
        for msg in batch:
            if msg.payload != b"looped":
                self.send_down_one(Message(_B, b"reply"))


class _UpCrasher(Protocol):
    """Raises when a message with payload b"boom" comes up."""

    name = "TEST_UP_CRASHER"

    def up(self, batch: list[Message], now: float) -> None:
        if any(m.payload == b"boom" for m in batch):
            raise RuntimeError("up crasher was told to crash")
        self.send_up(batch)


class _DownCrasher(Protocol):
    """Raises when a multicast with payload b"boom" goes down."""

    name = "TEST_DOWN_CRASHER"

    def down(self, batch: list[Message], now: float) -> None:
        if any(m.payload == b"boom" and m.dest is None for m in batch):
            raise RuntimeError("down crasher was told to crash")
        self.send_down(batch)


class _Mirror(Protocol):
    """Sends every batch that comes down back up as b"echo" (and nothing further down)."""

    name = "TEST_MIRROR"

    def down(self, batch: list[Message], now: float) -> None:
        self.send_up([Message(None, b"echo", src=_A) for _ in batch])


class _Relay(Protocol):
    """Passes everything on, with handlers of its own (no promise the host could use to
    go past it without calling them: it is busy while it forwards)."""

    name = "TEST_RELAY"

    def up(self, batch: list[Message], now: float) -> None:
        self.send_up(batch)

    def down(self, batch: list[Message], now: float) -> None:
        self.send_down(batch)


class _Tagger(Protocol):
    """Keeps the base class's `down` but appends b"!" to every payload it sends down."""

    name = "TEST_TAGGER"

    def send_down(self, batch: list[Message]) -> None:
        super().send_down([Message(m.dest, m.payload + b"!") for m in batch])


class _Greeter(Protocol):
    """Keeps the base class's `down`, and emits b"hello" down when it starts."""

    name = "TEST_GREETER"

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self.send_down_one(Message(_B, b"hello"))


def _chain(protocols: list[Protocol], size: int) -> tuple[list[LayerActor], Inlet, Inlet, Inlet]:
    """Layers bottom to top joined by inlets: (layers, into the bottom from below,
    out of the top, out of the bottom)."""
    for proto in protocols:
        proto.start(_A, "c", 0.0)
    ups = [Inlet(size) for _ in range(len(protocols) + 1)]
    downs = [Inlet(size) for _ in range(len(protocols) + 1)]
    layers = [
        LayerActor(proto, downs[i + 1], ups[i], downs[i], ups[i + 1], lambda _l, _b: None)
        for i, proto in enumerate(protocols)
    ]
    return layers, ups[0], ups[-1], downs[0]


async def _run(nursery: trio.Nursery, layers: list[LayerActor]) -> None:
    for layer in layers:
        _mailbox_s, mailbox_r = trio.open_memory_channel[Any](0)
        nursery.start_soon(layer.run, mailbox_r)
    await trio.testing.wait_all_tasks_blocked()


def _payloads(items: list[Item]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, list):
            out.extend(m.payload for m in item)
        else:
            out.append(item)
    return out


async def test_inline_dispatch_keeps_per_direction_order_under_mixed_backlog(
    autojump_clock: Any,
) -> None:
    """Batches and events sent up through three idle layers run inline until the top's
    channel is full; then the top layer backs up, later items queue in the inboxes, and
    the layers' own loops take them, so the producer blocks. Once the reader drains
    the top, everything arrives in send order, events in their place, and both paths
    were used."""
    layers, bottom, top, _below = _chain([Protocol(), Protocol(), Protocol()], size=2)
    sent: list[Item] = []
    for i in range(60):
        sent.append(Suspect((_B,)) if i % 7 == 3 else [Message(None, str(i).encode(), src=_B)])
    expected = _payloads(sent)
    async with trio.open_nursery() as nursery:
        await _run(nursery, layers)
        done = 0

        async def produce() -> None:
            nonlocal done
            for item in sent:
                await bottom.send(item)
                done += 1

        nursery.start_soon(produce)
        await trio.sleep(1)
        assert done < len(sent)  # nobody reads the top: the producer is held back
        assert all(layer.inline for layer in layers)
        got: list[Item] = []
        with trio.fail_after(5):
            while len(_payloads(got)) < len(expected):
                got.append(await top.receiver.receive())
        assert _payloads(got) == expected
        assert any(layer.stats()["msgs_up"] + layer.events > layer.inline for layer in layers)
        nursery.cancel_scope.cancel()


async def test_a_layer_is_not_reentered_by_what_its_own_output_causes(
    autojump_clock: Any,
) -> None:
    """TEST_BOUNCE emits a batch and an event up. The batch runs inline in TEST_REPLY,
    whose reply runs back down into TEST_BOUNCE while it is still forwarding, and
    comes back up as b"looped": handled there, it would overtake the event. It waits
    in TEST_BOUNCE's inbox instead, so the layer above sees the batch, the event, then
    the looped reply."""
    layers, bottom, top, _below = _chain([_Bounce(), _Reply(), Protocol()], size=8)
    async with trio.open_nursery() as nursery:
        await _run(nursery, layers)
        bottom.send_nowait([Message(None, b"m1", src=_B)])
        got: list[Item] = []
        with trio.fail_after(5):
            while len(_payloads(got)) < 3:
                got.append(await top.receiver.receive())
        assert _payloads(got) == [b"m1", Suspect((_B,)), b"looped"]
        assert [layer.inline for layer in layers] == [1, 3, 3]  # the reply went the long way
        nursery.cancel_scope.cancel()


async def test_a_hop_from_a_neighbours_output_queues_behind_what_waits_in_the_inbox(
    autojump_clock: Any,
) -> None:
    """The hop from one layer's output into the next (`_Outbox.put`) runs the next
    layer inline only while nothing waits in its inbox: TEST_REPLY's reply to m1 goes
    down while the bottom layer is still forwarding m1, so it waits in that layer's
    inbox. A batch sent down from the top right after, in the same task, finds the
    bottom layer idle again but its inbox not empty: it queues behind the reply, and
    below sees the reply first."""
    layers, bottom, _top, below = _chain([_Relay(), _Reply(), Protocol()], size=8)
    async with trio.open_nursery() as nursery:
        await _run(nursery, layers)
        bottom.send_nowait([Message(None, b"m1", src=_B)])
        assert layers[0].ready and layers[0]._down_in.queued == 1
        layers[-1]._down_in.send_nowait([Message(_B, b"later")])
        got: list[Item] = []
        with trio.fail_after(5):
            while len(_payloads(got)) < 2:
                got.append(await below.receiver.receive())
        assert _payloads(got) == [b"reply", b"later"]
        assert [layer.inline for layer in layers] == [1, 2, 2]  # the bottom looped both
        nursery.cancel_scope.cancel()


async def test_a_pass_through_layer_forwards_a_batch_as_its_base_handler_would(
    autojump_clock: Any,
) -> None:
    """A layer whose protocol keeps `Protocol.down` and `send_down` has its batches put
    into its outbox by the host, without the handler; the same output comes out as
    from the handler: not for TEST_TAGGER, whose `send_down` is its own, nor for
    TEST_GREETER while its outbox still holds what it emitted when it started (b"hello"
    goes first, in one batch with m1). Every layer counts the batch as before."""
    layers, _bottom, _top, below = _chain([Protocol(), _Tagger(), _Greeter()], size=8)
    async with trio.open_nursery() as nursery:
        await _run(nursery, layers)
        layers[-1]._down_in.send_nowait([Message(_B, b"m1")])
        layers[-1]._down_in.send_nowait([])
        got: list[Item] = []
        with trio.fail_after(5):
            while len(_payloads(got)) < 2:
                got.append(await below.receiver.receive())
        assert _payloads(got) == [b"hello!", b"m1!"] and len(got) == 1
        stats = [layer.stats() for layer in layers]
        assert [s["batches_down"] for s in stats] == [1, 1, 2]
        assert [s["msgs_down"] for s in stats] == [2, 2, 1]
        assert [layer.inline for layer in layers] == [1, 1, 2]
        nursery.cancel_scope.cancel()


async def test_a_pass_through_layer_is_ready_again_once_a_batch_has_gone_past_it(
    autojump_clock: Any,
) -> None:
    """The two pass-through layers above TEST_MIRROR let m1 go down without their
    handlers, and nothing of m1 stays in them: the echo TEST_MIRROR sends back up while
    m1 is still in its handler goes past both in the same task. Below TEST_RELAY, which
    is busy forwarding m1 at the time, the same echo waits in its inbox for its loop."""
    layers, _bottom, top, _below = _chain([_Mirror(), Protocol(), Protocol()], size=8)
    async with trio.open_nursery() as nursery:
        await _run(nursery, layers)
        layers[-1]._down_in.send_nowait([Message(_B, b"m1")])
        assert [layer._up_in.queued for layer in layers] == [0, 0, 0]
        item = top.receiver.receive_nowait()
        assert _payloads([item]) == [b"echo"]
        assert [layer.inline for layer in layers] == [1, 2, 2]
        nursery.cancel_scope.cancel()
    layers, _bottom, top, _below = _chain([_Mirror(), _Relay(), Protocol()], size=8)
    async with trio.open_nursery() as nursery:
        await _run(nursery, layers)
        layers[-1]._down_in.send_nowait([Message(_B, b"m1")])
        assert [layer._up_in.queued for layer in layers] == [0, 1, 0]
        with trio.fail_after(5):
            item = await top.receiver.receive()
        assert _payloads([item]) == [b"echo"]
        assert [layer.inline for layer in layers] == [1, 1, 2]
        nursery.cancel_scope.cancel()


async def test_a_layer_is_not_reentered_while_it_forwards_what_its_tick_emitted(
    autojump_clock: Any,
) -> None:
    """As above, with the batch and the event emitted by TEST_TICKING_BOUNCE's tick: the
    layer is not ready for inline calls while its timer task forwards the tick's output."""
    layers, _bottom, top, _below = _chain([_TickingBounce(), _Reply(), Protocol()], size=8)
    async with trio.open_nursery() as nursery:
        await _run(nursery, layers)
        got: list[Item] = []
        with trio.fail_after(5):
            while len(_payloads(got)) < 3:
                got.append(await top.receiver.receive())
        assert _payloads(got) == [b"tick", Suspect((_B,)), b"looped"]
        assert layers[0].ticks == 1 and layers[0].inline == 0
        nursery.cancel_scope.cancel()


async def test_a_bounded_inbox_still_blocks_the_producer_while_a_layer_is_busy(
    autojump_clock: Any,
) -> None:
    """With nothing reading below, the bottom layer's outbox backs up, so it takes no more
    inline: later batches fill its inbox (size 2) and the sender from above blocks."""
    layers, _bottom, _top, below = _chain([Protocol(), Protocol()], size=2)
    from_above = layers[-1]._down_in
    async with trio.open_nursery() as nursery:
        await _run(nursery, layers)
        sent = 0

        async def produce() -> None:
            nonlocal sent
            for i in range(50):
                await from_above.send([Message(_B, str(i).encode())])
                sent += 1

        nursery.start_soon(produce)
        await trio.sleep(1)
        assert 0 < sent < 50
        held = sent
        await trio.sleep(1)
        assert sent == held  # still blocked: back-pressure, not loss
        got: list[Item] = []
        with trio.fail_after(5):
            while len(_payloads(got)) < 50:
                got.append(await below.receiver.receive())
        assert _payloads(got) == [str(i).encode() for i in range(50)]
        nursery.cancel_scope.cancel()


async def test_a_handler_that_raises_inline_crashes_its_own_layer_and_restarts_the_stack(
    autojump_clock: Any,
) -> None:
    """A batch sent from the top runs TEST_DOWN_CRASHER's handler inline in PASS's task,
    and one looped back by SIM runs TEST_UP_CRASHER's inline in the transport's task: each
    crash report names the layer that raised, with its own traceback, and the stack comes
    back as a new incarnation as it does for a crash in the layer's own task."""
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        cfg = StackConfig.of(
            ("SIM", {"network": net.name}), "TEST_UP_CRASHER", "TEST_DOWN_CRASHER", "PASS"
        )
        stack = Stack(cfg, "c", "A")
        await nursery.start(stack.run)
        await stack.send([Message(None, b"boom")])
        await wait_until(lambda: stack.incarnation >= 2, timeout=10, interval=0.01)
        report = stack.crash_reports[0]
        assert report.actor.endswith("TEST_DOWN_CRASHER") and "in run_inline" in report.traceback
        assert "down crasher was told to crash" in report.traceback
        assert isinstance(report.exception, RuntimeError)
        await stack.send([Message(stack.address, b"boom")])  # passes down, crashes coming up
        await wait_until(lambda: stack.incarnation >= 3, timeout=10, interval=0.01)
        report = stack.crash_reports[1]
        assert report.actor.endswith("TEST_UP_CRASHER") and "in run_inline" in report.traceback
        assert "up crasher was told to crash" in report.traceback
        await stack.send([Message(stack.address, b"after")])
        with trio.fail_after(10):
            item = await stack.receive()
            while not isinstance(item, list):
                item = await stack.receive()
        assert [m.payload for m in item] == [b"after"]
        assert stack.stats()["restarts"] == 2
        nursery.cancel_scope.cancel()


async def test_a_stack_of_idle_layers_runs_a_batch_to_completion_in_one_task(
    autojump_clock: Any,
) -> None:
    """Below the top (whose channel is the send queue), every layer handles the batch
    inline, going down and coming back up, and the host says so in its stats."""
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        cfg = StackConfig.of(("SIM", {"network": net.name}), "PASS", "PASS", "PASS")
        stack = Stack(cfg, "c", "A")
        await nursery.start(stack.run)
        await trio.testing.wait_all_tasks_blocked()

        def inline() -> list[int]:
            return [layer["host"]["inline"] for layer in stack.stats()["layers"][1:]]

        before = inline()
        await stack.send([Message(stack.address, b"one")])
        with trio.fail_after(5):
            item = await stack.receive()
            while not isinstance(item, list):
                item = await stack.receive()
        assert [m.payload for m in item] == [b"one"]
        # down and back up inline in the two lower layers; the top takes its sends from
        # its channel, the send queue, and only what comes up inline
        assert [after - b for after, b in zip(inline(), before, strict=True)] == [2, 2, 1]
        nursery.cancel_scope.cancel()


async def test_an_inline_send_runs_the_idle_top_layer_in_the_senders_task(
    autojump_clock: Any,
) -> None:
    """``Stack.send_nowait(..., inline=True)`` (RPC requests and answers): the idle top
    layer handles the batch at once, before the sender yields; a plain send_nowait only
    queues it at the top, for the top layer's loop."""
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        cfg = StackConfig.of(("SIM", {"network": net.name}), "PASS", "PASS")
        stack = Stack(cfg, "c", "A")
        await nursery.start(stack.run)
        await trio.testing.wait_all_tasks_blocked()

        def top_inline() -> int:
            return int(stack.stats()["layers"][-1]["host"]["inline"])

        before = top_inline()
        stack.send_nowait([Message(None, b"queued")])
        await trio.testing.wait_all_tasks_blocked()
        # the top's own loop took it from the send queue; inline only on its way back up
        assert top_inline() == before + 1
        stack.send_nowait([Message(None, b"urgent")], inline=True)
        assert top_inline() == before + 2
        got: list[bytes] = []
        with trio.fail_after(5):
            while len(got) < 2:
                item = await stack.receive()
                if isinstance(item, list):
                    got.extend(m.payload for m in item)
        assert got == [b"queued", b"urgent"]
        nursery.cancel_scope.cancel()


async def test_an_attached_consumer_takes_items_at_once_and_refused_ones_keep_their_order() -> None:
    """Out of the top of the stack (`Stack.deliver_to`): the consumer gets each item in the
    producer's task while nothing waits in the channel; one it refuses waits there, and so
    does everything after it (the consumer is not asked) until the reader has `take`-n it."""
    inlet = Inlet(8)
    taken: list[Item] = []
    accept = True

    def consumer(item: Item) -> bool:
        if accept:
            taken.append(item)
        return accept

    inlet.attach(consumer)
    a, b, c, d = ([Message(None, bytes([i]))] for i in range(4))
    inlet.send_nowait(a)
    accept = False
    inlet.send_nowait(b)
    accept = True
    inlet.send_nowait(c)  # b waits: c must not overtake it
    assert taken == [a] and inlet.queued == 2
    assert await inlet.take() is b
    assert await inlet.take() is c
    inlet.send_nowait(d)
    assert taken == [a, d] and inlet.queued == 0


async def test_a_channel_takes_rpc_answers_in_the_stack_task_not_in_its_reader(
    autojump_clock: Any,
) -> None:
    """With the reader idle, what comes out of the stack is handled at once by the
    consumer the channel attached: nothing waits in the stack's deliveries channel."""
    stack = StackConfig.of("SIM", "PING", "NAKACK2", "UNICAST3", "STABLE", "GMS")
    async with (
        open_sim_network(seed=3) as net,
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net, handlers={"echo": lambda x: x}) as b,
    ):
        inlet = a.stack._up
        before = inlet.queued
        for i in range(20):
            assert await a.rpc.call_one("echo", i, to=b.address) == i
        await trio.testing.wait_all_tasks_blocked()
        assert inlet.queued == before == 0


async def test_a_joining_batch_joins_the_last_queued_one_only_while_nothing_follows_it() -> None:
    """`Inlet.join_nowait` (RPC callers woken together): a batch joins the last batch in the
    channel while no one has taken it, up to ``merge`` messages; after an event, a batch
    put with an awaiting send, or once the reader took the last batch, it takes a slot of
    its own, so nothing overtakes what was queued before it."""
    inlet = Inlet(8, merge=3)

    def msg(payload: bytes) -> Message:
        return Message(None, payload)

    inlet.send_nowait([msg(b"a")])
    inlet.join_nowait([msg(b"b")])
    inlet.join_nowait([msg(b"c")])
    inlet.join_nowait([msg(b"d")])  # beyond merge=3: a slot of its own
    inlet.send_nowait(Suspect((_B,)))
    inlet.join_nowait([msg(b"e")])  # after an event: its own slot
    await inlet.send([msg(b"f")])
    inlet.join_nowait([msg(b"g")])  # after an awaiting send: its own slot
    items = [await inlet.take() for _ in range(5)]
    assert [[m.payload for m in i] if isinstance(i, list) else "event" for i in items] == [
        [b"a", b"b", b"c"],
        [b"d"],
        "event",
        [b"e"],
        [b"f"],
    ]
    inlet.join_nowait([msg(b"h")])  # "g" is still queued and last: joins it
    assert _payloads([await inlet.take()]) == [b"g", b"h"]
    inlet.join_nowait([msg(b"i")])  # the last batch was taken: a slot of its own
    assert inlet.queued == 1
    assert _payloads([await inlet.take()]) == [b"i"]
    plain = Inlet(8)
    plain.send_nowait([msg(b"x")])
    plain.join_nowait([msg(b"y")])  # no merge: never joins
    assert plain.queued == 2


def test_after_chain_work_runs_once_a_transports_delivery_chain_has_returned() -> None:
    """Work given to `after_chain` inside the chain a delivery into a transport's inlet
    started runs in the same task, after the whole chain, before the delivery returns;
    outside such a chain (no delivery, or an inlet no transport feeds) it is refused."""
    log: list[object] = []

    def work() -> None:
        log.append("after")

    def consumer(item: Item) -> bool:
        log.append(after_chain(work))
        log.append("consumer done")
        return True

    source = Inlet(4)
    source.bind_source()
    source.attach(consumer)
    assert not after_chain(work)
    source.send_nowait([Message(None, b"x", src=_A)])
    assert log == [True, "consumer done", "after"]
    log.clear()
    plain = Inlet(4)
    plain.attach(consumer)
    plain.send_nowait([Message(None, b"x", src=_A)])
    assert log == [False, "consumer done"]
