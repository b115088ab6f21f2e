"""The channel's shared state, declared in one place, and the read-only view of it.

`ChannelCore` is the base of every job of the channel (`_outgoing`, `_delivery`,
`_transfer`, `_dispatcher`, `_membership`, and `Channel` in `_facade` over them):
it declares each field the jobs share, with its type and what it means, and the
properties that only read them. `Channel.__init__` sets them. Nothing here sends,
receives or awaits anything but the membership pulse.
"""

from __future__ import annotations

import logging
import weakref
from collections import defaultdict, deque
from collections.abc import Callable

import trio

from triogroups._cadence import Cadence
from triogroups._channel._inbox import Inbox, Received, Sink
from triogroups._channel._state import Alignment, StateProvider
from triogroups._channel._views import ViewIterator
from triogroups._rpc import CallTable, Resume, RpcDispatcher, RpcServer
from triogroups.address import Address
from triogroups.events import ViewChange
from triogroups.message import Flag, Message
from triogroups.protocols import ids
from triogroups.stack import Stack
from triogroups.transports._drops import DropLog
from triogroups.view import View

__all__ = ["ChannelCore"]

_log = logging.getLogger("triogroups.channel")

_STATE = ids.STATE_TRANSFER
_SEQNO = ids.APP_SEQNO  # an ordered multicast's application seqno: a plain int header
_RPC = ids.RPC
_OOB = int(Flag.OOB)
_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
_TAGGED = int(Flag.TAGGED)  # the payload carries its encoding tag (`decode_app_payload`)
_ORDERED_BUFFER = 4  # batches between the reader and the dispatcher

Ordered = list[Message | Received] | ViewChange
"""What the reader passes to the dispatcher: a batch in delivery order, or a view."""


class ChannelCore:
    """The fields every job of the channel shares (set by `Channel.__init__`)."""

    _stack: Stack
    allow_pickle: bool
    rpc: RpcDispatcher
    _rpc_server: RpcServer  # runs the requests delivered (the dispatcher, `_serve_now`)
    _rpc_calls: CallTable  # calls in flight, settled by the reader
    _provider: StateProvider | None  # the application's state, for state transfer
    _connect_timeout: float
    _state_timeout: float
    _close_timeout: float
    # receiving: the queue the application reads, and where delivered messages go
    _inbox: Inbox
    _sink: Sink
    # the reader -> dispatcher hop (`_delivery` -> `_dispatcher`)
    _ordered_send: trio.MemorySendChannel[Ordered | Resume]
    _ordered_recv: trio.MemoryReceiveChannel[Ordered | Resume]
    _unfinished: int  # items passed to the dispatcher and not yet handled
    _reading: bool  # the reader task is handling an item
    # items for the dispatcher that `_serve_pending` runs once the stack's chain returns
    _pending: list[Ordered] | None
    _failure: Exception | None  # raised by the reader's work run inline
    _failed: trio.Event
    # membership
    _view: View | None
    _suspected: set[Address]
    _watches: weakref.WeakSet[ViewIterator]
    _nursery: trio.Nursery | None
    _closing: bool
    _left: trio.Event
    _leave_flushed: bool | None  # from GMS's Disconnected
    _membership_changed: trio.Event
    _in_view: bool
    # sending (`_outgoing`)
    _send_lock: trio.StrictFIFOLock
    _waiting_sends: set[trio.CancelScope]  # application sends `_shut` ends
    _outgoing: list[Message]  # messages `send` accepted, for `_flush_loop` (stamped)
    _flush_wake: trio.Event | None  # wakes `_flush_loop`; None while it does not run
    _cadence: Cadence
    _seqno: int
    # pickles: receivers that refused ours, senders we told we refuse theirs
    _refuses_pickle: set[Address]
    _told_pickle_refused: set[Address]
    # state transfer (`_transfer`; the design is in `_state`)
    _align: Alignment
    _holding: bool
    _transferred: bool
    _held: deque[Message | View]
    _state_source: Address | None
    _state_requests: int
    # a plain dict subclass in C: `Counter` is a Python subclass, and `c[k] += 1` on it
    # costs 97 ns against 35 (Channel.send counts every message)
    _counters: defaultdict[str, int]
    _drops: DropLog

    def _reset_membership(self) -> None:
        """Start (again) as a member that has yet to join and, with state, to get it."""
        self._in_view = False
        self._holding = self._provider is not None
        self._transferred = not self._holding
        self._held = deque()
        self._state_source = None
        self._state_requests = 0
        self._pulse()

    def _pulse(self) -> None:
        """Wake `_join`: joined, state set, or starting over."""
        self._membership_changed.set()
        self._membership_changed = trio.Event()

    async def _wait_until(self, done: Callable[[], bool], timeout: float) -> bool:
        with trio.move_on_after(timeout):
            while not done():
                await self._membership_changed.wait()
        return done()

    # --- introspection ------------------------------------------------------------

    @property
    def stack(self) -> Stack:
        """The member's protocol stack (for its `Stack.stats` and protocols)."""
        return self._stack

    @property
    def cluster(self) -> str:
        """The name of the group this channel is a member of."""
        return self._stack.cluster

    @property
    def name(self) -> str:
        """This member's display name (also that of every address it gets)."""
        return self._stack.name

    @property
    def address(self) -> Address:
        """This member's address (a new one after the stack restarted)."""
        return self._stack.address

    @property
    def view(self) -> View:
        """The current view: updated as soon as the stack installs one."""
        if self._view is None:
            raise RuntimeError("the channel has not joined yet")
        return self._view

    @property
    def suspected(self) -> frozenset[Address]:
        """Members of the current view that failure detection suspects."""
        return frozenset(self._suspected)

    @property
    def closed(self) -> bool:
        """True once the channel is closing or closed: it sends and receives no more."""
        return self._closing
