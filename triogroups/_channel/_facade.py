"""The channel: what an application uses to be a member of a group.

A `Channel` (made by `open_channel`) sends to the group or to one member
(`Channel.send`), hands over messages (`Channel.receive`, ``async for``),
tracks membership (`Channel.view`, `Channel.views`) and carries group RPC
(`Channel.rpc`).

The channel is built by job, one module each, stacked as bases of `Channel`:
`_core` (the shared state), `_outgoing` (the send path), `_delivery` (the reader),
`_transfer` (state transfer), `_dispatcher` (delivery order), `_membership` (join and
leave). This module is the facade: construction, the receive side the application
reads, introspection, the narrow `ChannelLink` the RPC dispatcher gets, and the
four functions `open_channel` runs a channel's life with (`start_tasks`, `join`,
`shut`, `leave_timeout`): the channel owns its tasks.

The channel never interprets a protocol's header other than its own
(`StateHeader` and the application seqno, `RpcHeader`) and never touches the network
itself.
"""

from __future__ import annotations

import math
import weakref
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping, Set
from typing import Any, TypeVar

import trio

from triogroups._cadence import SEND_CHECKPOINT_EVERY, Cadence
from triogroups._channel._core import _ORDERED_BUFFER, Ordered, _log
from triogroups._channel._inbox import RECEIVE_BUFFER, Inbox, Received, Sink
from triogroups._channel._membership import Membership, leave_bound
from triogroups._channel._state import Alignment, StateProvider
from triogroups._channel._views import ViewIterator
from triogroups._errors import ChannelClosed
from triogroups._renamed import renamed
from triogroups._rpc import CallTable, Resume, RpcDispatcher, RpcServer
from triogroups.address import Address
from triogroups.message import Message
from triogroups.stack import Stack
from triogroups.transports._drops import DropLog
from triogroups.view import View

__all__ = ["Channel", "channel_close_timeout", "join", "shut", "start_tasks"]

_C = TypeVar("_C", bound=type)


def _one_class(cls: _C) -> _C:
    """``cls`` made again as one class that holds every method of its private bases itself.

    The channel's source is split by job into a chain of private bases (`_core` up to
    `_membership`), so that each module has one job and the type checker sees where each
    method comes from. At run time the application sees one `Channel`, as before the split:
    help() and pickles name no private class, and no method is looked up through the chain.
    Only the class's own annotations are kept (its bases' are declarations for the checker).
    """
    namespace: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for key, value in vars(klass).items():
            if key not in ("__dict__", "__weakref__", "__annotations__"):
                namespace[key] = value
    namespace["__annotations__"] = dict(vars(cls).get("__annotations__", {}))
    made: _C = type(cls)(cls.__name__, (), namespace)
    return made


