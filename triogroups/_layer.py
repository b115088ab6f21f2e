"""Hosting one sans-IO protocol as an actor.

A layer actor runs three tasks that share the protocol object: the down loop
(batches and events from the layer above), the up loop (from the layer
below) and the timer loop (calls `Protocol.tick` at `next_deadline`). Trio
runs one task at a time and handlers never await, so the protocol needs no
locks. After every handler the protocol's outboxes go into one `_Outbox` per
direction, so what a protocol emits leaves in the order it was emitted.

Run to completion through idle layers: a neighbour reaches a layer through
that direction's `Inlet`, which calls the layer's handler at once, in the
neighbour's task, when the layer is *ready* for it: it is running, not
already inside a handler (its own, or one reached inline further up the
call chain: a handler that emits both ways cannot re-enter itself), nothing
waits in its inbox for that direction (counted from the moment an item is
put in until the loop hands it to the protocol, so an item taken but not yet
handled counts too), and its outboxes are as free as its own loop would
want them after a handler (nothing waiting in the same direction, at most
_MAX_CROSS_BACKLOG in the other). Otherwise the item goes into the inbox
channel and the layer's loop takes it, as before: whatever waits there is
handled first, so order per direction, back-pressure (a bounded channel
still blocks a producer once a layer is busy) and fairness hold. An item
from a transport's receive loop climbs every idle layer to the top in one
task; a batch from the top (`Stack.send`, whose channel is the send queue
the top layer drains whole) goes down the same way from the top layer's
task. A handler that raises inline crashes its own layer: the error is
handed to that layer's actor, which raises it, so the supervisor sees the
same crash report with that layer's name; the neighbour carries on. Timers
stay with the layer's own timer task. Handlers run in one synchronous chain
are given the same ``now`` (no time passes for a task that never awaits).

Items are forwarded with ``send_nowait``: a batch can cross several layers in
one scheduler pass. When a neighbour is full, the loop that fed the handler
waits only for its own direction (back-pressure, never loss); what it emitted
the other way (an ack going down while handling an up batch) waits in that
direction's outbox without holding the loop up. Awaiting the other direction
would close a cycle across members: over TCP, A's writes wait for B to read,
B's reader waits for B's up loop, which would wait for B's writes, which wait
for A to read.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

import trio

from triogroups.actors import Actor, PermanentError
from triogroups.events import Event, Item
from triogroups.message import Message
from triogroups.protocol import Protocol
from triogroups.transports.base import Transport

__all__ = [
    "Inlet",
    "LayerActor",
    "StartupError",
    "TransportActor",
    "after_chain",
    "original_error",
]


_FAIR_SHARE = 32  # items a loop takes without yielding before it lets others run
_MAX_COALESCE = 256  # messages merged into one batch at most
#: Messages an inbox on the way up holds before its producer waits, besides the item that
#: made it full. An item is a batch of any size, so a bound in items alone let a receiver
#: that falls behind hold tens of thousands of messages that its reliability layer had
#: already acked (MCAST) or credited (MFC): memory rose with every new high-water mark.
MAX_QUEUED_MESSAGES = 1024
_MAX_CROSS_BACKLOG = 1024  # items a loop may leave waiting in the other direction

#: `Inlet._pass`: which batches go past a layer without its handler. None; every one
#: (the protocol keeps the base class's handler); or those that `_passes` finds to be
#: made only of the messages the protocol promises, as things stand, to pass on
#: untouched (`Protocol.passes_up` / `passes_down`, read before every batch).
_PASS_EVERY = 1
_PASS_ASK_UP = 2
_PASS_ASK_DOWN = 3

#: Work to run once the chain of handlers a transport's delivery started has returned
#: (see `after_chain`); None while no such chain runs. One list for the process is
#: enough: a chain never awaits, so no other task runs until it has returned.
_after: list[Callable[[], None]] | None = None


def after_chain(work: Callable[[], None]) -> bool:
    """Run ``work`` in this task once the chain of handlers that carries a delivery up
    from a transport has returned, when every layer it crossed is ready again (so what
    ``work`` sends runs down inline); False (nothing done) when no such chain runs.

    The channel's reader uses it to run an RPC request it was handed at the top in the
    same task, instead of waking its dispatcher: the answer leaves without a task
    switch. ``work`` must not raise."""
    if _after is None:
        return False
    _after.append(work)
    return True


def _passes(proto: Protocol, mode: int, batch: list[Message], pid: int) -> bool:
    """True if every message of ``batch`` is one ``proto`` (id ``pid``) promises, as
    things stand, to pass on untouched in the direction of ``mode`` (`_PASS_ASK_UP`
    or `_PASS_ASK_DOWN`; see `Protocol.passes_up`): a loop over the batch instead of
    the handler's call, its own loop, its output and the host's checks after it."""
    kind = proto.passes_up if mode == _PASS_ASK_UP else proto.passes_down
    if kind is None:
        return False
    if kind == "all":
        for msg in batch:
            if pid in msg.headers:
                return False
    elif kind == "unicasts":
        for msg in batch:
            if msg.dest is None or pid in msg.headers:
                return False
    else:
        for msg in batch:
            if msg.dest is not None or pid in msg.headers:
                return False
    return True


def _run_after(after: list[Callable[[], None]]) -> None:
    global _after
    _after = None
    for work in after:
        work()


class Inlet:
    """One direction's way into a layer: its bounded inbox, and the inline path.

    `send_nowait` and `send` run the layer's handler at once when the layer
    is ready for it (see the module docstring), else put the item into the
    inbox channel (`receiver`), whose reader is the layer's loop. An inlet
    with no layer bound (into a transport, out of the top of the stack, in
    unit tests) is just the channel, unless a consumer is `attach`-ed (out
    of the top: the application's channel). ``queued`` counts items put into
    the channel and not yet handed to a handler by the layer that reads it.

    On the way up (a layer's inbox from below, and the top's with a consumer,
    read with `take`) the inbox is also bounded in messages: once it holds
    MAX_QUEUED_MESSAGES the producer waits (`send`) or is refused
    (`send_nowait`) as when the channel is full; an item is always let into
    an empty inbox.
    """

    __slots__ = (
        "_batch",
        "_consumer",
        "_counts",
        "_event",
        "_layer",
        "_limit",
        "_on_request",
        "_other",
        "_pass",
        "_pid",
        "_room",
        "_root",
        "_same",
        "_send",
        "_sink",
        "_tail",
        "merge",
        "messages",
        "queued",
        "receiver",
    )

    def __init__(self, size: int, *, merge: int = 0) -> None:
        """A channel of ``size`` items; ``merge``: see `join_nowait`."""
        self._send, self.receiver = trio.open_memory_channel[Item](size)
        self.queued = 0
        self.merge = merge
        self._tail: list[Message] | None = None
        self.messages = 0  # in the batches counted by ``queued``
        self._limit = math.inf  # MAX_QUEUED_MESSAGES once a reader counts what it takes
        self._room: trio.Event | None = None  # set when the reader took messages
        self._layer: LayerActor | None = None
        self._on_request: LayerActor | None = None
        self._consumer: Callable[[Item], bool] | None = None
        self._sink: TransportActor | None = None
        self._root = False  # a transport delivers here: see `after_chain`
        self._pass = 0  # which batches go past the layer without its handler (`_passes`)
        self._pid = 0  # the layer's protocol id, for `_passes`

    def bind(
        self,
        layer: LayerActor,
        on_batch: Callable[[list[Message], float], None],
        on_event: Callable[[Event, float], None],
        counts: list[int],
        same: _Outbox,
        other: _Outbox,
        *,
        through: bool = False,
        promises: int = 0,
        eager: bool = True,
        max_messages: float = math.inf,
    ) -> None:
        """Let the neighbour run ``layer``'s handlers for this direction inline: on every
        item, or (not ``eager``) only when asked to with `offer_inline`; hold at most
        ``max_messages`` (see the class docstring). ``through``: ``on_batch`` is the base
        class's, which passes a batch on as is; ``promises``: `_PASS_ASK_UP` or
        `_PASS_ASK_DOWN` if the protocol may promise to pass batches on untouched
        (`Protocol.passes_up`) in this direction (see `LayerActor._pass_or_inline`)."""
        self._layer = layer if eager else None
        self._on_request = layer
        self._limit = max_messages
        self._batch, self._event, self._counts = on_batch, on_event, counts
        self._same, self._other = same, other
        self._pass = _PASS_EVERY if through else promises
        self._pid = layer.protocol.id

    def bind_source(self) -> None:
        """A transport delivers into this inlet: the chains of handlers it starts run
        the work given to `after_chain` once they have returned."""
        self._root = True

    def attach(self, consumer: Callable[[Item], bool]) -> None:
        """Offer ``consumer`` every item first, in the producer's task, while nothing waits
        in the channel; an item it refuses (returns False) goes into the channel, and its
        reader then takes items with `take`. ``consumer`` must not raise."""
        self._consumer = consumer
        self._limit = MAX_QUEUED_MESSAGES

    def bind_transport(self, actor: TransportActor) -> None:
        """Offer every batch to ``actor``'s transport first (`Transport.send_now`): an idle
        transport writes it to the network in the sender's task; and tell it whenever an
        item goes into the channel instead (`Transport.queued`), so nothing overtakes it."""
        self._sink = actor

    async def take(self) -> Item:
        """The next item from the channel, for the reader beside an `attach`-ed consumer."""
        item = await self.receiver.receive()
        self.took(item)
        return item

    def took(self, item: Item) -> None:
        """The reader took ``item`` out of the channel: a producer may have room (also
        after an event: a batch larger than the bound waits for an empty inbox)."""
        self.queued -= 1
        if type(item) is list:
            self.messages -= len(item)
            if item is self._tail:
                self._tail = None
        room = self._room
        if room is not None:
            self._room = None
            room.set()

    def _ready(self) -> bool:
        layer = self._layer
        return (
            layer is not None
            and layer.ready
            and not self.queued
            and not self._same._rest
            and len(self._other._rest) <= _MAX_CROSS_BACKLOG
        )

    def send_nowait(self, item: Item) -> None:
        """Hand ``item`` to the layer now; raises trio.WouldBlock when its inbox is full."""
        self.offer(item, None)

    def offer_inline(self, item: Item) -> None:
        """`send_nowait` that runs the handler inline when the layer is ready, also where
        it was bound not ``eager`` (the top's send queue, which otherwise lets sends made
        meanwhile coalesce): for one latency-bound item, such as an RPC request."""
        layer = self._on_request
        if (
            layer is not None
            and layer.ready
            and not self.queued
            and not self._same._rest
            and len(self._other._rest) <= _MAX_CROSS_BACKLOG
        ):
            layer._pass_or_inline(self, item, None)
            return
        self.offer(item, None)

    def join_nowait(self, batch: list[Message]) -> None:
        """As `send_nowait`, but on an inlet made with ``merge``, ``batch`` joins the last
        batch put into the channel while no one has taken it yet and it stays within
        ``merge`` messages: many senders' batches then take one slot, not one each."""
        tail = self._tail
        if tail is not None and len(tail) + len(batch) <= self.merge:
            tail.extend(batch)
            self.messages += len(batch)
            return
        self.offer(batch, None)

    def offer(self, item: Item, now: float | None) -> None:
        """`send_nowait` from a handler's output: ``now`` is the time that handler was
        given (a chain of handlers run inline shares one time), None to read the clock."""
        if self._root and _after is None:
            self._offer_from_source(item, now)
            return
        layer = self._layer
        if layer is not None and self._ready():
            layer._pass_or_inline(self, item, now)
            return
        consumer = self._consumer
        if consumer is not None and not self.queued and consumer(item):
            return
        n = len(item) if type(item) is list else 0
        if self.queued and self.messages + n > self._limit:
            raise trio.WouldBlock
        sink = self._sink
        if sink is not None:
            if type(item) is list and sink.send_now(item):
                return
            sink.queued()
        if self.merge and type(item) is list:
            item = list(item)  # a copy, so that later batches may join it (`join_nowait`)
        self.queued += 1  # before the channel, which may wake the loop with it at once
        try:
            self._send.send_nowait(item)
        except BaseException:
            self.queued -= 1
            raise
        self.messages += n
        self._tail = item if self.merge and type(item) is list else None

    def _offer_from_source(self, item: Item, now: float | None) -> None:
        """`offer` of a delivery from a transport: runs what `after_chain` was given once
        the chain it starts has returned."""
        global _after
        after: list[Callable[[], None]] = []
        _after = after
        try:
            self.offer(item, now)
        finally:
            _run_after(after)

    async def send(self, item: Item) -> None:
        """As `send_nowait`, waiting for room. Cancellation-safe: a cancelled send was not sent."""
        global _after
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._ready():
            layer: LayerActor = self._layer  # type: ignore[assignment]
            if self._root and _after is None:
                after: list[Callable[[], None]] = []
                _after = after
                try:
                    layer._pass_or_inline(self, item, None)
                finally:
                    _run_after(after)
            else:
                layer._pass_or_inline(self, item, None)
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        sink = self._sink
        if sink is not None:
            if type(item) is list and sink.send_now(item):
                await trio.lowlevel.cancel_shielded_checkpoint()
                return
            sink.queued()
        n = len(item) if type(item) is list else 0
        while self.queued and self.messages + n > self._limit:
            if self._room is None:
                self._room = trio.Event()
            await self._room.wait()
        self._tail = None  # nothing joins a batch once one may wait behind it
        self.queued += 1
        self.messages += n
        try:
            await self._send.send(item)
        except BaseException:
            self.queued -= 1
            self.messages -= n
            raise

    def buffered(self) -> int:
        """Items waiting in the inbox channel."""
        return self._send.statistics().current_buffer_used


class _Outbox:
    """One direction's way out of a layer: in emission order, never awaiting to put.

    Items go straight into the neighbour's channel while it has room. What
    does not fit waits here, in order, for `forward` (a task of its own) to
    send it as room appears; later items queue behind it so nothing
    overtakes. Putting never awaits, so a loop that emits into the *other*
    direction is never held up by it: the up loop of a member whose down
    path is stuck (its TCP peer is not reading) keeps reading, which is
    what lets that peer's writes drain. A loop waits (`wait_room`) only for
    its own direction, which is the back-pressure the channels exist for.
    """

    __slots__ = ("_empty", "_out", "_rest", "_wake")

    def __init__(self, out: Inlet) -> None:
        self._out = out
        self._rest: deque[Item] = deque()
        self._wake = trio.Event()
        self._empty = trio.Event()
        self._empty.set()

    def put(self, items: list[Item], now: float | None) -> bool:
        """Forward ``items`` without awaiting (``now``: see `Inlet.offer`); False if some
        had to wait here.

        A batch that the next layer would pass on untouched (`Protocol.passes_up`, or
        a protocol that keeps the base class's handler) moves on past it in this loop,
        without a call: counted by that layer, and gone from it at once, so the layer
        stays ready. Where it meets a layer that is not ready and whose inbox is full,
        it waits in the outbox of the last layer it passed (`_wait`), as if that layer
        had emitted it."""
        rest = self._rest
        if rest:
            rest.extend(items)
            return False
        left = iter(items)
        for item in left:
            box = self
            out = self._out
            # the item stays the same past every layer: its kind and size are asked once
            batch = item if type(item) is list else None
            size = 0 if batch is None else len(batch)
            while True:
                layer = out._layer
                if not (  # `Inlet._ready`, spelt out: this is the path of every hop
                    layer is not None
                    and layer.ready
                    and not out.queued
                    and not out._same._rest
                    and len(out._other._rest) <= _MAX_CROSS_BACKLOG
                ):
                    try:
                        out.offer(item, now)
                    except trio.WouldBlock:
                        if box is self:
                            rest.append(item)
                            rest.extend(left)
                            self._wait()
                            return False
                        box._rest.append(item)
                        box._wait()
                    break
                mode = out._pass
                if (  # the batch goes past the layer: see `_passes`
                    mode
                    and batch is not None
                    and not (proto := layer.protocol)._down_out
                    and not proto._up_out
                    and (mode == _PASS_EVERY or _passes(proto, mode, batch, out._pid))
                ):
                    counts = out._counts
                    counts[0] += 1
                    counts[1] += size
                    if not size:
                        break
                    box = out._same
                    out = box._out
                    continue
                layer._inline(out, item, now)
                break
        return True

    def _wait(self) -> None:
        """Something waits in `_rest` now: `forward` sends it as room appears."""
        self._empty = trio.Event()
        self._wake.set()

    def backlog(self) -> int:
        """Items waiting for room in the neighbour's channel."""
        return len(self._rest)

    async def wait_room(self) -> None:
        """Return once nothing waits here any more."""
        while self._rest:
            await self._empty.wait()

    async def forward(self) -> None:
        """Send what waits, in order, as the neighbour makes room (runs as a task)."""
        rest = self._rest
        while True:
            while rest:
                await self._out.send(rest[0])  # cancelled: the item stays first in line
                rest.popleft()
            self._empty.set()
            self._wake = trio.Event()
            await self._wake.wait()


async def _next_item(channel: trio.MemoryReceiveChannel[Item], taken: int) -> Item:
    """The next item: without yielding while items are ready, but fairly often enough."""
    if taken % _FAIR_SHARE:
        try:
            return channel.receive_nowait()
        except trio.WouldBlock:
            pass
    return await channel.receive()


def _coalesce(batch: list[Message], inlet: Inlet) -> tuple[list[Message], Item | None]:
    """Append every batch already waiting in ``inlet``'s channel to ``batch``.

    Under load this turns many small batches into one, so the per-hop cost
    is paid once for all of them. Stops at an event (returned, to be handled
    next, so order is kept; it still counts as queued) or at _MAX_COALESCE
    messages.
    """
    channel = inlet.receiver
    while len(batch) < _MAX_COALESCE:
        try:
            item = channel.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return batch, None
        if type(item) is not list:
            return batch, item
        inlet.queued -= 1
        inlet.messages -= len(item)
        if item is inlet._tail:
            inlet._tail = None
        batch.extend(item)
    return batch, None


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
        self._down_out = _Outbox(down_out)
        self._up_out = _Outbox(up_out)
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
            promises=_PASS_ASK_DOWN if _promises(protocol, "passes_down") else 0,
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
            promises=_PASS_ASK_UP if _promises(protocol, "passes_up") else 0,
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

    def _pass_or_inline(self, inlet: Inlet, item: Item, now: float | None) -> None:
        """Handle ``item``, come through ``inlet``, now, in the caller's task (see `Inlet`);
        an error crashes this layer, not the caller.

        A batch the protocol would pass on untouched (`Protocol.passes_up`, or a
        direction it leaves to the base class: `Protocol.down` is `send_down` as is)
        goes straight into that direction's outbox while the protocol's own are empty:
        the handler would emit exactly that and change nothing else, so there is
        nothing to ask the protocol afterwards (`_emit`). Such a batch still counts;
        the layer stays ready, since nothing of it is left here (see `_Outbox.put`)."""
        if type(item) is list:
            mode = inlet._pass
            if (  # as in `_Outbox.put`, spelt out: a call here would cost what it saves
                mode
                and not (proto := self.protocol)._down_out
                and not proto._up_out
                and (mode == _PASS_EVERY or _passes(proto, mode, item, inlet._pid))
            ):
                counts = inlet._counts
                counts[0] += 1
                counts[1] += len(item)
                if item:
                    inlet._same.put([item], now)
                return
        self._inline(inlet, item, now)

    def _inline(self, inlet: Inlet, item: Item, now: float | None) -> None:
        """Run the handler for ``item`` in the caller's task, once it is known not to go
        past (`_pass_or_inline`; `_Outbox.put` makes that check itself before calling
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
        counted, since `_inline` runs on every hop."""
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
        same: _Outbox,
        other: _Outbox,
    ) -> None:
        """Feed one direction's items to the protocol.

        ``counts`` is [batches, messages]. Neither loop ever parks: while the
        protocol holds back senders the stack closes its top (`Stack.send`
        waits), and what was already on the way down is queued by the
        protocol, so acks, view changes and other events keep flowing.
        After a handler the loop waits for room in its own direction
        (``same``), and in the ``other`` only once more than
        _MAX_CROSS_BACKLOG items wait there (memory stays bounded).
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
            if same._rest or len(other._rest) > _MAX_CROSS_BACKLOG:
                await self._room(same, other)  # left by a handler that ran inline meanwhile
            taken += 1
            inlet.took(item)
            self._looped += 1
            self.ready = False
            now = trio.current_time()
            if type(item) is list:
                item, held = _coalesce(item, inlet)
                counts[0] += 1
                counts[1] += len(item)
                on_batch(item, now)
            else:
                self.events += 1
                on_event(item, now)  # type: ignore[arg-type]
            self._emit(now)
            self.ready = self._failure is None
            if same._rest or len(other._rest) > _MAX_CROSS_BACKLOG:
                await self._room(same, other)

    @staticmethod
    async def _room(same: _Outbox, other: _Outbox) -> None:
        """Wait for the room `_loop` needs before it takes on more."""
        if same._rest:
            await same.wait_room()
        if len(other._rest) > _MAX_CROSS_BACKLOG:
            await other.wait_room()

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


class StartupError(PermanentError):
    """A member's stack could not start, and starting it again would fail the same way.

    Raised by `Stack.run` and `open_channel` at once, without restarts, when the
    transport cannot open in the stack's first incarnation: a taken port range,
    a ``bind_addr`` that is not an address of this host, no simulated network
    of that name. The message names the transport and the cause; ``__cause__``
    is the original error (an `OSError` keeps its ``errno``).
    """


def _reason(exc: Exception) -> str:
    """``exc`` as its message alone: an OSError's text without the "[Errno 98]" prefix."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


