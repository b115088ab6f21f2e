"""Group RPC over a channel: call a named function on all members or some.

Requests are ordinary messages through the stack with an `RpcHeader`: a
call to the group is one multicast (ordered, so every member runs the
group's requests in the same per-sender order, and state transfer covers
them), a call to given members is one unicast each. Every member runs
requests in delivery order, one at a time, in the channel's dispatcher;
``oob=True`` requests run at once, concurrently, outside that order.
Responses are OOB unicasts, taken by the channel's reader as soon as they
arrive, so a handler may itself call other members (but a handler that
calls the group *including itself* in order waits for its own request,
which runs after it: use ``oob=True`` for such calls).

Response modes: ``all`` waits for every target, ``first`` for one answer,
``majority`` for more than half of the targets, ``none`` does not wait. A
target that leaves the view or is suspected while the call waits counts as
failed at once (``Rsp.suspected``, `MemberGone`), so a call never hangs on
a dead member; ``timeout`` bounds the rest. An exception raised by a
handler comes back as described in `_errors`.
"""

from __future__ import annotations

import heapq
import inspect
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, Literal, NamedTuple

import trio

from triogroups._errors import ChannelClosed, MemberGone
from triogroups._payload import PICKLE, PayloadError, decode_payload, encode_payload
from triogroups._rpc._errors import (
    NotExecuted,
    RpcTimeout,
    UnknownMethod,
    error_info,
    rebuild_error,
)
from triogroups._rpc._link import ChannelLink
from triogroups._rpc._rsp import Rsp, RspList
from triogroups.address import Address
from triogroups.message import Flag, Message
from triogroups.protocols import ids
from triogroups.view import View
from triogroups.wire import register_header

__all__ = ["RPC_EXC", "RPC_REQ", "RPC_RSP", "Mode", "Resume", "RpcDispatcher", "RpcHeader"]

RPC_REQ = 1
RPC_RSP = 2
RPC_EXC = 3

_ID = ids.RPC
_OOB = int(Flag.OOB)

_PLAIN = frozenset((bytes, str, int, float, bool, list, dict, tuple, type(None)))  # never awaited

Mode = Literal["all", "first", "majority", "none"]
_MODES = ("all", "first", "majority", "none")


class RpcHeader(NamedTuple):
    """REQ: call ``method`` (``req_id`` 0: no answer wanted). RSP/EXC: the answer to ``req_id``."""

    type: int
    req_id: int = 0
    method: str = ""


register_header(_ID, RpcHeader, per_message=True)


class Resume(NamedTuple):
    """A request `RpcDispatcher._run_now` started whose handler returned an awaitable:
    the channel's dispatcher finishes it (`finish`) before anything delivered later."""

    rpc: RpcDispatcher
    msg: Message
    hdr: RpcHeader
    pickled: bool
    result: Any

    async def finish(self) -> None:
        """Await the handler's result and send the answer."""
        await self.rpc._resume(self.msg, self.hdr, self.pickled, self.result)
        await self.rpc._flush_replies()


class _Call:
    """A call waiting for answers."""

    def __init__(self, targets: list[Address], mode: Mode) -> None:
        self.rsps = {member: Rsp(member) for member in targets}
        self.pending = set(targets)
        self.arrivals: list[Address] = []
        n = len(targets)
        self.need = n if mode == "all" else 1 if mode == "first" else n // 2 + 1
        self.done = trio.Event()
        self.closed = False
        self.waking = False  # an answer completed it: counted in RpcDispatcher._waking
        self.expired = False  # its timeout ended the wait first

    def settle(
        self,
        member: Address,
        *,
        value: Any = None,
        exception: BaseException | None = None,
        suspected: bool = False,
    ) -> None:
        if member not in self.pending:
            return
        self.pending.discard(member)
        rsp = self.rsps[member]
        rsp.value = value
        rsp.exception = exception
        if suspected:
            rsp.suspected = True
        else:
            rsp.received = True
            self.arrivals.append(member)
        if len(self.arrivals) >= self.need or not self.pending:
            self.done.set()

    def close(self) -> None:
        self.closed = True
        self.done.set()

    def expire(self) -> None:
        if not self.done.is_set():
            self.expired = True
            self.done.set()


