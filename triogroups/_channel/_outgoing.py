"""The channel's send path: from `Channel.send` to the stack, in order, in batches.

`Channel.send` usually returns without yielding (see `_cadence`) and
leaves the message in the channel's *outgoing* list; the *flusher* task hands
the whole list to the stack as one batch as soon as the sending task yields,
for whatever reason. A loop of sends thus goes down as batches of up to
`SEND_CHECKPOINT_EVERY` messages: each layer handles them in one call and the
transport bundles them into few datagrams, where handing each message down
alone cost every layer, the transport and every receiver a call per message.
Every other way down (`send_nowait`, `send_many`, RPC, state transfer,
leaving) takes what is outgoing first, so nothing overtakes a message sent
earlier, and a send that has to wait for the stack waits for it too.

Application seqnos are stamped here (`_stamp_all`; the per-message work is
`_send_loop`'s, compiled where built), sizes checked (`_check_size`, FRAG's
limit or one bundle's), and a cancelled send gives its seqnos back. Nothing here
reads what the stack delivers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, NamedTuple

import trio

from triogroups import _compiled
from triogroups._cadence import SEND_CHECKPOINT_EVERY
from triogroups._channel._core import (
    _OOB,
    _TAGGED,
    ChannelCore,
)
from triogroups._errors import ChannelClosed, MessageTooLarge, NotAMember
from triogroups._payload import encode_payload
from triogroups.address import Address
from triogroups.message import Message, new_message
from triogroups.protocols.frag import HEADROOM, Frag
from triogroups.stack import Stack

__all__ = ["Outgoing"]

#: Messages `send` leaves for the flusher at most; beyond, it sends them at once. A task
#: that sends in a loop yields every SEND_CHECKPOINT_EVERY calls, so this is a bound for
#: tasks that take turns with the flusher unluckily, not the usual batch size.
_MAX_OUTGOING = 2 * SEND_CHECKPOINT_EVERY

#: The per-message work of a send (`triogroups._channel._send_loop`) in the form this process
#: runs: compiled where the build made it, unless ``TRIOGROUPS_PURE_PYTHON`` is set.
SEND: ModuleType = _compiled.load("_channel._send_loop")
multicast: Callable[[bytes, int], Message] = SEND.multicast
stamp: Callable[[list[Message], int], int] = SEND.stamp


class Outgoing(ChannelCore):
    """The send path of a `Channel`: its public sends and the ways down the stack."""

    _limit: _SizeLimit | None  # the current incarnation's size limit (`_check_size`)
    #: the stack has SEQUENCER (found by the first ``total_order=True`` send; a channel's
    #: stack and its configuration never change)
    _sequenced = False

    async def send(
        self,
        payload: Any,
        to: Address | None = None,
        *,
        pickle: bool = False,
        oob: bool = False,
        total_order: bool = False,
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

        ``total_order=True`` states that this multicast must be delivered in
        one order at every member: it is, on a stack with SEQUENCER (the
        ``udp-total`` preset), where every regular multicast is totally
        ordered, and it raises RuntimeError on any other stack (which orders
        per sender only) and ValueError with ``to`` or ``oob``.
        """
        if total_order:
            self._check_total_order(to, oob)
        msg: Message | None = None  # an ordered multicast of bytes is made once numbered
        if type(payload) is bytes and to is None and not pickle and not oob:
            # What most calls send: `_app_message`'s checks spelt out (this path costs
            # ~1 us, each call saved ~60 ns).
            if self._closing:
                raise ChannelClosed("the channel is closed")
            limit = self._limit
            if limit is None or limit.incarnation != self._stack.incarnation:
                limit = self._new_limit()
            size = len(payload)
            if size > (limit.fixed if limit.frag is None else limit.frag.max_message_size):
                limit.check(size)
        else:
            msg = self._app_message(payload, to, pickle, oob)
        # `_send_batch` for one message, inline: this is the call applications make per
        # message, so it skips two coroutines and a list on its way down.
        if self._cadence.tick():
            await trio.lowlevel.checkpoint()
            self._check_open()
        if not self._send_lock.locked():
            wake = self._flush_wake
            if wake is not None:
                outgoing = self._outgoing
                if len(outgoing) < _MAX_OUTGOING:
                    if msg is None:
                        self._seqno = seqno = self._seqno + 1
                        outgoing.append(multicast(payload, seqno))
                    else:
                        self._stamp_all([msg])
                        outgoing.append(msg)
                    self._counters["sent"] += 1
                    if not wake.is_set():
                        wake.set()
                    return
        if msg is None:
            msg = new_message(None, None, 0, {}, payload)
        if not self._send_lock.locked():
            if self._flush_wake is not None:
                try:  # what waits, and this, at once
                    self._send_batch_nowait([msg])
                    return
                except trio.WouldBlock:
                    await self._send_waiting([msg])
                    return
            stamped = self._stamp_all([msg])
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
        total_order: bool = False,
    ) -> None:
        """As `send`, but raises trio.WouldBlock instead of waiting (nothing was sent)."""
        if total_order:
            self._check_total_order(to, oob)
        self._send_nowait(self._app_message(payload, to, pickle, oob))

    async def send_many(
        self,
        payloads: Iterable[Any],
        to: Address | None = None,
        *,
        pickle: bool = False,
        oob: bool = False,
        total_order: bool = False,
    ) -> None:
        """Send every payload in ``payloads``, in order, as `send` sends one.

        They go down the stack as one batch, so each layer handles them in
        one call: for an application that has many messages at hand, the
        cheapest way to send. Every payload is checked before any is sent
        (the errors are those of `send`, and then nothing was sent).
        Awaits while the stack cannot take more. Cancellation-safe: a
        cancelled send_many sent nothing.
        """
        if total_order:
            self._check_total_order(to, oob)
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
        return new_message(to, None, flags | _OOB if oob else flags, {}, data)

    def _check_total_order(self, to: Address | None, oob: bool) -> None:
        """Raise unless a ``total_order=True`` send will be totally ordered (see `send`)."""
        if to is not None or oob:
            raise ValueError("total_order=True is for multicasts: not with to= or oob=True")
        if self._sequenced:  # checked once: `names()` builds a list each call
            return
        if "SEQUENCER" not in self._stack.config.names():
            raise RuntimeError(
                "total_order=True needs SEQUENCER in the stack (the udp-total preset); "
                f"this stack orders per sender only: {', '.join(self._stack.config.names())}"
            )
        self._sequenced = True

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
        """Give the ordered multicasts of ``msgs`` the next application seqnos
        (`_send_loop.stamp`); how many that took."""
        first = self._seqno
        self._seqno = stamp(msgs, first)
        return self._seqno - first


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