class TransportActor(Actor):
    """Runs a transport's `serve` at the bottom of a stack.

    The transport opens (`Transport.open`) in `started`, before the stack
    reports the layer started. In the stack's ``first`` incarnation an error
    there is a `StartupError`: nothing was ever up, so the cause is the
    configuration or the host (a port, an address, a network), which a
    restart does not change; retrying it four times would only hide it. In
    a later incarnation the same error is an ordinary crash, restarted by
    the stack's restart intensity (a port may be free again a moment later).

    The inlet from above offers batches to `Transport.send_now` first (see
    `Inlet.bind_transport`): an error there crashes this actor, as an error
    in `serve` would, not the layer whose handler sent the batch.
    """

    def __init__(
        self,
        transport: Transport,
        down_in: Inlet,
        up_out: Inlet,
        *,
        first: bool = False,
    ) -> None:
        self.protocol = transport
        self._down_in = down_in
        self._up_out = up_out
        self._first = first
        self._failure: Exception | None = None
        self._failed = trio.Event()
        down_in.bind_transport(self)
        up_out.bind_source()

    async def started(self) -> None:
        try:
            self.protocol.open()
        except Exception as exc:
            if not self._first:
                raise
            name = self.protocol.name or type(self.protocol).__name__
            raise StartupError(f"{name} cannot start: {_reason(exc)}") from exc

    async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._raise_failure)
                await self.protocol.serve(self._down_in.receiver, self._up_out)
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise original_error(group) from None

    async def _raise_failure(self) -> None:
        """Raise, in this actor, the error of a `send_now` run in another task."""
        await self._failed.wait()
        assert self._failure is not None
        raise self._failure

    def send_now(self, batch: list[Message]) -> bool:
        """`Transport.send_now` in a neighbour's task; an error crashes this actor."""
        if self._failure is not None:
            return False
        try:
            return self.protocol.send_now(batch)
        except Exception as exc:
            self._failure = exc
            self._failed.set()
            return True

    def queued(self) -> None:
        """See `Transport.queued`."""
        self.protocol.queued()

    def down_pending(self) -> bool:
        """Whether batches wait for the transport to take them (see `LayerActor.down_pending`)."""
        return bool(self._down_in.buffered())

    def reset_stats(self) -> None:
        """The host keeps no counters for the transport."""

    def stats(self) -> dict[str, Any]:
        """The transport keeps its own counters (`Transport.stats`); the host adds how many
        items wait in its inbox from above."""
        return {"queued_down": self._down_in.buffered()}
