"""`LayerActor`: one sans-IO protocol hosted between two neighbours, as an actor.

Its three tasks (the down loop, the up loop, the timer loop) share the
protocol object; neighbours reach it inline through its `Inlet`s when it is
ready (`triogroups._layer._ways`), and after every handler `_emit` forwards the
protocol's outboxes and re-arms its timer. Never awaits inside a handler.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import trio

from triogroups._layer._ways import (
    MAX_QUEUED_MESSAGES,
    PASS_ASK_DOWN,
    PASS_ASK_UP,
    PASS_EVERY,
    Inlet,
    Outbox,
    coalesce,
    crowded,
    passes,
    room,
)
from triogroups.actors import Actor
from triogroups.events import Event, Item
from triogroups.message import Message
from triogroups.protocol import Protocol

__all__ = ["LayerActor", "original_error"]

_FAIR_SHARE = 32  # items a loop takes without yielding before it lets others run


async def _next_item(channel: trio.MemoryReceiveChannel[Item], taken: int) -> Item:
    """The next item: without yielding while items are ready, but fairly often enough."""
    if taken % _FAIR_SHARE:
        try:
            return channel.receive_nowait()
        except trio.WouldBlock:
            pass
    return await channel.receive()


def original_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first leaf of a nursery's group, so crash reports show the protocol's own error."""
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


def _inherited(protocol: Protocol, *names: str) -> bool:
    """Whether ``protocol`` has every method in ``names`` as `Protocol` defines it."""
    return all(
        getattr(getattr(protocol, name), "__func__", None) is getattr(Protocol, name)
        for name in names
    )


def _promises(protocol: Protocol, name: str) -> bool:
    """Whether ``protocol`` may promise to pass batches on untouched (`Protocol.passes_up`
    or `passes_down`, as ``name``): its class overrides the base's "never"."""
    return getattr(type(protocol), name) is not getattr(Protocol, name)


def _overridden(protocol: Protocol, name: str) -> Callable[[], Any] | None:
    """``protocol``'s method ``name`` (`Protocol.next_deadline` or `blocks_down`), None
    when it is the base class's, whose answer never changes (inf, False): the host
    then need not ask after every handler."""
    if _inherited(protocol, name):
        return None
    method: Callable[[], Any] = getattr(protocol, name)
    return method


