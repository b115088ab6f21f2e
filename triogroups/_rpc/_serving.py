"""The serving side of group RPC: registered methods, and running the requests delivered.

`RpcServer` runs each request the channel's dispatcher hands it, in delivery
order (``oob=True`` requests as tasks of their own), and sends the answer back
as an OOB unicast. A handler runs in one place, `RpcServer._start` (call it
and turn its result or error into the answer), finished by `_finish` when it
returned an awaitable; the three ways the channel runs a request (`execute`
awaiting, `run_now` inline in the stack's task, `Resume.finish` afterwards)
are built from those two. Answers given in the dispatcher's task wait and
leave as one batch (`hold_replies`, `flush_replies`, `flush_now`).

The methods without an underscore are what the channel calls (its reader and
dispatcher); the application's face is `RpcDispatcher`.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple

import trio

from triogroups._payload import PICKLE, PayloadError, decode_payload, encode_payload
from triogroups._rpc._errors import NotExecuted, UnknownMethod, error_info
from triogroups._rpc._header import RPC_EXC, RPC_ID, RPC_RSP, RpcHeader
from triogroups._rpc._link import ChannelLink
from triogroups.address import Address
from triogroups.message import Flag, Message

__all__ = ["Resume", "RpcServer"]

_OOB = int(Flag.OOB)
_PICKLED = bytes((PICKLE,))
_PLAIN = frozenset((bytes, str, int, float, bool, list, dict, tuple, type(None)))  # never awaited


class Resume(NamedTuple):
    """A request `RpcServer.run_now` started whose handler returned an awaitable:
    the channel's dispatcher finishes it (`finish`) before anything delivered later."""

    server: RpcServer
    msg: Message
    hdr: RpcHeader
    result: Any

    async def finish(self) -> None:
        """Await the handler's result and send the answer."""
        server = self.server
        await server._reply(await server._finish(self.msg, self.hdr, self.result))
        await server.flush_replies()


