"""The channel's reader: what the stack delivers, classified once, driven two ways.

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

`_classify` is the reader's one step; `_read_loop` drives it in the reader task
(awaiting room at the dispatcher) and `_read_now` in the stack's task (only when
the dispatcher has room, so it never waits). What the dispatcher would do at once
with a plain application message, `_ready_run` does here, for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import trio

from triogroups import _compiled
from triogroups._channel._core import (
    _OOB,
    _ORDERED_BUFFER,
    _RPC,
    _SEQNO,
    Ordered,
)
from triogroups._channel._inbox import Received
from triogroups._channel._outgoing import Outgoing
from triogroups._layer import after_chain
from triogroups._rpc import RPC_REQ, Resume
from triogroups.events import Disconnected, Item, Suspect, Unsuspect, ViewChange
from triogroups.message import Message
from triogroups.view import View

__all__ = ["Reader"]

_GENERAL = object()  # `Reader._ready`: this message takes the general, awaiting path

#: The hand-off's per-message loop, compiled or pure (`triogroups._compiled`).
HANDOFF: ModuleType = _compiled.load("_channel._handoff")


class Reader(Outgoing):
    """The reader of a `Channel`: what comes out of the stack, before the dispatcher."""

    def _classify(self, item: Item) -> Ordered | None:
        """The reader's one step, the same in its task and inline: answer what must not
        wait (RPC responses, views, suspicions, the end of membership) and return what is
        left for the dispatcher, in order (None when nothing is)."""
        if type(item) is list:
            return self._hand_over(item) or None
        if isinstance(item, ViewChange):
            self._install_view(item.view)
            return item
        self._event(item)
        return None

    async def _read_loop(self) -> None:
        """The reader task: `_classify` what `_read_now` left in the stack's deliveries and
        pass what is ordered on to the dispatcher, waiting for room."""
        stack = self._stack
        while True:
            try:
                item = await stack.take()
            except trio.EndOfChannel:
                return
            self._reading = True
            ordered = self._classify(item)
            if ordered is not None:
                await self._pass_on(ordered)
            self._reading = False

    def _read_now(self, item: Item) -> bool:
        """`_classify` ``item`` in the stack's task (`Stack.deliver_to`); False
        (nothing done) while the reader task is busy or the dispatcher could not take
        what is ordered without waiting. An error is raised by `_raise_failure`."""
        if self._reading or self._unfinished >= _ORDERED_BUFFER:
            return False
        try:
            ordered = self._classify(item)
            if ordered is not None:
                self._pass_now(ordered)
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
        rpc = self._rpc_server
        holder = rpc.hold_replies(trio.lowlevel.current_task())
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
            if not rpc.flush_now():
                self._unfinished += 1
                self._ordered_send.send_nowait([])  # the dispatcher flushes after a batch
        except Exception as exc:
            if self._failure is None:
                self._failure = exc
                self._failed.set()
        finally:
            rpc.hold_replies(holder)

    def _serve_now(
        self, batch: list[Message | Received]
    ) -> tuple[Resume | None, list[Message | Received]]:
        """The dispatcher's loop over ``batch`` as far as it needs no await: what is left
        for the dispatcher (nothing when all is done), after the `Resume` of a request
        whose handler returned an awaitable, if one did."""
        inbox = self._inbox
        rpc = self._rpc_server
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
                done = rpc.run_now(msg, hdr)
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
            self._rpc_calls.gone(members, "suspected")
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
        response = self._rpc_calls.response
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
        the sink is the `Inbox`); the per-message work is the compiled core's
        (`triogroups._channel._handoff.ready_run`), and the counters move once per run.
        """
        before = len(out)
        done: int = HANDOFF.ready_run(batch, i, out, limit, self._align, self.allow_pickle)
        handed = len(out) - before
        if done - i > handed:
            self._counters["dropped_in_state"] += done - i - handed
        if handed:
            self._counters["delivered"] += handed
        return done

    def _ready(self, msg: Message) -> Received | object | None:
        """`_dispatch` of an application message to the `Inbox`, without awaiting: what to
        hand over, None if the state already contains it, or _GENERAL (nothing done yet)
        for everything else (state transfer, RPC, a custom sink, a holding joiner, a
        payload that does not decode). `_ready_run` for one message."""
        if _RPC in msg.headers or self._holding or self._sink is not self._inbox:
            return _GENERAL
        out: list[Received] = []
        if not self._ready_run([msg], 0, out, 1):
            return _GENERAL
        return out[0] if out else None

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
        self._rpc_calls.view_changed(view)
        for watch in list(self._watches):
            watch._push(view)
        self._counters["views"] += 1
