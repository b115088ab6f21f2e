"""The channel: what an application uses to be a member of a group.

A `Channel` (made by `open_channel`) sends to the group or to one member
(`Channel.send`), hands over messages (`Channel.receive`, ``async for``),
tracks membership (`Channel.view`, `Channel.views`) and carries group RPC
(`Channel.rpc`).

Two tasks read what comes out of the stack. The *reader* handles what must
never wait behind the application: RPC responses, views (for `view` and RPC
failure detection), suspicions, the end of membership. While it is idle and
nothing waits for it, it runs in the stack's top layer's task instead
(`Stack.deliver_to`): an answer reaches its caller, a request the dispatcher,
without a task in between. It passes everything
ordered to the *dispatcher*, which hands messages to the application in
delivery order, runs RPC requests, and serves and applies state transfers
(the design and its guarantee are in `_state`). While the dispatcher is idle
(nothing passed to it is still unfinished) the reader hands plain
application messages to the receive queue itself, without the hop: the
order is the same, since the dispatcher would have handled them next and at
once. The first message of a batch that needs more (an RPC request, state,
a holding joiner, a full queue) and everything after it go to the dispatcher.

Back-pressure: received messages wait in a bounded queue of
``receive_buffer`` messages. When the application stops reading, the
dispatcher waits, the stack's channels fill, the stack stops reading from
the network, and flow control (UFC/MFC) or MCAST's window eventually block
the senders. Nothing is dropped on the way.

Sending: `Channel.send` usually returns without yielding (see `_cadence`) and
leaves the message in the channel's *outgoing* list; the *flusher* task hands
the whole list to the stack as one batch as soon as the sending task yields,
for whatever reason. A loop of sends thus goes down as batches of up to
`SEND_CHECKPOINT_EVERY` messages: each layer handles them in one call and the
transport bundles them into few datagrams, where handing each message down
alone cost every layer, the transport and every receiver a call per message.
Every other way down (`send_nowait`, `send_many`, RPC, state transfer,
leaving) takes what is outgoing first, so nothing overtakes a message sent
earlier, and a send that has to wait for the stack waits for it too.

This module never interprets a protocol's header other than its own
(`StateHeader` and the application seqno, `RpcHeader`) and never touches the network
itself.
"""

from __future__ import annotations

import inspect
import logging
import math
import weakref
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence, Set
from typing import Any, NamedTuple

import trio

from triogroups._cadence import SEND_CHECKPOINT_EVERY, Cadence
from triogroups._channel._inbox import RECEIVE_BUFFER, Inbox, Received, Sink, received
from triogroups._channel._state import (
    PICKLE_REFUSED,
    STATE_REQ,
    STATE_RSP,
    Alignment,
    StateHeader,
    StateProvider,
    first_gap,
)
from triogroups._channel._views import ViewIterator
from triogroups._errors import (
    ChannelClosed,
    JoinFailed,
    MessageTooLarge,
    NotAMember,
    StateTransferFailed,
)
from triogroups._layer import after_chain
from triogroups._payload import (
    PayloadError,
    decode_app_payload,
    decode_payload,
    encode_payload,
)
from triogroups._rpc import RPC_REQ, RpcDispatcher
from triogroups._rpc._dispatcher import Resume
from triogroups.address import Address
from triogroups.config import StackConfig
from triogroups.events import (
    Connect,
    Disconnect,
    Disconnected,
    Item,
    Suspect,
    Unsuspect,
    ViewChange,
)
from triogroups.message import Flag, Message
from triogroups.protocols import ids
from triogroups.protocols.frag import HEADROOM, Frag
from triogroups.stack import Stack
from triogroups.transports._drops import DropLog
from triogroups.view import View

__all__ = ["Channel"]

_log = logging.getLogger("triogroups.channel")


def leave_bound(config: StackConfig) -> float:
    """How long a graceful leave with ``config`` may take: GMS's flush and then its
    LEAVE_REQ, each at most its ``leave_timeout``, plus ``max_bundling_time`` and a
    second (2.0 s without GMS: nothing waits)."""
    layer = next((layer for layer in config.layers if layer.name == "GMS"), None)
    if layer is None:
        return 2.0
    gms: Any = layer.build()
    return float(2 * gms.leave_timeout + gms.max_bundling_time + 1.0)


_STATE = ids.STATE_TRANSFER
_SEQNO = ids.APP_SEQNO  # an ordered multicast's application seqno: a plain int header
_RPC = ids.RPC
_OOB = int(Flag.OOB)
_tuple_new = tuple.__new__  # `Received(...)` in one C call: see `_ready_run`
_fresh = Message._fresh
_new_message = object.__new__  # `Message` with its slots set in line: see `send`
_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
_TAGGED = int(Flag.TAGGED)  # the payload carries its encoding tag (`decode_app_payload`)
_ORDERED_BUFFER = 4  # batches between the reader and the dispatcher
#: Messages `send` leaves for the flusher at most; beyond, it sends them at once. A task
#: that sends in a loop yields every SEND_CHECKPOINT_EVERY calls, so this is a bound for
#: tasks that take turns with the flusher unluckily, not the usual batch size.
_MAX_OUTGOING = 2 * SEND_CHECKPOINT_EVERY
_GENERAL = object()  # `Channel._ready`: this message takes the general, awaiting path
_STATE_RETRY_FIRST = 0.5
_STATE_RETRY_MAX = 5.0


