"""Where delivered messages go: the `Received` record and the sinks that take them.

The channel's dispatcher hands messages (and views) to a `Sink` in delivery
order. `Inbox`, the default, is the bounded queue `Channel.receive` reads; a
group actor plugs in its own. A sink also decides *when* state may be taken:
only once the application has finished everything handed to it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import trio

from triogroups._cadence import QUEUE_CHECKPOINT_EVERY, due
from triogroups._channel._errors import ChannelClosed
from triogroups.address import Address
from triogroups.view import View

__all__ = ["Inbox", "Received", "Sink", "received"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Received:
    """A message delivered to the application.

    ``payload`` is decoded (bytes stay bytes; msgpack values come back with
    tuples as lists); ``raw`` is the encoded payload without its tag.
    ``multicast`` is False for a message sent to this member only.
    """

    src: Address
    payload: Any
    raw: bytes
    oob: bool = False
    multicast: bool = True


_new = object.__new__
_SET_SRC, _SET_PAYLOAD, _SET_RAW, _SET_OOB, _SET_MULTICAST = (
    Received.__dict__[field].__set__ for field in ("src", "payload", "raw", "oob", "multicast")
)


def received(src: Address, payload: Any, raw: bytes, oob: bool, multicast: bool) -> Received:
    """``Received(src, payload, raw, oob, multicast)`` at half the cost.

    Every delivered message makes one, and a frozen dataclass's ``__init__``
    goes through ``object.__setattr__`` per field; this sets the slots
    directly (tests/channel/test_channel_api.py checks it equals the plain
    constructor with every slot set).
    """
    item = _new(Received)
    _SET_SRC(item, src)
    _SET_PAYLOAD(item, payload)
    _SET_RAW(item, raw)
    _SET_OOB(item, oob)
    _SET_MULTICAST(item, multicast)
    return item


class Sink(Protocol):
    """Where the dispatcher hands what the application consumes, in delivery order.

    ``snapshot(take)`` runs ``take`` once the application has finished with
    everything handed over so far and before it sees anything later (the
    dispatcher hands nothing over meanwhile): that is where state is taken.
    """

    async def deliver(self, item: Received) -> None: ...

    async def view(self, view: View) -> None: ...

    async def snapshot(self, take: Callable[[], Awaitable[_T]]) -> _T: ...

    def close(self) -> None: ...


class Inbox:
    """The default sink: a bounded queue that `Channel.receive` reads.

    The application has *finished* a message when it calls ``receive``
    again; it is idle when it has finished every message handed to the
    queue (counted as they go in, so one on its way to a waiting reader is
    not finished yet).

    Neither side pays a scheduler pass per message while the queue has
    room or messages: the dispatcher puts a whole batch in, and the reader
    wakes once and takes everything ready (a checkpoint every
    `QUEUE_CHECKPOINT_EVERY` messages keeps both fair and cancellable).
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"receive_buffer must be >= 1, got {size}")
        self._send, self._recv = trio.open_memory_channel[Received](size)
        self._delivered = 0
        self._returned = 0
        self._finished = 0
        self._closed = False
        self._changed: trio.Event | None = None  # set while `snapshot` waits
        self.dropped = 0

    async def deliver(self, item: Received) -> None:
        if self.offer(item):
            return
        try:
            await self._send.send(item)
        except trio.BrokenResourceError:
            self.dropped += 1
            return
        self._delivered += 1

    def offer(self, item: Received) -> bool:
        """`deliver` without awaiting; False (nothing done) when the queue is full or a
        checkpoint is due."""
        if due(self._delivered, QUEUE_CHECKPOINT_EVERY):
            return False
        try:
            self._send.send_nowait(item)
        except trio.WouldBlock:
            return False
        except trio.BrokenResourceError:
            self.dropped += 1
            return True
        self._delivered += 1
        return True

    def put_nowait(self, item: Received) -> bool:
        """Put ``item`` in the queue if it has room, without `offer`'s checkpoint cadence
        (for a caller that checkpoints on its own); False (nothing done) when full."""
        try:
            self._send.send_nowait(item)
        except trio.WouldBlock:
            return False
        except trio.BrokenResourceError:
            self.dropped += 1
            return True
        self._delivered += 1
        return True

    async def view(self, view: View) -> None:
        """Views reach a reading application through `Channel.view` and `Channel.views`."""

    async def snapshot(self, take: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``take`` once the reader has finished every message handed over."""
        while not self._closed and self._finished != self._delivered:
            if self._changed is None:
                self._changed = trio.Event()
            await self._changed.wait()
        if self._closed:
            raise ChannelClosed("the channel closed before its application was idle")
        return await take()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.dropped += self.depth
        self._recv.close()
        if self._changed is not None:
            self._changed.set()

    @property
    def depth(self) -> int:
        return self._send.statistics().current_buffer_used

    def _finish(self) -> None:
        """The reader is back: everything returned so far is finished."""
        if self._finished != self._returned:
            self._finished = self._returned
            if self._changed is not None:
                self._changed.set()
                self._changed = None

    async def receive(self) -> Received:
        self._finish()
        try:
            if not due(self._returned, QUEUE_CHECKPOINT_EVERY):
                try:
                    item = self._recv.receive_nowait()
                except trio.WouldBlock:
                    item = await self._recv.receive()
            else:
                item = await self._recv.receive()
        except (trio.ClosedResourceError, trio.EndOfChannel):
            raise ChannelClosed("the channel is closed") from None
        self._returned += 1
        return item

    async def receive_batch(self, max_messages: int) -> list[Received]:
        """Wait for one message, then take every one ready, up to ``max_messages``."""
        batch = [await self.receive()]
        recv = self._recv
        while len(batch) < max_messages:
            try:
                batch.append(recv.receive_nowait())
            except (trio.WouldBlock, trio.ClosedResourceError, trio.EndOfChannel):
                break
        self._returned += len(batch) - 1
        return batch

    def receive_nowait(self) -> Received:
        self._finish()
        try:
            item = self._recv.receive_nowait()
        except (trio.ClosedResourceError, trio.EndOfChannel):
            raise ChannelClosed("the channel is closed") from None
        self._returned += 1
        return item