class RpcDispatcher:
    """Registered methods and calls in flight for one channel (`Channel.rpc`)."""

    def __init__(self, channel: ChannelLink) -> None:
        self._channel = channel
        self._methods: dict[str, Callable[..., Any]] = {}
        self._async_methods: set[str] = set()  # coroutine functions: `_run_now` leaves them
        self._calls: dict[int, _Call] = {}
        self._next_id = 0
        self._closed = False
        self._counters: defaultdict[str, int] = defaultdict(int)  # not `Counter`: see Channel
        self._waking = 0  # callers an answer woke that have not run yet
        # (deadline, req_id) of calls waiting, for `_expire_loop`; entries of calls that
        # are over are dropped from the front as new calls come
        self._deadlines: list[tuple[float, int]] = []
        self._expiring: trio.CancelScope | None = None  # `_expire_loop`'s sleep
        self._holder: trio.lowlevel.Task | None = None  # its answers wait in _held
        self._held: list[Message] = []

    # --- serving -----------------------------------------------------------------

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
        """Remove method ``name`` (a no-op if absent); later requests for it fail with
        UnknownMethod at the caller.
        """
        self._methods.pop(name, None)
        self._async_methods.discard(name)

    @property
    def methods(self) -> list[str]:
        """The names of the registered methods, sorted."""
        return sorted(self._methods)

    async def _execute(self, msg: Message, hdr: RpcHeader) -> None:
        """Run a request (called by the channel's dispatcher, in delivery order)."""
        if self._closed or msg.src is None:
            return
        nursery = self._channel.nursery
        if msg.flags & _OOB and nursery is not None:
            nursery.start_soon(self._run, msg, hdr)
        else:
            await self._run(msg, hdr)

    async def _run(self, msg: Message, hdr: RpcHeader) -> None:
        assert msg.src is not None
        self._counters["requests_executed"] += 1
        pickled = msg.payload[:1] == bytes((PICKLE,))
        try:
            result = self._method(msg, hdr)(*self._arguments(msg))
            if type(result) not in _PLAIN and inspect.isawaitable(result):
                await self._flush_replies()  # earlier answers never wait for this one
                result = await result
        except Exception as exc:
            self._counters["requests_failed"] += 1
            await self._reply(self._error(msg.src, hdr.req_id, exc))
            return
        if hdr.req_id:
            await self._reply(self._answer(msg.src, hdr.req_id, result, pickled))

    def _run_now(self, msg: Message, hdr: RpcHeader) -> Resume | bool:
        """`_execute` of an ordered request whose handler is synchronous, without awaiting
        (the channel's reader runs it in the stack's task while the dispatcher is idle);
        its answer waits in `_held` for `_flush_now`. False: nothing done (an async
        handler: the dispatcher runs it); a `Resume` when the handler returned an
        awaitable, which the dispatcher awaits and answers before anything later."""
        if hdr.method in self._async_methods:
            return False
        src = msg.src
        if self._closed or src is None:
            return True
        counters = self._counters
        counters["requests_executed"] += 1
        counters["requests_run_inline"] += 1
        pickled = msg.payload[:1] == bytes((PICKLE,))
        try:
            result = self._method(msg, hdr)(*self._arguments(msg))
            if type(result) not in _PLAIN and inspect.isawaitable(result):
                return Resume(self, msg, hdr, pickled, result)
        except Exception as exc:
            self._counters["requests_failed"] += 1
            answer = self._error(src, hdr.req_id, exc)
        else:
            answer = self._answer(src, hdr.req_id, result, pickled) if hdr.req_id else None
        if answer is not None and not self._closed:
            self._counters["responses_sent"] += 1
            self._held.append(answer)
        return True

    async def _resume(self, msg: Message, hdr: RpcHeader, pickled: bool, result: Any) -> None:
        """Finish a request `_run_now` started whose handler returned an awaitable."""
        assert msg.src is not None
        try:
            result = await result
        except Exception as exc:
            self._counters["requests_failed"] += 1
            await self._reply(self._error(msg.src, hdr.req_id, exc))
            return
        if hdr.req_id:
            await self._reply(self._answer(msg.src, hdr.req_id, result, pickled))

    def _method(self, msg: Message, hdr: RpcHeader) -> Callable[..., Any]:
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
        return Message(caller, payload, flags=_OOB, headers={_ID: RpcHeader(RPC_RSP, req_id)})

    def _error(self, caller: Address, req_id: int, exc: BaseException) -> Message | None:
        """The answer carrying ``exc``; None for a request that wants none."""
        return self._error_answer(caller, req_id, exc) if req_id else None

    def _error_answer(self, caller: Address, req_id: int, exc: BaseException) -> Message:
        payload = encode_payload(error_info(exc))
        return Message(caller, payload, flags=_OOB, headers={_ID: RpcHeader(RPC_EXC, req_id)})

    async def _not_executed(self, msg: Message, hdr: RpcHeader) -> None:
        """A request whose effect is in the state this member received: answer, don't run."""
        if msg.src is not None and hdr.req_id and not self._closed:
            self._counters["requests_in_state"] += 1
            error = NotExecuted(
                f"{self._channel.address} joined with a state that already contains "
                f"this {hdr.method!r} request; it was not run again"
            )
            await self._reply(self._error(msg.src, hdr.req_id, error))

    async def _reply(self, msg: Message | None) -> None:
        if msg is None or self._closed:
            return
        self._counters["responses_sent"] += 1
        if trio.lowlevel.current_task() is self._holder:
            self._held.append(msg)
            return
        await self._channel.send_replies([msg])

    def _hold_replies(self) -> None:
        """Answers given in this task (the channel's dispatcher) wait until it calls
        `_flush_replies`: the answers to a run of requests delivered together go down
        the stack as one batch (one bundle per caller), not one by one. The dispatcher
        flushes before it awaits anything but a request's synchronous handler, and
        `_run` before it awaits an async handler, so no answer waits on anything slow."""
        self._holder = trio.lowlevel.current_task()

    async def _flush_replies(self) -> None:
        """Send the answers held back (see `_hold_replies`), as one batch."""
        if not self._held:
            return
        held, self._held = self._held, []
        if self._closed:
            return
        self._counters["reply_batches"] += 1
        await self._channel.send_replies(held)

    def _flush_now(self) -> bool:
        """`_flush_replies` without awaiting; False when the answers must wait (the stack
        is full or a send holds the channel's lock): then the dispatcher sends them."""
        if not self._held or self._closed:
            self._held.clear()
            return True
        try:
            self._channel.send_replies_nowait(self._held)
        except trio.WouldBlock:
            return False
        self._held = []
        self._counters["reply_batches"] += 1
        return True

    # --- calling -----------------------------------------------------------------

    async def call(
        self,
        method: str,
        *args: Any,
        to: Address | Iterable[Address] | None = None,
        mode: Mode = "all",
        timeout: float = 10.0,
        oob: bool = False,
        pickle: bool = False,
        exclude_self: bool = False,
    ) -> RspList:
        """Call ``method(*args)`` on the group (``to=None``), one member or several.

        Returns once ``mode`` is satisfied, every target answered or failed,
        or ``timeout`` passed (then ``RspList.timed_out`` is True). With mode
        "none" it returns at once after sending, with an empty list.
        Raises NotAMember for a target not in the view, ChannelClosed if the
        channel closes first (also while waiting), ValueError/TypeError for
        bad arguments. A cancelled call to the group was not sent.
        """
        call = await self._call(method, args, to, mode, timeout, oob, pickle, exclude_self)
        if call is None:
            return RspList({}, [], False)
        return RspList(call.rsps, call.arrivals, call.expired)

    async def _call(
        self,
        method: str,
        args: tuple[Any, ...],
        to: Address | Iterable[Address] | None,
        mode: Mode,
        timeout: float,
        oob: bool,
        pickle: bool,
        exclude_self: bool,
    ) -> _Call | None:
        """`call`, returning the finished `_Call` (None for mode "none"), which `call_one`
        reads without building an `RspList`."""
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        channel = self._channel
        channel.check_open()
        targets = self._targets(to, exclude_self)
        if pickle:
            channel.check_pickle(to if isinstance(to, Address) else None)
        data = _encode_args(method, args, pickle)
        channel.check_size(len(data))
        flags = _OOB if oob else 0
        if to is None and exclude_self:
            flags |= int(Flag.DONT_LOOPBACK)
        if mode == "none":
            await self._send_request(to, targets, method, 0, data, flags)
            self._counters["calls"] += 1
            return None
        self._next_id += 1
        req_id = self._next_id
        call = _Call(targets, mode)
        self._calls[req_id] = call
        if channel.suspected:
            self._gone([m for m in targets if m in channel.suspected], "suspected")
        try:
            await self._send_request(to, targets, method, req_id, data, flags)
            self._counters["calls"] += 1
            if self._expiring is None:
                with trio.move_on_after(timeout):
                    await call.done.wait()
                call.expired = not call.done.is_set()
            else:
                self._expire_at(trio.current_time() + timeout, req_id)
                await call.done.wait()
        finally:
            del self._calls[req_id]
            if call.waking:
                self._waking -= 1
        if call.closed:
            raise ChannelClosed("the channel closed during the call")
        if call.expired:
            self._counters["calls_timed_out"] += 1
        return call

    async def call_one(
        self,
        method: str,
        *args: Any,
        to: Address,
        timeout: float = 10.0,
        oob: bool = False,
        pickle: bool = False,
    ) -> Any:
        """Call ``method(*args)`` on member ``to`` and return its value.

        Raises what the handler raised (see `RemoteError`), MemberGone if
        ``to`` left or was suspected, RpcTimeout after ``timeout``.
        """
        if not isinstance(to, Address):
            raise TypeError(f"to must be an Address, got {type(to).__name__}")
        call = await self._call(method, args, to, "all", timeout, oob, pickle, False)
        assert call is not None
        rsp = call.rsps[to]
        if not rsp.received and not rsp.suspected:
            raise RpcTimeout(f"no answer from {to} to {method!r} within {timeout}s")
        return rsp.result()

    def _expire_at(self, deadline: float, req_id: int) -> None:
        deadlines = self._deadlines
        calls = self._calls
        while deadlines and deadlines[0][1] not in calls:
            heapq.heappop(deadlines)
        heapq.heappush(deadlines, (deadline, req_id))
        scope = self._expiring
        if scope is not None and deadline < scope.deadline:
            scope.deadline = deadline

    async def _expire_loop(self) -> None:
        """End the wait of every call whose timeout has passed (runs in the channel's
        nursery): one timer for all calls, cheaper per call than a cancel scope each."""
        deadlines = self._deadlines
        try:
            while True:
                with trio.CancelScope(deadline=deadlines[0][0] if deadlines else math.inf) as scope:
                    self._expiring = scope
                    await trio.sleep_forever()
                now = trio.current_time()
                while deadlines and deadlines[0][0] <= now:
                    call = self._calls.get(heapq.heappop(deadlines)[1])
                    if call is not None:
                        call.expire()
        finally:
            self._expiring = None

    def _targets(self, to: Address | Iterable[Address] | None, exclude_self: bool) -> list[Address]:
        channel = self._channel
        if type(to) is Address:  # one member (`call_one`): the checks below, in short
            channel.check_member(to)
            return [to]
        if to is None:
            me = channel.address
            return [m for m in channel.view.members if not (exclude_self and m == me)]
        if isinstance(to, str | bytes):
            raise TypeError(
                f"to must be an Address or Addresses from the view (ch.view.members), "
                f"got {type(to).__name__} {to!r}"
            )
        members = [to] if isinstance(to, Address) else list(dict.fromkeys(to))
        for member in members:
            if not isinstance(member, Address):
                raise TypeError(
                    f"rpc targets must be Addresses, got {type(member).__name__} {member!r}"
                )
            channel.check_member(member)
        return members

    async def _send_request(
        self,
        to: Address | Iterable[Address] | None,
        targets: list[Address],
        method: str,
        req_id: int,
        data: bytes,
        flags: int,
    ) -> None:
        hdr = RpcHeader(RPC_REQ, req_id, method)
        dests: list[Address | None] = [None] if to is None else list(targets)
        for dest in dests:
            # a request to members runs down an idle stack at once, unless callers woken by
            # the same answers are about to send theirs: then it waits in the send queue,
            # which the top layer drains whole once they have run, so their requests leave
            # as one batch (one bundle per member). A call to the group keeps the send
            # queue's coalescing: a burst of calls stays one batch, so a STABLE max_bytes
            # round starts after the burst, not in its middle (STABLE forgets the bytes
            # sent while its round runs)
            waking = dest is not None and self._waking > 0
            await self._channel.send(
                Message(dest, data, flags=flags, headers={_ID: hdr}),
                urgent=dest is not None and not waking,
                join=waking,
            )

    # --- answers and failures (called by the channel's reader) -------------------------

    def _response(self, msg: Message, hdr: RpcHeader) -> None:
        call = self._calls.get(hdr.req_id)
        src = msg.src
        if call is None or src is None:
            self._counters["responses_stale"] += 1
            return
        self._counters["responses_received"] += 1
        if hdr.type == RPC_RSP:
            try:
                value, _ = decode_payload(msg.payload, allow_pickle=self._channel.allow_pickle)
            except PayloadError as exc:
                call.settle(src, exception=TypeError(f"response from {src} refused: {exc}"))
            else:
                call.settle(src, value=value)
        else:
            try:
                info, _ = decode_payload(msg.payload, allow_pickle=False)
            except PayloadError:
                info = None
            call.settle(src, exception=rebuild_error(info, src))
        if not call.waking and call.done.is_set():
            call.waking = True
            self._waking += 1

    def _view_changed(self, view: View) -> None:
        for call in list(self._calls.values()):
            for member in [m for m in call.pending if m not in view]:
                self._counters["targets_gone"] += 1
                call.settle(
                    member,
                    exception=MemberGone(member, f"{member} left the view during the call"),
                    suspected=True,
                )

    def _gone(self, members: Iterable[Address], why: str) -> None:
        for member in members:
            for call in list(self._calls.values()):
                if member in call.pending:
                    self._counters["targets_gone"] += 1
                    call.settle(
                        member,
                        exception=MemberGone(member, f"{member} was {why} during the call"),
                        suspected=True,
                    )

    def _close(self) -> None:
        self._closed = True
        for call in self._calls.values():
            call.close()

    def stats(self) -> dict[str, Any]:
        """A plain snapshot: registered methods, calls waiting for answers, and counters
        (calls, requests executed and failed, responses sent, ...).
        """
        return {"methods": self.methods, "calls_pending": len(self._calls), **self._counters}


def _encode_args(method: str, args: tuple[Any, ...], pickle: bool) -> bytes:
    """The request payload; a TypeError names the argument that cannot be encoded."""
    try:
        return encode_payload(list(args), pickle=pickle)
    except TypeError:
        for i, arg in enumerate(args):
            try:
                encode_payload(arg, pickle=pickle)
            except TypeError as exc:
                raise TypeError(
                    f"argument #{i + 1} of rpc call {method!r} ({_short_repr(arg)}) "
                    f"cannot be sent: {exc}"
                ) from None
        raise


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
