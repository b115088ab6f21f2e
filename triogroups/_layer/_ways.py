"""The ways into and out of a layer: `Inlet` (one direction in) and `Outbox` (one out).

An inlet runs its layer's handler at once, in the neighbour's task, when the
layer is *ready* for it (`ready`: the one copy of that check, used by every
way in), else queues the item for the layer's loop; an outbox forwards what a
handler emitted in order, never awaiting to put, and moves batches past the
layers that would pass them on untouched. `after_chain` runs work once a chain
of handlers a transport's delivery started has returned. What the layers are
and why they run inline: the package docstring (`triogroups._layer`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from types import ModuleType
from typing import Protocol as TypingProtocol
from typing import TypeGuard

import trio

from triogroups import _compiled
from triogroups.events import Event, Item
from triogroups.message import Message
from triogroups.protocol import Protocol

__all__ = [
    "MAX_CROSS_BACKLOG",
    "MAX_QUEUED_MESSAGES",
    "PASS_ASK_DOWN",
    "PASS_ASK_UP",
    "PASS_EVERY",
    "Host",
    "Inlet",
    "Outbox",
    "Sink",
    "after_chain",
    "coalesce",
    "crowded",
    "passes",
    "ready",
    "room",
]


class Host(TypingProtocol):
    """What an inlet calls of the layer it leads into (`LayerActor`)."""

    ready: bool  # running and not inside a handler
    protocol: Protocol

    def pass_or_inline(self, inlet: Inlet, item: Item, now: float | None) -> None: ...

    def run_inline(self, inlet: Inlet, item: Item, now: float | None) -> None: ...


class Sink(TypingProtocol):
    """What an inlet into a transport calls of it (`TransportActor`)."""

    def send_now(self, batch: list[Message]) -> bool: ...

    def queued(self) -> None: ...


_MAX_COALESCE = 256  # messages merged into one batch at most
#: Messages an inbox on the way up holds before its producer waits, besides the item that
#: made it full. An item is a batch of any size, so a bound in items alone let a receiver
#: that falls behind hold tens of thousands of messages that its reliability layer had
#: already acked (MCAST) or credited (MFC): memory rose with every new high-water mark.
MAX_QUEUED_MESSAGES = 1024
MAX_CROSS_BACKLOG = 1024  # items a loop may leave waiting in the other direction

#: `Inlet._pass`: which batches go past a layer without its handler. None; every one
#: (the protocol keeps the base class's handler); or those that `passes` finds to be
#: made only of the messages the protocol promises, as things stand, to pass on
#: untouched (`Protocol.passes_up` / `passes_down`, read before every batch).
PASS_EVERY = 1
PASS_ASK_UP = 2
PASS_ASK_DOWN = 3

#: The scans `passes` runs over a batch (`triogroups._layer._scan`), in the form this process
#: runs: compiled where the build made it, unless ``TRIOGROUPS_PURE_PYTHON`` is set.
SCAN: ModuleType = _compiled.load("_layer._scan")

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


def passes(proto: Protocol, mode: int, batch: list[Message], pid: int) -> bool:
    """True if every message of ``batch`` is one ``proto`` (id ``pid``) promises, as
    things stand, to pass on untouched in the direction of ``mode`` (`PASS_ASK_UP`
    or `PASS_ASK_DOWN`; see `Protocol.passes_up`): a loop over the batch instead of
    the handler's call, its own loop, its output and the host's checks after it."""
    kind = proto.passes_up if mode == PASS_ASK_UP else proto.passes_down
    if kind is None:
        return False
    if kind == "all":
        return SCAN.none_carries(batch, pid)  # type: ignore[no-any-return]
    if kind == "unicasts":
        return SCAN.unicasts_without(batch, pid)  # type: ignore[no-any-return]
    return SCAN.multicasts_without(batch, pid)  # type: ignore[no-any-return]


def _run_after(after: list[Callable[[], None]]) -> None:
    global _after
    _after = None
    for work in after:
        work()


def ready(layer: Host | None, inlet: Inlet) -> TypeGuard[Host]:
    """Whether ``layer`` may run its handler now, in the caller's task, for an item come
    through ``inlet`` (the package docstring's *ready*): it is running and not inside a
    handler, nothing waits in its inbox for that direction, and its outboxes are as free
    as its own loop wants them after a handler (nothing waiting in the same direction,
    at most MAX_CROSS_BACKLOG in the other). Every way in asks this one function, but
    `Outbox.put`, which spells out the same expression (a test holds them equal)."""
    return (
        layer is not None
        and layer.ready
        and not inlet.queued
        and not inlet._same._rest
        and len(inlet._other._rest) <= MAX_CROSS_BACKLOG
    )


def crowded(same: Outbox, other: Outbox) -> bool:
    """Whether a layer's loop must wait for room (`room`) before it takes on more: what
    its handlers emitted waits in the direction it feeds (``same``), or more than
    MAX_CROSS_BACKLOG items wait in the ``other``."""
    return bool(same._rest) or len(other._rest) > MAX_CROSS_BACKLOG


async def room(same: Outbox, other: Outbox) -> None:
    """Wait for the room a layer's loop needs before it takes on more (see `crowded`)."""
    if same._rest:
        await same.wait_room()
    if len(other._rest) > MAX_CROSS_BACKLOG:
        await other.wait_room()


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
        self._layer: Host | None = None
        self._on_request: Host | None = None
        self._consumer: Callable[[Item], bool] | None = None
        self._sink: Sink | None = None
        self._root = False  # a transport delivers here: see `after_chain`
        self._pass = 0  # which batches go past the layer without its handler (`passes`)
        self._pid = 0  # the layer's protocol id, for `passes`

    def bind(
        self,
        layer: Host,
        on_batch: Callable[[list[Message], float], None],
        on_event: Callable[[Event, float], None],
        counts: list[int],
        same: Outbox,
        other: Outbox,
        *,
        through: bool = False,
        promises: int = 0,
        eager: bool = True,
        max_messages: float = math.inf,
    ) -> None:
        """Let the neighbour run ``layer``'s handlers for this direction inline: on every
        item, or (not ``eager``) only when asked to with `offer_inline`; hold at most
        ``max_messages`` (see the class docstring). ``through``: ``on_batch`` is the base
        class's, which passes a batch on as is; ``promises``: `PASS_ASK_UP` or
        `PASS_ASK_DOWN` if the protocol may promise to pass batches on untouched
        (`Protocol.passes_up`) in this direction (see `Host.pass_or_inline`)."""
        self._layer = layer if eager else None
        self._on_request = layer
        self._limit = max_messages
        self._batch, self._event, self._counts = on_batch, on_event, counts
        self._same, self._other = same, other
        self._pass = PASS_EVERY if through else promises
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

    def bind_transport(self, actor: Sink) -> None:
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

    def send_nowait(self, item: Item) -> None:
        """Hand ``item`` to the layer now; raises trio.WouldBlock when its inbox is full."""
        self.offer(item, None)

    def offer_inline(self, item: Item) -> None:
        """`send_nowait` that runs the handler inline when the layer is ready, also where
        it was bound not ``eager`` (the top's send queue, which otherwise lets sends made
        meanwhile coalesce): for one latency-bound item, such as an RPC request."""
        layer = self._on_request
        if ready(layer, self):
            layer.pass_or_inline(self, item, None)
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
        if ready(layer, self):
            layer.pass_or_inline(self, item, now)
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
        layer = self._layer
        if ready(layer, self):
            if self._root and _after is None:
                after: list[Callable[[], None]] = []
                _after = after
                try:
                    layer.pass_or_inline(self, item, None)
                finally:
                    _run_after(after)
            else:
                layer.pass_or_inline(self, item, None)
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


class Outbox:
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
                if not (  # `ready(layer, out)`, spelt out: this is every hop's path, where
                    # the call cost 1-2% of an RPC round trip (53 calls each); the test
                    # test_the_hop_path_spells_out_ready_exactly holds it to `ready`
                    layer is not None
                    and layer.ready
                    and not out.queued
                    and not out._same._rest
                    and len(out._other._rest) <= MAX_CROSS_BACKLOG
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
                if (  # the batch goes past the layer: see `passes`
                    mode
                    and batch is not None
                    and not (proto := layer.protocol)._down_out
                    and not proto._up_out
                    and (mode == PASS_EVERY or passes(proto, mode, batch, out._pid))
                ):
                    counts = out._counts
                    counts[0] += 1
                    counts[1] += size
                    if not size:
                        break
                    box = out._same
                    out = box._out
                    continue
                layer.run_inline(out, item, now)
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


def coalesce(batch: list[Message], inlet: Inlet) -> tuple[list[Message], Item | None]:
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