class RpcServer:
    """The methods registered on one channel and the requests it runs."""

    def __init__(self, channel: ChannelLink) -> None:
        self._channel = channel
        self._methods: dict[str, Callable[..., Any]] = {}
        self._async_methods: set[str] = set()  # coroutine functions: `run_now` leaves them
        self._closed = False
        self.counters: defaultdict[str, int] = defaultdict(int)  # not `Counter`: see Channel
        self._holder: trio.lowlevel.Task | None = None  # its answers wait in _held
        self._held: list[Message] = []

    # --- the registry ------------------------------------------------------------------

    def register(self, name: str, fn: Callable[..., Any]) -> None:
        """Make ``fn`` (sync or async) callable by members as ``name``."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"rpc method name must be a non-empty str, got {name!r}")
        if not callable(fn):
            raise TypeError(f"rpc method {name!r} must be callable, got {type(fn).__name__}")
        self._methods[name] = fn
        if inspect.iscoroutinefunction(fn):
            self._async_methods.add(name)
        else:
            self._async_methods.discard(name)

    def unregister(self, name: str) -> None:
        """Remove method ``name`` (a no-op if absent)."""
        self._methods.pop(name, None)
        self._async_methods.discard(name)

    @property
    def methods(self) -> list[str]:
        """The names of the registered methods, sorted."""
        return sorted(self._methods)

    # --- running a request (the channel's dispatcher and reader) ------------------------

    async def execute(self, msg: Message, hdr: RpcHeader) -> None:
        """Run a request (called by the channel's dispatcher, in delivery order)."""
        if self._closed or msg.src is None:
            return
        nursery = self._channel.nursery
        if msg.flags & _OOB and nursery is not None:
            nursery.start_soon(self._run, msg, hdr)
        else:
            await self._run(msg, hdr)

    async def _run(self, msg: Message, hdr: RpcHeader) -> None:
        answer, pending = self._start(msg, hdr)
        if pending is not None:
            await self.flush_replies()  # earlier answers never wait for this one
            answer = await self._finish(msg, hdr, pending)
        await self._reply(answer)

    def run_now(self, msg: Message, hdr: RpcHeader) -> Resume | bool:
        """`execute` of an ordered request whose handler is synchronous, without awaiting
        (the channel's reader runs it in the stack's task while the dispatcher is idle);
        its answer waits for `flush_now`. False: nothing done (an async handler: the
        dispatcher runs it); a `Resume` when the handler returned an awaitable, which
        the dispatcher awaits and answers before anything later."""
        if hdr.method in self._async_methods:
            return False
        if self._closed or msg.src is None:
            return True
        self.counters["requests_run_inline"] += 1
        answer, pending = self._start(msg, hdr)
        if pending is not None:
            return Resume(self, msg, hdr, pending)
        if answer is not None and not self._closed:
            self.counters["responses_sent"] += 1
            self._held.append(answer)
        return True

    def _start(self, msg: Message, hdr: RpcHeader) -> tuple[Message | None, Any]:
        """Call the handler of request ``msg`` (from a member: ``msg.src`` is set):
        ``(answer, None)`` when it is done (the answer None when none is wanted), or
        ``(None, awaitable)`` when the handler returned one, for `_finish`."""
        self.counters["requests_executed"] += 1
        try:
            result = self._method(hdr)(*self._arguments(msg))
            if type(result) not in _PLAIN and inspect.isawaitable(result):
                return None, result
        except Exception as exc:
            return self._failed(msg, hdr, exc), None
        return self._answered(msg, hdr, result), None

    async def _finish(self, msg: Message, hdr: RpcHeader, pending: Any) -> Message | None:
        """Await what the handler returned (`_start`): the answer, or None."""
        try:
            result = await pending
        except Exception as exc:
            return self._failed(msg, hdr, exc)
        return self._answered(msg, hdr, result)

    def _answered(self, msg: Message, hdr: RpcHeader, result: Any) -> Message | None:
        """The answer carrying ``result``; None for a request that wants none."""
        if not hdr.req_id:
            return None
        assert msg.src is not None
        return self._answer(msg.src, hdr.req_id, result, msg.payload[:1] == _PICKLED)

    def _failed(self, msg: Message, hdr: RpcHeader, exc: BaseException) -> Message | None:
        """Count a failed request; the answer carrying ``exc``, None if none is wanted."""
        self.counters["requests_failed"] += 1
        assert msg.src is not None
        return self._error(msg.src, hdr.req_id, exc)

    def _method(self, hdr: RpcHeader) -> Callable[..., Any]:
        fn = self._methods.get(hdr.method)
        if fn is None:
            raise UnknownMethod(
                f"no rpc method {hdr.method!r} on {self._channel.address}"
                f" (registered: {', '.join(self.methods) or 'none'})"
            )
        return fn

    def _arguments(self, msg: Message) -> list[Any]:
        try:
            args, _ = decode_payload(msg.payload, allow_pickle=self._channel.allow_pickle)
        except PayloadError as exc:
            if exc.reason == "pickle_refused":
                raise TypeError(
                    f"{self._channel.address} refuses pickled arguments (allow_pickle is off)"
                ) from None
            raise ValueError(f"malformed rpc arguments: {exc}") from None
        if not isinstance(args, list):
            raise ValueError("malformed rpc arguments: not a list")
        return args

    def _answer(self, caller: Address, req_id: int, result: Any, pickled: bool) -> Message:
        """The answer carrying ``result`` (or the error of encoding or sending it)."""
        try:
            payload = encode_payload(result)
        except TypeError as exc:
            if not pickled:
                return self._error_answer(caller, req_id, exc)
            try:
                payload = encode_payload(result, pickle=True)
            except TypeError as exc:
                return self._error_answer(caller, req_id, exc)
        try:
            self._channel.check_size(len(payload))
        except ValueError as exc:
            return self._error_answer(caller, req_id, exc)
        return Message(caller, payload, flags=_OOB, headers={RPC_ID: RpcHeader(RPC_RSP, req_id)})

    def _error(self, caller: Address, req_id: int, exc: BaseException) -> Message | None:
        """The answer carrying ``exc``; None for a request that wants none."""
        return self._error_answer(caller, req_id, exc) if req_id else None

    def _error_answer(self, caller: Address, req_id: int, exc: BaseException) -> Message:
        payload = encode_payload(error_info(exc))
        return Message(caller, payload, flags=_OOB, headers={RPC_ID: RpcHeader(RPC_EXC, req_id)})

    async def not_executed(self, msg: Message, hdr: RpcHeader) -> None:
        """A request whose effect is in the state this member received: answer, don't run."""
        if msg.src is not None and hdr.req_id and not self._closed:
            self.counters["requests_in_state"] += 1
            error = NotExecuted(
                f"{self._channel.address} joined with a state that already contains "
                f"this {hdr.method!r} request; it was not run again"
            )
            await self._reply(self._error(msg.src, hdr.req_id, error))

    # --- answers ------------------------------------------------------------------------

    async def _reply(self, msg: Message | None) -> None:
        if msg is None or self._closed:
            return
        self.counters["responses_sent"] += 1
        if trio.lowlevel.current_task() is self._holder:
            self._held.append(msg)
            return
        await self._channel.send_replies([msg])

    def hold_replies(self, task: trio.lowlevel.Task | None) -> trio.lowlevel.Task | None:
        """Answers given in ``task`` (the channel's dispatcher, or the stack's task while
        the reader serves requests inline) wait until it calls `flush_replies` or
        `flush_now`: the answers to a run of requests delivered together go down the
        stack as one batch (one bundle per caller), not one by one. The dispatcher
        flushes before it awaits anything but a request's synchronous handler, and
        `execute` before it awaits an async handler, so no answer waits on anything
        slow. Returns the task that held before, to give back when done."""
        holder, self._holder = self._holder, task
        return holder

    @property
    def holder(self) -> trio.lowlevel.Task | None:
        """The task whose answers wait (`hold_replies`): the channel's dispatcher."""
        return self._holder

    async def flush_replies(self) -> None:
        """Send the answers held back (see `hold_replies`), as one batch."""
        if not self._held:
            return
        held, self._held = self._held, []
        if self._closed:
            return
        self.counters["reply_batches"] += 1
        await self._channel.send_replies(held)

    def flush_now(self) -> bool:
        """`flush_replies` without awaiting; False when the answers must wait (the stack
        is full or a send holds the channel's lock): then the dispatcher sends them."""
        if not self._held or self._closed:
            self._held.clear()
            return True
        try:
            self._channel.send_replies_nowait(self._held)
        except trio.WouldBlock:
            return False
        self._held = []
        self.counters["reply_batches"] += 1
        return True

    def close(self) -> None:
        """Run and answer nothing more (the channel closed)."""
        self._closed = True
