"""Hosting one sans-IO protocol as an actor.

A layer actor runs three tasks that share the protocol object: the down loop
(batches and events from the layer above), the up loop (from the layer
below) and the timer loop (calls `Protocol.tick` at `next_deadline`). Trio
runs one task at a time and handlers never await, so the protocol needs no
locks. After every handler the outboxes are forwarded in order under one lock
per direction, so what a protocol emits leaves in the order it was emitted.

Items are forwarded with ``send_nowait`` and only await when the neighbour's
channel is full: a batch can cross several layers in one scheduler pass,
and a full channel still blocks the producer (back-pressure, never loss).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from triogroups.actors import Actor
from triogroups.events import Event, Item
from triogroups.message import Message
from triogroups.protocol import Protocol
from triogroups.transports.base import Transport

__all__ = ["LayerActor", "TransportActor", "original_error"]


_FAIR_SHARE = 32  # items a loop takes without yielding before it lets others run
_MAX_COALESCE = 4096  # messages merged into one batch at most


def _forward_nowait(
    lock: trio.StrictFIFOLock, out: trio.MemorySendChannel[Item], items: list[Item]
) -> list[Item]:
    """Send what fits without awaiting; return what is left, in order.

    Only sends while no other task of this layer is part-way through
    forwarding in the same direction (``lock`` is free), so a later emission
    can never overtake an earlier one that had to wait.
    """
    if lock.locked():
        return items
    for i, item in enumerate(items):
        try:
            out.send_nowait(item)
        except trio.WouldBlock:
            return items[i:]
    return []


async def _forward_rest(
    lock: trio.StrictFIFOLock, out: trio.MemorySendChannel[Item], items: list[Item]
) -> None:
    """Send the rest in order, awaiting room (back-pressure), holding ``lock``."""
    async with lock:
        for item in items:
            await out.send(item)


async def _next_item(channel: trio.MemoryReceiveChannel[Item], taken: int) -> Item:
    """The next item: without yielding while items are ready, but fairly often enough."""
    if taken % _FAIR_SHARE:
        try:
            return channel.receive_nowait()
        except trio.WouldBlock:
            pass
    return await channel.receive()


def _coalesce(
    batch: list[Message], channel: trio.MemoryReceiveChannel[Item]
) -> tuple[list[Message], Item | None]:
    """Append every batch already waiting in ``channel`` to ``batch``.

    Under load this turns many small batches into one, so the per-hop cost
    is paid once for all of them. Stops at an event (returned, to be handled
    next, so order is kept) or at _MAX_COALESCE messages.
    """
    while len(batch) < _MAX_COALESCE:
        try:
            item = channel.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return batch, None
        if type(item) is not list:
            return batch, item
        batch.extend(item)
    return batch, None


def original_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first leaf of a nursery's group, so crash reports show the protocol's own error."""
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