class Channel:
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
        join_timeout: float = 60.0,
        state_timeout: float = 30.0,
        leave_timeout: float | None = None,
        sink: Sink | None = None,
    ) -> None:
        for label, value in (
            ("join_timeout", join_timeout),
            ("state_timeout", state_timeout),
            ("leave_timeout", 1.0 if leave_timeout is None else leave_timeout),
        ):
            if not 0 < value < math.inf:
                raise ValueError(f"{label} must be a finite number > 0, got {value}")
        self._join_timeout = join_timeout
        self._state_timeout = state_timeout
        self._leave_timeout = leave_bound(stack.config) if leave_timeout is None else leave_timeout
        if state is not None and not isinstance(state, StateProvider):
            raise TypeError(
                f"state must have get_state() and set_state(), got {type(state).__name__}"
            )
        self._stack = stack
        self.allow_pickle = allow_pickle
        self._provider = state
        self._inbox = Inbox(receive_buffer)
        self._sink: Sink = self._inbox if sink is None else sink
        self._ordered_send, self._ordered_recv = trio.open_memory_channel[
            list[Message | Received] | ViewChange | Resume
        ](_ORDERED_BUFFER + 2)  # + a `Resume` and a flush (`_serve_pending`)
        self._unfinished = 0  # items passed to the dispatcher and not yet handled
        self._reading = False  # the reader task is handling an item
        # items for the dispatcher that `_serve_pending` runs once the stack's chain returns
        self._pending: list[list[Message | Received] | ViewChange] | None = None
        self._failure: Exception | None = None  # raised by the reader's work run inline
        self._failed = trio.Event()
        self._view: View | None = None
        self._suspected: set[Address] = set()
        self._watches: weakref.WeakSet[ViewIterator] = weakref.WeakSet()
        self._nursery: trio.Nursery | None = None
        self._closing = False
        self._left = trio.Event()
        self._leave_flushed: bool | None = None  # from GMS's Disconnected
        self._send_lock = trio.StrictFIFOLock()
        self._waiting_sends: set[trio.CancelScope] = set()  # application sends `_shut` ends
        # messages `send` accepted and `_flush_loop` has yet to hand to the stack (stamped)
        self._outgoing: list[Message] = []
        # set to wake `_flush_loop`; None while it does not run (`send` then sends at once)
        self._flush_wake: trio.Event | None = None
        self._cadence = Cadence(SEND_CHECKPOINT_EVERY)
        self._seqno = 0
        self._align = Alignment()
        self._limit: _SizeLimit | None = None
        # a plain dict subclass in C: `Counter` is a Python subclass, and `c[k] += 1` on it
        # costs 97 ns against 35 (Channel.send counts every message)
        self._counters: defaultdict[str, int] = defaultdict(int)
        self._drops = DropLog(_log, f"channel {stack.name or stack.cluster}")
        self._membership_changed = trio.Event()
        self._refuses_pickle: set[Address] = set()
        self._told_pickle_refused: set[Address] = set()
        self._reset_membership()
        self.rpc: RpcDispatcher = RpcDispatcher(_RpcLink(self))
        for method, fn in (handlers or {}).items():
            self.rpc.register(method, fn)
        stack.on_incarnation(self._new_incarnation)
        stack.deliver_to(self._read_now)

    def _reset_membership(self) -> None:
        """Start (again) as a member that has yet to join and, with state, to get it."""
        self._in_view = False
        self._holding = self._provider is not None
        self._transferred = not self._holding
        self._held: deque[Message | View] = deque()
        self._state_source: Address | None = None
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

    # --- sending ------------------------------------------------------------------

    async def send(
        self,
        payload: Any,
        to: Address | None = None,
        *,
        pickle: bool = False,
        oob: bool = False,
    ) -> None:
        """Send ``payload`` to the group (``to=None``) or to the member ``to``.

        Bytes travel as they are, other values as msgpack, or with cloudpickle
        when ``pickle`` is true. Pickle is a group-wide choice: every member
        opens its channel with ``allow_pickle=True``, and a channel without it
        refuses to send pickles (ValueError) as it refuses to unpickle them.
        ``to`` is an `Address` taken from the view (``ch.view.members``), never
        a member's name: names need not be unique and a restarted member keeps
        its name under a new address.
        Awaits while the stack cannot take more (full channels, flow control,
        MCAST's window). Otherwise most calls return without yielding to the
        scheduler, unlike Trio's own ``MemorySendChannel.send``, which always
        checkpoints. The message waits in the channel until this task yields
        (at its next checkpoint, whatever it awaits), then leaves with every
        message sent meanwhile as one batch. Every 64th call
        (`SEND_CHECKPOINT_EVERY`) checkpoints, so a loop of sends stays
        cancellable, lets other tasks run and hands its messages over in
        batches of at most 64. Cancellation-safe: a cancelled send was not
        sent; one that returned is handed over even if the task is cancelled
        next. Raises ChannelClosed, NotAMember (``to`` is not in the view),
        MessageTooLarge, TypeError for a ``to`` that is not an Address or a
        payload that cannot be encoded, ValueError for ``pickle`` without
        ``allow_pickle``.
        """
        plain = type(payload) is bytes and to is None and not pickle and not oob
        if plain:
            # An ordered multicast of bytes, what most calls send: `_app_message` and,
            # below, `_stamp` spelt out (this path costs ~1 us, each call saved ~60 ns).
            if self._closing:
                raise ChannelClosed("the channel is closed")
            limit = self._limit
            if limit is None or limit.incarnation != self._stack.incarnation:
                limit = self._new_limit()
            size = len(payload)
            if size > (limit.fixed if limit.frag is None else limit.frag.max_message_size):
                limit.check(size)
            msg = _new_message(Message)
            msg.dest = msg.src = None
            msg.flags = 0
            msg.headers = {}
            msg.payload = payload
        else:
            msg = self._app_message(payload, to, pickle, oob)
        # `_send_batch` for one message, inline: this is the call applications make per
        # message, so it skips two coroutines, a list and `_stamp_all` on its way down.
        if self._cadence.tick():
            await trio.lowlevel.checkpoint()
            self._check_open()
        if not self._send_lock.locked():
            wake = self._flush_wake
            if wake is not None:
                outgoing = self._outgoing
                if len(outgoing) < _MAX_OUTGOING:
                    if plain:  # `_stamp`, inline
                        self._seqno = seqno = self._seqno + 1
                        msg.headers[_SEQNO] = seqno
                    else:
                        self._stamp(msg)
                    outgoing.append(msg)
                    self._counters["sent"] += 1
                    if not wake.is_set():
                        wake.set()
                    return
                try:  # what waits, and this, at once
                    self._send_batch_nowait([msg])
                    return
                except trio.WouldBlock:
                    await self._send_waiting([msg])
                    return
            stamped = self._stamp(msg)
            try:
                self._stack.send_nowait([msg])
            except trio.WouldBlock:
                self._seqno -= stamped
            else:
                self._counters["sent"] += 1
                return
        await self._send_waiting([msg])

    def send_nowait(
        self,
        payload: Any,
        to: Address | None = None,
        *,
        pickle: bool = False,
        oob: bool = False,
    ) -> None:
        """As `send`, but raises trio.WouldBlock instead of waiting (nothing was sent)."""
        self._send_nowait(self._app_message(payload, to, pickle, oob))

    async def send_many(
        self,
        payloads: Iterable[Any],
        to: Address | None = None,
        *,
        pickle: bool = False,
        oob: bool = False,
    ) -> None:
        """Send every payload in ``payloads``, in order, as `send` sends one.

        They go down the stack as one batch, so each layer handles them in
        one call: for an application that has many messages at hand, the
        cheapest way to send. Every payload is checked before any is sent
        (the errors are those of `send`, and then nothing was sent).
        Awaits while the stack cannot take more. Cancellation-safe: a
        cancelled send_many sent nothing.
        """
        msgs = [self._app_message(payload, to, pickle, oob) for payload in payloads]
        if msgs:
            await self._send_batch(msgs)

    def _app_message(self, payload: Any, to: Address | None, pickle: bool, oob: bool) -> Message:
        if self._closing:  # `_check_open`, inline: this runs for every message sent
            raise ChannelClosed("the channel is closed")
        if to is not None:
            self._check_member(to)
        if pickle:
            self._check_pickle(to)
        if type(payload) is bytes:  # what most sends carry: as it is, untagged
            data, flags = payload, 0
        else:
            data, flags = encode_payload(payload, pickle=pickle), _TAGGED
        self._check_size(len(data))
        return _fresh(to, data, flags | _OOB if oob else flags)

    def _check_open(self) -> None:
        if self._closing:
            raise ChannelClosed("the channel is closed")

    def _check_pickle(self, to: Address | None) -> None:
        """Raise ValueError unless this channel and the receivers take part in pickling.

        A receiver that refused a pickle told us so (PICKLE_REFUSED); while it
        is in the view, pickles to it or to the group are refused here.
        """
        if not self.allow_pickle:
            raise ValueError(
                "pickle=True needs allow_pickle=True, on this channel and on every receiver's"
            )
        refusing = self._refuses_pickle if to is None else self._refuses_pickle & {to}
        if refusing:
            names = ", ".join(sorted(str(m) for m in refusing))
            raise ValueError(f"pickle=True refused: allow_pickle is off at {names}")

    def _check_member(self, member: Address) -> None:
        """Raise NotAMember unless ``member`` is in the current view (TypeError if no Address)."""
        if not isinstance(member, Address):
            raise TypeError(
                f"to must be an Address from the view (ch.view.members), "
                f"got {type(member).__name__} {member!r}"
            )
        view = self.view
        if member not in view:
            raise NotAMember(member, f"{member} is not a member of view {view.view_id}")

    def _check_size(self, size: int) -> None:
        """Raise MessageTooLarge if a payload of ``size`` bytes cannot be sent.

        The limit is FRAG's ``max_message_size`` when FRAG is in the stack,
        else what one transport bundle carries (``max_bundle_size`` less room
        for headers), since without FRAG a larger message could not leave.
        """
        limit = self._limit
        if limit is None or limit.incarnation != self._stack.incarnation:
            limit = self._new_limit()
        limit.check(size)

    def _new_limit(self) -> _SizeLimit:
        """The size limit of the stack's current incarnation, kept for the next sends."""
        self._limit = limit = _size_limit(self._stack)
        return limit

    def _stamp(self, msg: Message) -> bool:
        """Give an ordered multicast the next application seqno; False for other messages."""
        if msg.dest is not None or msg.flags & (_OOB | _DONT_LOOPBACK):
            return False
        self._seqno += 1
        msg.headers[_SEQNO] = self._seqno
        return True

    async def _send(
        self, msg: Message, *, internal: bool = False, urgent: bool = False, join: bool = False
    ) -> None:
        """Pass one message down (see `_send_batch`); ``urgent``: someone waits on it, so an
        idle top layer takes it at once (`Stack.send_nowait` with ``inline``); ``join``: it
        may join the batch waiting in the send queue (`Stack.send_nowait` with ``join``)."""
        await self._send_batch([msg], internal=internal, urgent=urgent, join=join)

    def _send_nowait(self, msg: Message) -> None:
        self._send_batch_nowait([msg])

    async def _send_batch(
        self,
        msgs: list[Message],
        *,
        internal: bool = False,
        urgent: bool = False,
        join: bool = False,
    ) -> None:
        """Pass ``msgs`` down as one batch (see `_stamp`).

        Seqnos must reach the stack in order, so a send that has to wait
        holds a FIFO lock, and a cancelled one gives its seqnos back.
        """
        if self._cadence.tick():
            await trio.lowlevel.checkpoint()
        if not internal:
            self._check_open()
        if not self._send_lock.locked():
            try:
                self._send_batch_nowait(msgs, urgent, join)
                return
            except trio.WouldBlock:
                pass
        await self._send_waiting(msgs, internal)

    async def _send_waiting(self, msgs: list[Message], internal: bool = False) -> None:
        """Pass ``msgs`` down once the stack has room, senders in the order they came
        (what is outgoing first).

        An application's send that still waits when the channel closes raises
        ChannelClosed and sent nothing, as a Trio channel's waiting senders do; the
        channel's own (``internal``: RPC answers, state) keep waiting while it leaves."""
        if internal:
            await self._send_in_turn(msgs)
            return
        scope = trio.CancelScope()
        self._waiting_sends.add(scope)
        try:
            with scope:
                await self._send_in_turn(msgs, check_open=True)
                return
        finally:
            self._waiting_sends.discard(scope)
        raise ChannelClosed("the channel closed while the send waited")

    async def _send_in_turn(self, msgs: list[Message], check_open: bool = False) -> None:
        """`_send_waiting`'s work: under the send lock, what is outgoing first."""
        async with self._send_lock:
            if check_open:
                self._check_open()  # it may have closed while this send waited for the lock
            stamped = self._stamp_all(msgs)
            outgoing = self._take_outgoing()
            try:
                await self._stack.send(outgoing + msgs if outgoing else msgs)
            except BaseException:
                self._seqno -= stamped
                self._put_back(outgoing)
                raise
        self._counters["sent"] += len(msgs)

    def _send_batch_nowait(
        self, msgs: list[Message], urgent: bool = False, join: bool = False
    ) -> None:
        """Pass ``msgs`` down now, after what is outgoing; trio.WouldBlock if the stack
        cannot take them (nothing was sent, what was outgoing still is)."""
        if self._send_lock.locked():
            raise trio.WouldBlock
        stamped = self._stamp_all(msgs)
        outgoing = self._outgoing
        try:
            self._stack.send_nowait(outgoing + msgs if outgoing else msgs, inline=urgent, join=join)
        except trio.WouldBlock:
            self._seqno -= stamped
            raise
        if outgoing:
            self._outgoing = []
        self._counters["sent"] += len(msgs)

    def _take_outgoing(self) -> list[Message]:
        """What `send` left for the flusher, now the caller's to send first."""
        outgoing = self._outgoing
        if outgoing:
            self._outgoing = []
        return outgoing

    def _put_back(self, outgoing: list[Message]) -> None:
        """``outgoing`` (taken with `_take_outgoing`) could not be sent: it leaves first,
        with the next flush. Only a holder of the send lock takes and puts back, and
        `send` adds nothing while the lock is held, so nothing came after it."""
        if outgoing:
            self._outgoing[:0] = outgoing
            if self._flush_wake is not None:
                self._flush_wake.set()

    async def _flush_loop(self) -> None:
        """The flusher: hand what `send` left in `_outgoing` to the stack as one batch,
        once the sending task has yielded; runs for as long as the channel."""
        wake = self._flush_wake = trio.Event()
        try:
            while True:
                await wake.wait()
                wake = self._flush_wake = trio.Event()
                await self._flush_outgoing()
        finally:
            self._flush_wake = None

    async def _flush_outgoing(self) -> None:
        """Hand what is outgoing to the stack, waiting for room if it has none."""
        if not self._outgoing:
            return
        try:
            self._send_batch_nowait([])  # what is outgoing, and nothing after it
            return
        except trio.WouldBlock:
            pass
        async with self._send_lock:
            outgoing = self._take_outgoing()
            if outgoing:
                try:
                    await self._stack.send(outgoing)
                except BaseException:
                    self._put_back(outgoing)
                    raise

    def _stamp_all(self, msgs: list[Message]) -> int:
        """`_stamp` every message; how many seqnos that took."""
        if len(msgs) == 1:
            return int(self._stamp(msgs[0]))
        return sum(self._stamp(msg) for msg in msgs)

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

    # --- the reader -----------------------------------------------------------------

    async def _read_loop(self) -> None:
        """Take what `_read_now` left in the stack's deliveries; pass on what is ordered,
        answer the rest now."""
        stack = self._stack
        while True:
            try:
                item = await stack.take()
            except trio.EndOfChannel:
                return
            self._reading = True
            if type(item) is list:
                rest = self._hand_over(item)
                if rest:
                    await self._pass_on(rest)
            elif isinstance(item, ViewChange):
                self._install_view(item.view)
                await self._pass_on(item)
            else:
                self._event(item)
            self._reading = False

    def _read_now(self, item: Item) -> bool:
        """The reader's work on ``item``, in the stack's task (`Stack.deliver_to`); False
        (nothing done) while the reader task is busy or the dispatcher could not take
        what is ordered without waiting. An error is raised by `_raise_failure`."""
        if self._reading or self._unfinished >= _ORDERED_BUFFER:
            return False
        try:
            if type(item) is list:
                rest = self._hand_over(item)
                if rest:
                    self._pass_now(rest)
            elif isinstance(item, ViewChange):
                self._install_view(item.view)
                self._pass_now(item)
            else:
                self._event(item)
        except Exception as exc:
            if self._failure is None:
                self._failure = exc
                self._failed.set()
        return True

    def _pass_now(self, item: list[Message | Received] | ViewChange) -> None:
        """`_pass_on` without awaiting (there is room: see `_read_now`). A batch that starts
        with an RPC request, given while the dispatcher is idle, waits instead until the
        stack's chain of handlers has returned (`after_chain`), for `_serve_pending` to
        run it in this task: the answer goes down inline, without waking the dispatcher.
        What comes meanwhile queues behind it, so the order holds."""
        self._unfinished += 1
        pending = self._pending
        if pending is not None:
            pending.append(item)
            return
        if (
            self._unfinished == 1
            and type(item) is list
            and type(first := item[0]) is Message
            and _RPC in first.headers
            and after_chain(self._serve_pending)
        ):
            self._pending = [item]
            return
        self._ordered_send.send_nowait(item)  # room: see _read_now

    def _serve_pending(self) -> None:
        """Do the dispatcher's work on the items `_pass_now` kept, in this task, as far as
        it needs no await: RPC requests with synchronous handlers and application
        messages the receive queue has room for; then send the answers down as one
        batch. From the first thing that needs more, the rest goes to the dispatcher,
        in order (as do answers the stack cannot take now)."""
        pending, self._pending = self._pending, None
        assert pending is not None
        rpc = self.rpc
        holder, rpc._holder = rpc._holder, trio.lowlevel.current_task()
        try:
            for i, item in enumerate(pending):
                resume: Resume | None = None
                left: list[Message | Received] | ViewChange = item
                if type(item) is list:
                    resume, left = self._serve_now(item)
                    if resume is None and not left:
                        self._unfinished -= 1
                        continue
                send = self._ordered_send.send_nowait
                if resume is not None:
                    self._unfinished += 1
                    send(resume)
                if left:
                    send(left)
                else:
                    self._unfinished -= 1
                for later in pending[i + 1 :]:
                    send(later)
                break
            if not rpc._flush_now():
                self._unfinished += 1
                self._ordered_send.send_nowait([])  # the dispatcher flushes after a batch
        except Exception as exc:
            if self._failure is None:
                self._failure = exc
                self._failed.set()
        finally:
            rpc._holder = holder

    def _serve_now(
        self, batch: list[Message | Received]
    ) -> tuple[Resume | None, list[Message | Received]]:
        """The dispatcher's loop over ``batch`` as far as it needs no await: what is left
        for the dispatcher (nothing when all is done), after the `Resume` of a request
        whose handler returned an awaitable, if one did."""
        inbox = self._inbox
        rpc = self.rpc
        for i, msg in enumerate(batch):
            if self._closing:
                return None, []
            if type(msg) is Received:
                if inbox.offer(msg):
                    continue
                return None, batch[i:]
            assert type(msg) is Message
            ready = self._ready(msg)
            if ready is _GENERAL:
                hdr = msg.headers.get(_RPC)
                if (
                    hdr is None
                    or hdr.type != RPC_REQ
                    or self._holding
                    or _SEQNO in msg.headers
                    or msg.flags & _OOB
                ):
                    return None, batch[i:]
                done = rpc._run_now(msg, hdr)
                if done is False:
                    return None, batch[i:]
                if type(done) is Resume:
                    return done, batch[i + 1 :]
            elif ready is not None and not inbox.offer(ready):  # type: ignore[arg-type]
                return None, [ready, *batch[i + 1 :]]  # type: ignore[list-item]
        return None, []

    async def _raise_failure(self) -> None:
        """Raise, in the channel's nursery, an error of the reader's work run inline."""
        await self._failed.wait()
        assert self._failure is not None
        raise self._failure

    def _event(self, item: Item) -> None:
        if isinstance(item, Suspect):
            members = [m for m in item.members if self._view and m in self._view]
            self._suspected.update(members)
            self.rpc._gone(members, "suspected")
        elif isinstance(item, Unsuspect):
            self._suspected.discard(item.member)
        elif isinstance(item, Disconnected):
            self._leave_flushed = item.flushed
            self._left.set()

    def _hand_over(self, batch: list[Message]) -> list[Message | Received]:
        """Answer RPC responses; while the dispatcher is idle, put plain application
        messages into the receive queue, as many as it has room for; return the rest, in
        order, for the dispatcher.

        Each run of plain messages between responses goes into the queue in one call
        (`Inbox.put_nowait`); from the first message that needs more (an RPC request,
        state, a holding joiner, a full queue) on, everything but responses is left to
        the dispatcher.
        """
        inbox = self._inbox
        response = self.rpc._response
        i, n = 0, len(batch)
        if not (self._unfinished or self._closing or self._holding or self._sink is not inbox):
            handed = 0
            while i < n:
                msg = batch[i]
                hdr = msg.headers.get(_RPC)
                if hdr is not None:
                    if hdr.type == RPC_REQ:
                        break
                    response(msg, hdr)
                    i += 1
                    continue
                ready: list[Received] = []
                done = self._ready_run(batch, i, ready, inbox.room)
                if ready:
                    inbox.put_nowait(ready)
                    handed += len(ready)
                if done == i:
                    break
                i = done
            if handed:
                self._counters["direct"] += handed
            if i == n:
                return []
        rest: list[Message | Received] = []
        for msg in batch[i:] if i else batch:
            hdr = msg.headers.get(_RPC)
            if hdr is not None and hdr.type != RPC_REQ:
                response(msg, hdr)
            else:
                rest.append(msg)
        return rest

    def _ready_run(
        self, batch: Sequence[Message | Received], i: int, out: list[Received], limit: int
    ) -> int:
        """`_ready` for the run of plain application messages from ``batch[i]`` on, at
        most ``limit`` of them: appends what to hand over to ``out`` (nothing for one the
        state already contains) and returns the index of the first message not done.

        The caller has checked what holds for the whole run (not closing, not holding,
        the sink is the `Inbox`); counters move once per run. An untagged payload, what
        most applications send, is `decode_app_payload`'s first case, inlined. So is
        `Alignment.accept`'s usual case, once per run of one sender's next seqnos: a
        batch holds runs from one sender, and the table is written at the run's end
        instead of twice per message (each an `Address.__hash__` call); every other
        case goes to `accept`, with the table up to date. The `Received` records are
        built as `received` builds them, without its call.
        """
        allow_pickle = self.allow_pickle
        align = self._align
        delivered = align.delivered
        run_src: Address | None = None  # the sender of the current run of next seqnos
        last = 0  # run_src's last seqno accepted, not yet written to `delivered`
        append = out.append
        start = i
        contained = 0
        for msg in batch[i : i + limit] if i or limit < len(batch) else batch:
            if type(msg) is not Message:
                break
            headers = msg.headers
            src = msg.src
            if _STATE in headers or _RPC in headers or src is None:
                break
            data = msg.payload
            if not msg.flags & _TAGGED:
                value = body = data
            else:
                try:
                    value, body = decode_payload(data, allow_pickle=allow_pickle)
                except PayloadError:
                    break
            i += 1
            seqno = headers.get(_SEQNO)
            if seqno is not None:
                if src is run_src and seqno == last + 1:
                    last = seqno
                else:
                    if run_src is not None:
                        delivered[run_src] = last
                        run_src = None
                    if seqno == delivered.get(src, 0) + 1:
                        run_src, last = src, seqno
                    elif not align.accept(src, seqno):
                        contained += 1
                        continue
            append(
                _tuple_new(Received, (src, value, body, (msg.flags & _OOB) != 0, msg.dest is None))
            )
        if run_src is not None:
            delivered[run_src] = last
        if contained:
            self._counters["dropped_in_state"] += contained
        if i - start > contained:
            self._counters["delivered"] += i - start - contained
        return i

    async def _pass_on(self, item: list[Message | Received] | ViewChange) -> None:
        """Give ``item`` to the dispatcher (counted unfinished until it has handled it)."""
        self._unfinished += 1
        try:
            await self._ordered_send.send(item)
        except BaseException:
            self._unfinished -= 1
            raise

    def _install_view(self, view: View) -> None:
        self._view = view
        self._suspected &= set(view.members)
        if self._refuses_pickle or self._told_pickle_refused:
            self._refuses_pickle &= set(view.members)
            self._told_pickle_refused &= set(view.members)
        if not self._in_view and self._stack.address in view:
            self._in_view = True
            self._pulse()
        self.rpc._view_changed(view)
        for watch in list(self._watches):
            watch._push(view)
        self._counters["views"] += 1

    # --- the dispatcher ----------------------------------------------------------------

    async def _dispatch_loop(self) -> None:
        """Hand over in order; once closed, only drain (so the reader sees Disconnected)."""
        rpc = self.rpc
        rpc._hold_replies()
        async for item in self._ordered_recv:
            try:
                if type(item) is list:
                    await self._dispatch_batch(item)
                    await rpc._flush_replies()
                elif type(item) is Resume:
                    await item.finish()
                elif not self._closing:
                    await self._dispatch_view(item.view)  # type: ignore[union-attr]
            except ChannelClosed:
                if not self._closing:
                    raise
            finally:
                self._unfinished -= 1

    async def _dispatch_batch(self, batch: list[Message | Received]) -> None:
        """The dispatcher's work on one batch: runs of plain application messages go to
        the receive queue whole (`_ready_run`, `_to_inbox`), the rest one by one."""
        inbox = self._inbox
        i, n = 0, len(batch)
        while i < n and not self._closing:
            msg = batch[i]
            if type(msg) is Received:
                await self._to_inbox([msg])
                i += 1
                continue
            assert type(msg) is Message
            rpc = _RPC in msg.headers
            if not (rpc or self._holding or self._sink is not inbox):
                ready: list[Received] = []
                done = self._ready_run(batch, i, ready, n)
                if ready:
                    await self._to_inbox(ready)
                if done > i:
                    i = done
                    continue
            if not rpc:
                await self.rpc._flush_replies()
            await self._dispatch(msg)
            i += 1

    async def _to_inbox(self, ready: list[Received]) -> None:
        """Put ``ready`` in the receive queue; if it must wait for room, send the RPC
        answers held back first (see `RpcDispatcher._hold_replies`)."""
        inbox = self._inbox
        if len(ready) <= inbox.room:
            inbox.put_nowait(ready)
            return
        await self.rpc._flush_replies()
        await inbox.deliver_all(ready)

    def _ready(self, msg: Message) -> Received | object | None:
        """`_dispatch` of an application message to the `Inbox`, without awaiting: what to
        hand over, None if the state already contains it, or _GENERAL (nothing done yet)
        for everything else (state transfer, RPC, a custom sink, a holding joiner, a
        payload that does not decode). `_ready_run` for one message."""
        if _RPC in msg.headers or self._holding or self._sink is not self._inbox:
            return _GENERAL
        out: list[Received] = []
        if not self._ready_run((msg,), 0, out, 1):
            return _GENERAL
        return out[0] if out else None

    async def _dispatch(self, msg: Message) -> None:
        hdr = msg.headers.get(_STATE)
        if hdr is not None and hdr.type == STATE_RSP:
            await self._state_response(msg, hdr)
        elif hdr is not None and hdr.type == PICKLE_REFUSED:
            self._pickle_refused_by(msg.src)
        elif self._holding:
            self._held.append(msg)
        else:
            await self._deliver(msg, hdr)

    def _pickle_refused_by(self, member: Address | None) -> None:
        """A receiver dropped our pickle: say so here, and refuse the next ones (see `send`)."""
        if member is None or member in self._refuses_pickle:
            return
        self._refuses_pickle.add(member)
        self._counters["pickle_refused_by_receivers"] += 1
        _log.warning(
            "%s: %s refuses pickled payloads (allow_pickle is off there) and dropped ours; "
            "open every member's channel with allow_pickle=True",
            self._stack.address,
            member,
        )

    async def _dispatch_view(self, view: View) -> None:
        self._align.view_changed(view)
        if self._holding:
            self._held.append(view)
            if self._stack.address in view and (
                self._state_source is None or self._state_source not in view
            ):
                await self._ask_for_state()
        else:
            await self._sink.view(view)

    async def _deliver(self, msg: Message, hdr: StateHeader | None) -> None:
        src = msg.src
        if src is None:
            self._drops.drop("malformed", "message without a source")
            return
        rpc = msg.headers.get(_RPC)
        if hdr is not None and hdr.type == STATE_REQ:
            await self._serve_state(src, hdr)
            return
        seqno = msg.headers.get(_SEQNO)
        if seqno is not None and not self._align.accept(src, seqno):
            self._counters["dropped_in_state"] += 1
            if rpc is not None:
                await self.rpc._not_executed(msg, rpc)
            return
        if rpc is not None:
            await self.rpc._execute(msg, rpc)
            return
        if self._closing:
            return
        try:
            value, body = decode_app_payload(
                msg.payload, (msg.flags & _TAGGED) != 0, allow_pickle=self.allow_pickle
            )
        except PayloadError as exc:
            self._drops.drop(exc.reason, str(exc), src)
            if exc.reason == "pickle_refused" and src not in self._told_pickle_refused:
                self._told_pickle_refused.add(src)
                notice = StateHeader(PICKLE_REFUSED)
                await self._send(Message(src, flags=_OOB, headers={_STATE: notice}), internal=True)
            return
        self._counters["delivered"] += 1
        await self._sink.deliver(
            received(src, value, body, bool(msg.flags & _OOB), msg.dest is None)
        )

    # --- state transfer (see _state) ------------------------------------------------------

    async def _ask_for_state(self) -> None:
        """Ask the coordinator for the state; without an older member, start without it."""
        if not self._holding:
            return
        view = self._view
        me = self._stack.address
        if view is None or me not in view:
            return
        coord = view.coord
        if coord == me:
            _log.info("%s: no older member to get the state from; starting without it", me)
            self._counters["state_none_to_ask"] += 1
            await self._release()
            return
        self._state_source = coord
        self._state_requests += 1
        self._counters["state_requests_sent"] += 1
        hdr = StateHeader(STATE_REQ, self._state_requests)
        await self._send(Message(coord, headers={_STATE: hdr}), internal=True)

    async def _serve_state(self, joiner: Address, hdr: StateHeader) -> None:
        if self._provider is None:
            reply = StateHeader(STATE_RSP, hdr.seqno)
            await self._send(Message(joiner, headers={_STATE: reply}), internal=True)
            return
        provider = self._provider

        async def take() -> tuple[Any, tuple[tuple[Address, int], ...]]:
            state = provider.get_state()
            if inspect.isawaitable(state):
                state = await state
            return state, self._align.snapshot()

        state, applied = await self._sink.snapshot(take)
        try:
            try:
                payload = encode_payload(state)
            except TypeError:
                if not self.allow_pickle:
                    raise
                payload = encode_payload(state, pickle=True)
            self._check_size(len(payload))
        except (TypeError, MessageTooLarge) as exc:
            # The joiner's state_timeout reports it there; this member keeps working.
            _log.error("%s: cannot send the state to %s: %s", self.address, joiner, exc)
            self._counters["states_not_sent"] += 1
            return
        reply = StateHeader(STATE_RSP, hdr.seqno, applied, True)
        self._counters["states_served"] += 1
        await self._send(Message(joiner, payload, headers={_STATE: reply}), internal=True)

    async def _state_response(self, msg: Message, hdr: StateHeader) -> None:
        if self._transferred:
            self._counters["state_responses_stale"] += 1
            return
        if hdr.has_state:
            assert self._provider is not None
            held = [
                (m.src, seqno)
                for m in self._held
                if isinstance(m, Message)
                and m.src is not None
                and (seqno := m.headers.get(_SEQNO)) is not None
            ]
            if first_gap(held, hdr.applied) is not None:
                self._counters["state_responses_behind"] += 1
                return
            try:
                state, _ = decode_payload(msg.payload, allow_pickle=self.allow_pickle)
            except PayloadError as exc:
                self._drops.drop(f"state_{exc.reason}", str(exc), msg.src)
                return
            done = self._provider.set_state(state)
            if inspect.isawaitable(done):
                await done
            self._align.install(hdr.applied)
        self._counters["states_received"] += 1
        await self._release()

    async def _release(self) -> None:
        """Hand over what was held back, in order; the transfer is done."""
        self._transferred = True
        self._pulse()
        while self._held:
            item = self._held.popleft()
            if isinstance(item, View):
                await self._sink.view(item)
            else:
                await self._deliver(item, item.headers.get(_STATE))
        self._holding = False

    # --- joining and leaving ------------------------------------------------------------

    async def _join(self) -> None:
        """Connect; return once in a view and, with a state provider, once the state is set.

        Waits for the current incarnation: if the stack restarts meanwhile,
        it waits for the new one to join.
        """
        await self._stack.send(Connect())
        if not await self._wait_until(lambda: self._in_view, self._join_timeout):
            raise JoinFailed(
                f"{self.name or 'member'} saw no view including it within {self._join_timeout}s"
            )
        deadline = trio.current_time() + self._state_timeout
        retry = _STATE_RETRY_FIRST
        while not self._transferred:
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                raise StateTransferFailed(
                    f"{self.name or 'member'} got no usable state within {self._state_timeout}s "
                    f"({self._state_requests} requests)"
                )
            if not await self._wait_until(lambda: self._transferred, min(retry, remaining)):
                retry = min(retry * 2, _STATE_RETRY_MAX)
                await self._ask_for_state()

    def _new_incarnation(self, stack: Stack) -> None:
        """The stack restarted with a new address: join again (and get the state again)."""
        if stack.incarnation <= 1 or self._nursery is None or self._closing:
            return
        self._counters["rejoins"] += 1
        if self._outgoing:
            lost = len(self._take_outgoing())
            self._drops.drop("restarted", "sent before the member restarted", None, lost)
        self._seqno = 0
        self._reset_membership()
        self._nursery.start_soon(self._join)

    async def aclose(self) -> bool:
        """Leave the group gracefully and close; idempotent.

        The leave flushes (issue 37): the member stays in the group until every
        other member has what it sent before (retransmitting, acking), or GMS's
        ``leave_timeout`` runs out; then it leaves for real. Sends after the close
        began raise ChannelClosed. Returns True if the leave flushed everything,
        False if not (logged at WARNING, counted in ``stats()`` as
        ``leaves_unflushed``) or if the channel was closed already. The channel's
        ``leave_timeout`` bounds the wait; by default it is GMS's own bound
        (`leave_bound`).

        Pending receives and RPC calls fail with ChannelClosed, and so do sends
        still waiting for room (they sent nothing), `views` iterators end,
        messages not read yet are dropped (counted). What was sent goes into the
        stack before the leave even while a layer holds back senders (a full MCAST
        window, no credits: `Stack.release_senders`), so the leave never waits for
        room; a multicast still waiting for room in MCAST's window when the member
        has left was never sent and is dropped there (counted, with a warning).
        """
        if self._closing:
            return False
        self._shut()
        self._stack.release_senders()
        with trio.move_on_after(self._leave_timeout):
            await self._flush_outgoing()  # what was sent goes before we leave
            await self._stack.send(Disconnect())
            await self._left.wait()
        if not self._left.is_set():
            self._counters["leave_timeouts"] += 1
        flushed = self._leave_flushed is True
        if not flushed:
            self._counters["leaves_unflushed"] += 1
            _log.warning(
                "channel %s: left without knowing that every member has what it sent (%s)",
                self._stack.name or self._stack.cluster,
                "the leave timed out" if self._left.is_set() else "no answer from GMS",
            )
        return flushed

    def _shut(self) -> None:
        """Close everything the application waits on; the stack is not told."""
        if self._closing:
            return
        self._closing = True
        for scope in self._waiting_sends:
            scope.cancel()
        self._sink.close()
        self._inbox.close()
        self.rpc._close()
        for watch in list(self._watches):
            watch._close()


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


