"""Where delivered messages go: the `Received` record and the sinks that take them.

The channel's dispatcher hands messages (and views) to a `Sink` in delivery
order. `Inbox`, the default, is the bounded queue `Channel.receive` reads; a
group actor plugs in its own. A sink also decides *when* state may be taken:
only once the application has finished everything handed to it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, Protocol, TypeVar

import trio

from triogroups._cadence import QUEUE_CHECKPOINT_AFTER, QUEUE_CHECKPOINT_EVERY, QUEUE_CLOCK_EVERY
from triogroups._errors import ChannelClosed
from triogroups.address import Address
from triogroups.view import View

__all__ = ["RECEIVE_BUFFER", "Inbox", "Received", "Sink", "received"]

_T = TypeVar("_T")

#: Messages the channel's receive queue holds by default (``receive_buffer``). At full speed
#: an upward batch carries a few hundred messages and a member gets one from each socket per
#: scheduler pass; a queue that holds several passes' worth takes them without the
#: dispatcher's hop and lets the reader drain more per wake-up (with 256, three quarters of a
#: `bench_channel` member's deliveries overflowed to the dispatcher, and it spent ~15% more
#: CPU per message).
#: An application that stops reading holds at most this many messages before back-pressure.
RECEIVE_BUFFER = 4096


class Received(NamedTuple):
    """A message delivered to the application.

    ``payload`` is decoded (bytes stay bytes; msgpack values come back with
    tuples as lists); ``raw`` is the encoded payload without its tag.
    ``multicast`` is False for a message sent to this member only.

    A NamedTuple, immutable: every delivered message makes one, and a tuple
    is built in one C call (`received`), where a frozen dataclass needed five
    slot writes (about 330 ns against 140 per message).
    """

    src: Address
    payload: Any
    raw: bytes
    oob: bool = False
    multicast: bool = True


_new = tuple.__new__


def received(src: Address, payload: Any, raw: bytes, oob: bool, multicast: bool) -> Received:
    """``Received(src, payload, raw, oob, multicast)`` without the NamedTuple's
    keyword-default ``__new__``: the one fast form, for every message the channel
    hands over (tests/channel/test_channel_batches.py checks it equals the plain
    constructor)."""
    return _new(Received, (src, payload, raw, oob, multicast))


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

    A `deque` with parked readers and writers, not a Trio memory channel:
    neither side pays a scheduler pass, nor Trio's per-item bookkeeping,
    per message. Writers put whole runs (`put_nowait`, `deliver_all`); a
    reader takes what is queued with a plain call (`take_ready`), and goes
    through `receive` only to wait, to checkpoint once every
    `QUEUE_CHECKPOINT_EVERY` messages or `QUEUE_CHECKPOINT_AFTER` seconds (so
    it stays fair and cancellable, whatever its handler costs), or to wake a
    waiting writer (see ``_budget``). A writer that finds the
    queue full waits until the reader has taken it down to half (``_low``),
    then puts a run: one wake-up per half queue, not one per message, while
    the application is behind. The reader records that it finished what it
    took (for `snapshot`) when it comes back to `receive`; the fast path
    skips that, which is safe since state is taken only once the queue is
    empty and the reader is back.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"receive_buffer must be >= 1, got {size}")
        self._size = size
        self._low = size // 2  # a waiting writer resumes once the queue is down to this
        self._queue: deque[Received] = deque()
        self._readers = trio.lowlevel.ParkingLot()
        self._writers = trio.lowlevel.ParkingLot()
        # messages `take_ready` may return before the reader goes through `receive`: until
        # the clock is due to be asked or a checkpoint is due, and while a writer waits,
        # until the queue is down to `_low`
        self._budget = QUEUE_CLOCK_EVERY
        self._checked = 0  # `_returned` at the reader's last checkpoint
        self._yielded_at: float | None = None  # when the reader last checkpointed or waited
        self._delivered = 0
        self._returned = 0
        self._finished = 0
        self._closed = False
        self._changed: trio.Event | None = None  # set while `snapshot` waits
        self.dropped = 0

    # --- writing -------------------------------------------------------------------

    @property
    def room(self) -> int:
        """How many messages `put_nowait` takes now."""
        return self._size - len(self._queue)

    def put_nowait(self, items: list[Received]) -> None:
        """Put ``items`` (at most `room` of them) in the queue, in order, and wake a reader."""
        if self._closed:
            self.dropped += len(items)
            return
        self._queue.extend(items)
        self._delivered += len(items)
        if self._readers:
            self._readers.unpark(count=len(items))

    def offer(self, item: Received) -> bool:
        """`deliver` without awaiting; False (nothing done) when the queue is full."""
        if len(self._queue) >= self._size:
            return False
        self.put_nowait([item])
        return True

    async def deliver(self, item: Received) -> None:
        """`deliver_all` of one message (the `Sink` method)."""
        await self.deliver_all([item])

    async def deliver_all(self, items: list[Received]) -> None:
        """Put ``items`` in the queue, in order, waiting for room; once closed, they are
        dropped (counted). Cancelled, it may have put a first part of them."""
        done = 0
        while True:
            room = self._size - len(self._queue)
            if done == 0 and len(items) <= room:
                self.put_nowait(items)
                return
            if room:
                self.put_nowait(items[done : done + room])
                done += room
                if done >= len(items):
                    return
            if self._closed:
                self.dropped += len(items) - done
                return
            self._budget = min(self._budget, len(self._queue) - self._low)
            await self._writers.park()

    # --- state transfer and closing ---------------------------------------------------

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
        self.dropped += len(self._queue)
        self._queue.clear()
        self._budget = 0
        self._readers.unpark_all()
        self._writers.unpark_all()
        if self._changed is not None:
            self._changed.set()

    @property
    def depth(self) -> int:
        return len(self._queue)

    # --- reading -------------------------------------------------------------------

    def _finish(self) -> None:
        """The reader is back: everything returned so far is finished."""
        if self._finished != self._returned:
            self._finished = self._returned
            if self._changed is not None:
                self._changed.set()
                self._changed = None

    def _took(self) -> None:
        """After the reader took messages: wake waiting writers once the queue is down to
        ``_low``, and set how many the reader may take before its slow path again."""
        queued = len(self._queue)
        if self._writers and queued <= self._low:
            self._writers.unpark_all()
        budget = min(QUEUE_CHECKPOINT_EVERY - (self._returned - self._checked), QUEUE_CLOCK_EVERY)
        if self._writers:
            budget = min(budget, queued - self._low)
        self._budget = max(budget, 0)

    def take_ready(self) -> Received | None:
        """The next message if the reader may take it at once, without `receive` (see
        ``_budget``); else None. `Channel.receive` and ``async for`` try this first: a
        plain call costs less than awaiting a coroutine."""
        if self._budget:
            queue = self._queue
            if queue:
                self._budget -= 1
                self._returned += 1
                return queue.popleft()
        return None

    def _checkpoint_due(self) -> bool:
        """Whether a reader that finds messages queued must yield now: it took
        `QUEUE_CHECKPOINT_EVERY` since it last did, or `QUEUE_CHECKPOINT_AFTER` seconds
        passed (asked once every `QUEUE_CLOCK_EVERY` messages at most: see `_took`)."""
        if self._returned - self._checked >= QUEUE_CHECKPOINT_EVERY:
            return True
        now = trio.current_time()
        if self._yielded_at is None:  # the reader's first time here: the clock starts now
            self._yielded_at = now
            return False
        return now - self._yielded_at >= QUEUE_CHECKPOINT_AFTER

    async def receive(self) -> Received:
        """The next message: waits for one, checkpoints when due (`_checkpoint_due`), and
        does what a waiting writer or `snapshot` needs of the reader."""
        self._finish()
        queue = self._queue
        if self._writers and len(queue) <= self._low:  # `take_ready` took it down to here
            self._writers.unpark_all()
        if queue and self._checkpoint_due():
            await trio.lowlevel.checkpoint()
            self._checked = self._returned
            self._yielded_at = trio.current_time()
        while not queue:
            if self._closed:
                raise ChannelClosed("the channel is closed")
            await self._readers.park()
            self._checked = self._returned
            self._yielded_at = trio.current_time()
        self._returned += 1
        item = queue.popleft()
        self._took()
        return item

    async def receive_batch(self, max_messages: int) -> list[Received]:
        """Wait for one message, then take every one ready, up to ``max_messages``."""
        first = self.take_ready()
        batch = [await self.receive() if first is None else first]
        queue = self._queue
        more = min(len(queue), max_messages - 1)
        if more:
            popleft = queue.popleft
            batch.extend([popleft() for _ in range(more)])
            self._returned += more
            self._took()
        return batch

    def receive_nowait(self) -> Received:
        self._finish()
        if self._closed:
            raise ChannelClosed("the channel is closed")
        if not self._queue:
            raise trio.WouldBlock
        self._returned += 1
        item = self._queue.popleft()
        self._took()
        return item