@_one_class
class Channel(Membership):
    """A member of a group, as the application sees it. Made by `open_channel`.

    One task should read (`receive` or ``async for``); any number may send.
    """

    def __init__(
        self,
        stack: Stack,
        *,
        allow_pickle: bool = False,
        state: StateProvider | None = None,
        handlers: Mapping[str, Callable[..., Any]] | None = None,
        receive_buffer: int = RECEIVE_BUFFER,
        connect_timeout: float = 60.0,
        state_timeout: float = 30.0,
        close_timeout: float | None = None,
        sink: Sink | None = None,
        join_timeout: float | None = None,
        leave_timeout: float | None = None,
    ) -> None:
        connect_timeout = renamed(
            "Channel()",
            "join_timeout",
            join_timeout,
            "connect_timeout",
            connect_timeout,
            default=60.0,
        )
        close_timeout = renamed(
            "Channel()",
            "leave_timeout",
            leave_timeout,
            "close_timeout",
            close_timeout,
            default=None,
        )
        for label, value in (
            ("connect_timeout", connect_timeout),
            ("state_timeout", state_timeout),
            ("close_timeout", 1.0 if close_timeout is None else close_timeout),
        ):
            if not 0 < value < math.inf:
                raise ValueError(f"{label} must be a finite number > 0, got {value}")
        self._connect_timeout = connect_timeout
        self._state_timeout = state_timeout
        self._close_timeout = leave_bound(stack.config) if close_timeout is None else close_timeout
        if state is not None and not isinstance(state, StateProvider):
            raise TypeError(
                f"state must have get_state() and set_state(), got {type(state).__name__}"
            )
        self._stack = stack
        self.allow_pickle = allow_pickle
        self._provider = state
        self._inbox = Inbox(receive_buffer)
        self._sink = self._inbox if sink is None else sink
        self._ordered_send, self._ordered_recv = trio.open_memory_channel[Ordered | Resume](
            _ORDERED_BUFFER + 2
        )  # + a `Resume` and a flush (`_serve_pending`)
        self._unfinished = 0
        self._reading = False
        self._pending = None
        self._failure = None
        self._failed = trio.Event()
        self._view = None
        self._suspected = set()
        self._watches = weakref.WeakSet()
        self._nursery = None
        self._closing = False
        self._left = trio.Event()
        self._leave_flushed = None
        self._send_lock = trio.StrictFIFOLock()
        self._waiting_sends = set()
        self._outgoing = []
        self._flush_wake = None
        self._cadence = Cadence(SEND_CHECKPOINT_EVERY)
        self._seqno = 0
        self._align = Alignment()
        self._limit = None
        self._counters = defaultdict(int)
        self._drops = DropLog(_log, f"channel {stack.name or stack.cluster}")
        self._membership_changed = trio.Event()
        self._refuses_pickle = set()
        self._told_pickle_refused = set()
        self._reset_membership()
        link = _RpcLink(self)
        self._rpc_server = RpcServer(link)
        self._rpc_calls = CallTable(link)
        self.rpc = RpcDispatcher(self._rpc_server, self._rpc_calls)
        for method, fn in (handlers or {}).items():
            self.rpc.register(method, fn)
        stack.on_incarnation(self._new_incarnation)
        stack.deliver_to(self._read_now)

    def views(self) -> ViewIterator:
        """An async iterator over views: the current one, then each newly installed one.

        A consumer that falls more than 64 views behind loses the oldest
        (counted in its ``skipped``). It ends when the channel closes; on a
        closed channel it is empty.
        """
        if self._closing:
            watch = ViewIterator(None)
            watch._close()
            return watch
        watch = ViewIterator(self._view)
        self._watches.add(watch)
        return watch

    def stats(self) -> dict[str, Any]:
        """A plain snapshot of the channel's counters (the stack has its own `Stack.stats`)."""
        return {
            "cluster": self.cluster,
            "address": str(self._stack.address) if self._stack.incarnation else None,
            "view": str(self._view.view_id) if self._view else None,
            "members": len(self._view) if self._view else 0,
            "closed": self._closing,
            "receive_queue": self._inbox.depth,
            "holding": len(self._held),
            "seqno": self._seqno,
            "outgoing": len(self._outgoing),
            "seqno_gaps": self._align.gaps,
            "dropped": {**self._drops.snapshot(), "after_close": self._inbox.dropped},
            **self._counters,
            "rpc": self.rpc.stats(),
        }

    def install_secret(self, secret: bytes) -> None:
        """Rotate the cluster's shared secret on this member, at run time
        (`Stack.install_secret`: install it on every member within half the
        transport's ``rollover_time``)."""
        self._stack.install_secret(secret)

    # --- receiving ----------------------------------------------------------------

    async def receive(self) -> Received:
        """The next message, in delivery order; raises ChannelClosed once closed.

        Returning to ``receive`` tells the channel the previous message is
        finished: state for a joiner is taken only between messages.
        """
        item = self._inbox.take_ready()
        return await self._inbox.receive() if item is None else item

    def receive_nowait(self) -> Received:
        """As `receive`; raises trio.WouldBlock when no message is waiting."""
        return self._inbox.receive_nowait()

    async def receive_batch(self, max_messages: int = 1024) -> list[Received]:
        """Every message ready, in delivery order, up to ``max_messages``; waits for the first.

        One wake-up for many messages: what an application that handles
        messages in bulk reads instead of `receive`. Asking again tells the
        channel the batch is finished (as `receive` does for one message).
        Raises ChannelClosed once closed.
        """
        if max_messages < 1:
            raise ValueError(f"max_messages must be >= 1, got {max_messages}")
        return await self._inbox.receive_batch(max_messages)

    async def batches(self, max_messages: int = 1024) -> AsyncIterator[list[Received]]:
        """``async for batch in ch.batches()``: `receive_batch` until the channel closes."""
        while True:
            try:
                batch = await self.receive_batch(max_messages)
            except ChannelClosed:
                return
            yield batch

    def __aiter__(self) -> Channel:
        return self

    async def __anext__(self) -> Received:
        item = self._inbox.take_ready()
        if item is not None:
            return item
        try:
            return await self._inbox.receive()
        except ChannelClosed:
            raise StopAsyncIteration from None


class _RpcLink:
    """The channel as its RPC dispatcher sees it (`triogroups._rpc.ChannelLink`): RPC sits
    below the channel and reaches it through these members only."""

    __slots__ = ("_channel",)

    def __init__(self, channel: Channel) -> None:
        self._channel = channel

    @property
    def address(self) -> Address:
        return self._channel.address

    @property
    def view(self) -> View:
        return self._channel.view

    @property
    def suspected(self) -> Set[Address]:
        return self._channel._suspected

    @property
    def allow_pickle(self) -> bool:
        return self._channel.allow_pickle

    @property
    def nursery(self) -> trio.Nursery | None:
        return self._channel._nursery

    def check_open(self) -> None:
        self._channel._check_open()

    def check_pickle(self, to: Address | None) -> None:
        self._channel._check_pickle(to)

    def check_member(self, member: Address) -> None:
        self._channel._check_member(member)

    def check_size(self, size: int) -> None:
        self._channel._check_size(size)

    async def send(self, msg: Message, *, urgent: bool = False, join: bool = False) -> None:
        await self._channel._send_batch([msg], urgent=urgent, join=join)

    async def send_replies(self, msgs: list[Message]) -> None:
        await self._channel._send_batch(msgs, internal=True, urgent=True)

    def send_replies_nowait(self, msgs: list[Message]) -> None:
        self._channel._send_batch_nowait(msgs, urgent=True)


# --- a channel's life, as `open_channel` runs it ---------------------------------------------


async def start_tasks(channel: Channel, nursery: trio.Nursery) -> None:
    """Start the channel's tasks in ``nursery``: its stack (returns once the stack runs),
    then the reader, the dispatcher, the send flusher, RPC's timer and the task that
    raises an error of the reader's work run inline. They end when ``nursery`` is
    cancelled."""
    channel._nursery = nursery
    await nursery.start(channel._stack.run)
    nursery.start_soon(channel._read_loop)
    nursery.start_soon(channel._raise_failure)
    nursery.start_soon(channel._dispatch_loop)
    nursery.start_soon(channel._flush_loop)
    nursery.start_soon(channel._rpc_calls.expire_loop)


async def join(channel: Channel) -> None:
    """Join the group (`Channel._join`'s guarantees: in a view, and the state set)."""
    await channel._join()


def shut(channel: Channel) -> None:
    """Close everything the application waits on; the stack is not told."""
    channel._shut()


def channel_close_timeout(channel: Channel) -> float:
    """How long the channel's leave may take (what a signal exit waits at most)."""
    return channel._close_timeout