class _SizeLimit(NamedTuple):
    """How large a payload the current incarnation of a stack sends (`Channel._check_size`).

    A size above ``frag.max_message_size`` (read at each send: a property that may
    change at run time), or above ``fixed`` without FRAG, goes to ``check``, which
    raises MessageTooLarge or lets it through."""

    incarnation: int
    frag: Frag | None
    fixed: float
    check: Callable[[int], None]


def _size_limit(stack: Stack) -> _SizeLimit:
    """The payload size limit of the current incarnation of ``stack``."""
    frag = next((p for p in stack.protocols if isinstance(p, Frag)), None)
    if frag is not None:

        def check_frag(size: int) -> None:
            if size <= frag.max_message_size:  # read each time: a property that may change
                return
            try:
                frag.check_size(size)
            except ValueError as exc:
                raise MessageTooLarge(size, frag.max_message_size, str(exc)) from None

        return _SizeLimit(stack.incarnation, frag, math.inf, check_frag)
    transport = stack.protocols[0]
    bundle = getattr(transport, "max_bundle_size", None)
    if not isinstance(bundle, int):
        return _SizeLimit(stack.incarnation, None, math.inf, lambda size: None)
    limit = bundle - HEADROOM

    def check_bundle(size: int) -> None:
        if size > limit:
            raise MessageTooLarge(
                size,
                limit,
                f"message of {size} bytes exceeds the {limit} bytes one {transport.name} bundle "
                f"carries (max_bundle_size {bundle} less {HEADROOM} for headers); "
                "put FRAG in the stack to send larger ones",
            )

    return _SizeLimit(stack.incarnation, None, limit, check_bundle)