class LayerActor(Actor):
    """Runs one protocol between two neighbours."""

    def __init__(
        self,
        protocol: Protocol,
        down_in: Inlet,
        up_in: Inlet,
        down_out: Inlet,
        up_out: Inlet,
        on_blocked: Callable[[LayerActor, bool], None],
        *,
        inline_down: bool = True,
    ) -> None:
        self.protocol = protocol
        self._on_blocked = on_blocked
        self._blocked = False
        self._down_in = down_in
        self._up_in = up_in
        self._down_out = Outbox(down_out)
        self._up_out = Outbox(up_out)
        self._timer_scope: trio.CancelScope | None = None
        self._deadline = math.inf  # the timer loop asks the protocol once it has started
        self._next_deadline = _overridden(protocol, "next_deadline")
        self._blocks_down = _overridden(protocol, "blocks_down")
        self._down_counts = [0, 0]
        self._up_counts = [0, 0]
        self.events = self.ticks = 0
        self._looped = 0  # items (and runs of batches coalesced) the loops handled
        self.ready = False  # running and not inside a handler: neighbours may call in
        self._failure: Exception | None = None
        self._failed = trio.Event()
        #: set while the test kit has paused the member (`Stack.pause`): the timer loop
        #: fires no tick until the event is set, then fires what came due meanwhile, late
        self.held: trio.Event | None = None
        down_in.bind(
            self,
            protocol.down,
            protocol.down_event,
            self._down_counts,
            self._down_out,
            self._up_out,
            through=_inherited(protocol, "down", "send_down"),
            promises=PASS_ASK_DOWN if _promises(protocol, "passes_down") else 0,
            eager=inline_down,
        )
        up_in.bind(
            self,
            protocol.up,
            protocol.up_event,
            self._up_counts,
            self._up_out,
            self._down_out,
            through=_inherited(protocol, "up", "send_up"),
            promises=PASS_ASK_UP if _promises(protocol, "passes_up") else 0,
            max_messages=MAX_QUEUED_MESSAGES,
        )

    async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
        try:
            async with trio.open_nursery() as nursery:
                proto = self.protocol
                down, up = self._down_out, self._up_out
                nursery.start_soon(down.forward)
                nursery.start_soon(up.forward)
                nursery.start_soon(
                    self._loop,
                    self._down_in,
                    proto.down,
                    proto.down_event,
                    self._down_counts,
                    down,
                    up,
                )
                nursery.start_soon(
                    self._loop, self._up_in, proto.up, proto.up_event, self._up_counts, up, down
                )
                nursery.start_soon(self._timer_loop)
                nursery.start_soon(self._raise_failure)
                self.ready = self._failure is None
        except BaseExceptionGroup as group:
            raise original_error(group) from None
        finally:
            self.ready = False

    def pass_or_inline(self, inlet: Inlet, item: Item, now: float | None) -> None:
        """Handle ``item``, come through ``inlet``, now, in the caller's task (see `Inlet`);
        an error crashes this layer, not the caller.

        A batch the protocol would pass on untouched (`Protocol.passes_up`, or a
        direction it leaves to the base class: `Protocol.down` is `send_down` as is)
        goes straight into that direction's outbox while the protocol's own are empty:
        the handler would emit exactly that and change nothing else, so there is
        nothing to ask the protocol afterwards (`_emit`). Such a batch still counts;
        the layer stays ready, since nothing of it is left here (see `Outbox.put`)."""
        if type(item) is list:
            mode = inlet._pass
            if (  # as in `Outbox.put`, spelt out: a call here would cost what it saves
                mode
                and not (proto := self.protocol)._down_out
                and not proto._up_out
                and (mode == PASS_EVERY or passes(proto, mode, item, inlet._pid))
            ):
                counts = inlet._counts
                counts[0] += 1
                counts[1] += len(item)
                if item:
                    inlet._same.put([item], now)
                return
        self.run_inline(inlet, item, now)

    def run_inline(self, inlet: Inlet, item: Item, now: float | None) -> None:
        """Run the handler for ``item`` in the caller's task, once it is known not to go
        past (`pass_or_inline`; `Outbox.put` makes that check itself before calling
        this); an error crashes this layer, not the caller."""
        self.ready = False
        try:
            if now is None:
                now = trio.current_time()
            if type(item) is list:
                counts = inlet._counts
                counts[0] += 1
                counts[1] += len(item)
                inlet._batch(item, now)
            else:
                self.events += 1
                inlet._event(item, now)  # type: ignore[arg-type]
            self._emit(now)
        except Exception as exc:
            self._failure = exc
            self._failed.set()
            return
        self.ready = True

    @property
    def inline(self) -> int:
        """How many handlers (batches and events, not ticks) ran inline in a neighbour's
        task: all of them but those the layer's own loops ran. Derived rather than
        counted, since `run_inline` runs on every hop."""
        return self._down_counts[0] + self._up_counts[0] + self.events - self._looped

    async def _raise_failure(self) -> None:
        """Raise, in this actor, the error of a handler that ran inline in another task."""
        await self._failed.wait()
        assert self._failure is not None
        raise self._failure

    def _emit(self, now: float | None) -> None:
        """Forward what the handler emitted without awaiting, re-arm the timer, tell the
        stack when the protocol starts or stops holding back senders.

        This runs after every handler, on every hop of a message between idle layers,
        so it takes the outboxes as `Protocol.take_down` / `take_up` would, without
        the calls, and asks `next_deadline` / `blocks_down` only of a protocol that
        overrides them (see `_overridden`)."""
        proto = self.protocol
        out = proto._down_out
        if out:
            proto._down_out = []
            self._down_out.put(out, now)
        out = proto._up_out
        if out:
            proto._up_out = []
            self._up_out.put(out, now)
        next_deadline = self._next_deadline
        if next_deadline is not None:
            deadline = next_deadline()
            if deadline != self._deadline:
                self._deadline = deadline
                if self._timer_scope is not None:
                    self._timer_scope.deadline = deadline
        blocks_down = self._blocks_down
        if blocks_down is not None:
            blocked = blocks_down()
            if blocked != self._blocked:
                self._blocked = blocked
                self._on_blocked(self, blocked)

    async def _wait_room(self) -> None:
        await self._down_out.wait_room()
        await self._up_out.wait_room()

    async def poke(self) -> None:
        """The protocol changed outside a handler (a run-time property): forward what
        it emitted and re-arm the timer from its new deadline."""
        ready, self.ready = self.ready, False
        self._emit(None)
        self.ready = ready
        await self._wait_room()

    async def _loop(
        self,
        inlet: Inlet,
        on_batch: Callable[[list[Message], float], None],
        on_event: Callable[[Event, float], None],
        counts: list[int],
        same: Outbox,
        other: Outbox,
    ) -> None:
        """Feed one direction's items to the protocol.

        ``counts`` is [batches, messages]. Neither loop ever parks: while the
        protocol holds back senders the stack closes its top (`Stack.send`
        waits), and what was already on the way down is queued by the
        protocol, so acks, view changes and other events keep flowing.
        After a handler the loop waits for room in its own direction
        (``same``), and in the ``other`` only once more than
        MAX_CROSS_BACKLOG items wait there (memory stays bounded).
        While it runs a handler the layer is not `ready`: what a neighbour
        sends meanwhile (reached inline from this handler's output) waits in
        the inbox for the next round.
        """
        channel = inlet.receiver
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
            if crowded(same, other):
                await room(same, other)  # left by a handler that ran inline meanwhile
            taken += 1
            inlet.took(item)
            self._looped += 1
            self.ready = False
            now = trio.current_time()
            if type(item) is list:
                item, held = coalesce(item, inlet)
                counts[0] += 1
                counts[1] += len(item)
                on_batch(item, now)
            else:
                self.events += 1
                on_event(item, now)  # type: ignore[arg-type]
            self._emit(now)
            self.ready = self._failure is None
            if crowded(same, other):
                await room(same, other)

    async def _timer_loop(self) -> None:
        """Call `Protocol.tick` whenever its deadline has come.

        A tick must move ``next_deadline()`` past ``now``; one that does not
        would be called again at once, forever (under a virtual clock, time
        would stand still), so that is a protocol bug and crashes the layer.
        """
        proto = self.protocol
        while True:
            self._deadline = proto.next_deadline()
            with trio.CancelScope(deadline=self._deadline) as scope:
                self._timer_scope = scope
                await trio.sleep_forever()
            self._timer_scope = None
            while self.held is not None:  # paused (`Stack.pause`): ticks wait, then fire late
                await self.held.wait()
            now = trio.current_time()
            if proto.next_deadline() <= now:
                self.ticks += 1
                self.ready = False
                proto.tick(now)
                self._emit(now)
                self.ready = self._failure is None
                if self._deadline <= now:
                    raise RuntimeError(
                        f"{proto.name or type(proto).__name__}.tick must move next_deadline() "
                        f"past now, got {self._deadline} at {now}"
                    )
                await self._wait_room()  # no new tick while its output still waits

    def down_pending(self) -> bool:
        """Whether this layer has yet to take, or to pass on, something sent down to it.

        True while items wait in its inbox from above or in its outbox below,
        or while its protocol holds back senders (it keeps their messages
        queued). See `Stack.sends_pending` for what this cannot see.
        """
        return bool(self._blocked or self._down_in.buffered() or self._down_out.backlog())

    def reset_stats(self) -> None:
        """Zero the host's counters for this layer (not its queues)."""
        self._down_counts[:] = [0, 0]
        self._up_counts[:] = [0, 0]
        self.events = self.ticks = self._looped = 0

    def stats(self) -> dict[str, Any]:
        """The host's counters for this layer: batches and messages each way, events, ticks,
        how many of those handlers ran inline in a neighbour's task, and the queue lengths:
        items waiting in its inbox from above and from below, and in its outboxes for room
        in the neighbour below and above."""
        return {
            "batches_down": self._down_counts[0],
            "msgs_down": self._down_counts[1],
            "batches_up": self._up_counts[0],
            "msgs_up": self._up_counts[1],
            "events": self.events,
            "ticks": self.ticks,
            "inline": self.inline,
            "queued_down": self._down_in.buffered(),
            "queued_up": self._up_in.buffered(),
            "backlog_down": self._down_out.backlog(),
            "backlog_up": self._up_out.backlog(),
            "blocks_down": self._blocked,
        }