class LayerActor(Actor):
    """Runs one protocol between two neighbours."""

    def __init__(
        self,
        protocol: Protocol,
        down_in: trio.MemoryReceiveChannel[Item],
        up_in: trio.MemoryReceiveChannel[Item],
        down_out: trio.MemorySendChannel[Item],
        up_out: trio.MemorySendChannel[Item],
        on_blocked: Callable[[LayerActor, bool], None],
    ) -> None:
        self.protocol = protocol
        self._on_blocked = on_blocked
        self._blocked = False
        self._down_in = down_in
        self._up_in = up_in
        self._down_out = down_out
        self._up_out = up_out
        self._down_lock = trio.StrictFIFOLock()
        self._up_lock = trio.StrictFIFOLock()
        self._timer_scope: trio.CancelScope | None = None
        self._deadline = protocol.next_deadline()
        self._down_rest: list[Item] = []
        self._up_rest: list[Item] = []
        self._down_counts = [0, 0]
        self._up_counts = [0, 0]
        self.events = self.ticks = 0

    async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
        try:
            async with trio.open_nursery() as nursery:
                proto = self.protocol
                nursery.start_soon(
                    self._loop, self._down_in, proto.down, proto.down_event, self._down_counts
                )
                nursery.start_soon(
                    self._loop, self._up_in, proto.up, proto.up_event, self._up_counts
                )
                nursery.start_soon(self._timer_loop)
        except BaseExceptionGroup as group:
            raise original_error(group) from None

    def _emit(self) -> bool:
        """Forward what the handler emitted without awaiting, re-arm the timer, tell the
        stack when the protocol starts or stops holding back senders. False if
        something is left for `_emit_rest` (a neighbour is full)."""
        proto = self.protocol
        done = True
        if proto._down_out:
            self._down_rest = _forward_nowait(self._down_lock, self._down_out, proto.take_down())
            done = not self._down_rest
        if proto._up_out:
            self._up_rest = _forward_nowait(self._up_lock, self._up_out, proto.take_up())
            done = done and not self._up_rest
        deadline = proto.next_deadline()
        if deadline != self._deadline:
            self._deadline = deadline
            if self._timer_scope is not None:
                self._timer_scope.deadline = deadline
        blocked = proto.blocks_down()
        if blocked != self._blocked:
            self._blocked = blocked
            self._on_blocked(self, blocked)
        return done

    async def _emit_rest(self) -> None:
        down, self._down_rest = self._down_rest, []
        up, self._up_rest = self._up_rest, []
        if down:
            await _forward_rest(self._down_lock, self._down_out, down)
        if up:
            await _forward_rest(self._up_lock, self._up_out, up)

    async def _after(self) -> None:
        if not self._emit():
            await self._emit_rest()

    async def poke(self) -> None:
        """The protocol changed outside a handler (a run-time property): forward what
        it emitted and re-arm the timer from its new deadline."""
        await self._after()

    async def _loop(
        self,
        channel: trio.MemoryReceiveChannel[Item],
        on_batch: Callable[[list[Message], float], None],
        on_event: Callable[[Event, float], None],
        counts: list[int],
    ) -> None:
        """Feed one direction's items to the protocol.

        ``counts`` is [batches, messages]. Neither loop ever parks: while the
        protocol holds back senders the stack closes its top (`Stack.send`
        waits), and what was already on the way down is queued by the
        protocol, so acks, view changes and other events keep flowing.
        """
        held: Item | None = None
        taken = 0
        while True:
            if held is None:
                try:
                    item = await _next_item(channel, taken)
                except trio.EndOfChannel:
                    return
            else:
                item, held = held, None
            taken += 1
            if type(item) is list:
                item, held = _coalesce(item, channel)
                counts[0] += 1
                counts[1] += len(item)
                on_batch(item, trio.current_time())
            else:
                self.events += 1
                on_event(item, trio.current_time())  # type: ignore[arg-type]
            if not self._emit():
                await self._emit_rest()

    async def _timer_loop(self) -> None:
        proto = self.protocol  # tick() must move next_deadline() past now
        while True:
            self._deadline = proto.next_deadline()
            with trio.CancelScope(deadline=self._deadline) as scope:
                self._timer_scope = scope
                await trio.sleep_forever()
            self._timer_scope = None
            now = trio.current_time()
            if proto.next_deadline() <= now:
                self.ticks += 1
                proto.tick(now)
                await self._after()

    def stats(self) -> dict[str, Any]:
        return {
            "batches_down": self._down_counts[0],
            "msgs_down": self._down_counts[1],
            "batches_up": self._up_counts[0],
            "msgs_up": self._up_counts[1],
            "events": self.events,
            "ticks": self.ticks,
        }


class TransportActor(Actor):
    """Runs a transport's `serve` at the bottom of a stack."""

    def __init__(
        self,
        transport: Transport,
        down_in: trio.MemoryReceiveChannel[Item],
        up_out: trio.MemorySendChannel[Item],
    ) -> None:
        self.protocol = transport
        self._down_in = down_in
        self._up_out = up_out

    async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
        await self.protocol.serve(self._down_in, self._up_out)

    def stats(self) -> dict[str, Any]:
        return {}
