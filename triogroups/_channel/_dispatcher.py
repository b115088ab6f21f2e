"""The channel's dispatcher: hands over what the reader passed on, in delivery order.

It puts application messages into the receive queue (or the application's
`Sink`), runs RPC requests (`RpcDispatcher`), serves and applies state transfers
(`_transfer`) and holds a joiner's messages until its state is set.

Back-pressure: received messages wait in a bounded queue of
``receive_buffer`` messages. When the application stops reading, the
dispatcher waits, the stack's channels fill, the stack stops reading from
the network, and flow control (UFC/MFC) or MCAST's window eventually block
the senders. Nothing is dropped on the way.
"""

from __future__ import annotations

import trio

from triogroups._channel._core import _OOB, _RPC, _SEQNO, _STATE, _TAGGED, _log
from triogroups._channel._inbox import Received, received
from triogroups._channel._state import PICKLE_REFUSED, STATE_REQ, STATE_RSP, StateHeader
from triogroups._channel._transfer import StateTransfer
from triogroups._errors import ChannelClosed
from triogroups._payload import PayloadError, decode_app_payload
from triogroups._rpc import Resume
from triogroups.address import Address
from triogroups.message import Message
from triogroups.view import View

__all__ = ["Dispatcher"]


class Dispatcher(StateTransfer):
    """The dispatcher of a `Channel`: one task, delivery order."""

    async def _dispatch_loop(self) -> None:
        """Hand over in order; once closed, only drain (so the reader sees Disconnected)."""
        rpc = self._rpc_server
        rpc.hold_replies(trio.lowlevel.current_task())
        async for item in self._ordered_recv:
            try:
                if type(item) is list:
                    await self._dispatch_batch(item)
                    await rpc.flush_replies()
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
                await self._rpc_server.flush_replies()
            await self._dispatch(msg)
            i += 1

    async def _to_inbox(self, ready: list[Received]) -> None:
        """Put ``ready`` in the receive queue; if it must wait for room, send the RPC
        answers held back first (see `RpcServer.hold_replies`)."""
        inbox = self._inbox
        if len(ready) <= inbox.room:
            inbox.put_nowait(ready)
            return
        await self._rpc_server.flush_replies()
        await inbox.deliver_all(ready)

    async def _dispatch(self, msg: Message) -> None:
        hdr = msg.headers.get(_STATE)
        if hdr is not None and hdr.type == STATE_RSP:
            if await self._state_response(msg, hdr):
                await self._release()
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
            if (
                self._stack.address in view
                and (self._state_source is None or self._state_source not in view)
                and await self._ask_for_state()
            ):
                await self._release()
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
                await self._rpc_server.not_executed(msg, rpc)
            return
        if rpc is not None:
            await self._rpc_server.execute(msg, rpc)
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
