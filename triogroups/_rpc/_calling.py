"""The calling side of group RPC: calls in flight, their answers, timeouts and failures.

`CallTable` sends a call's requests down the channel and waits until its mode
is satisfied; the channel's reader settles calls with `response` (an answer),
`view_changed` and `gone` (a target left or is suspected), and `close`. One
timer task (`expire_loop`) ends the waits whose timeout passed.

The methods without an underscore but ``call`` and ``call_one`` are what the
channel calls; the application's face is `RpcDispatcher`.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Literal

import trio

from triogroups._errors import ChannelClosed, MemberGone
from triogroups._payload import PayloadError, decode_payload, encode_payload
from triogroups._rpc._errors import RpcTimeout, rebuild_error
from triogroups._rpc._header import RPC_ID, RPC_REQ, RPC_RSP, RpcHeader
from triogroups._rpc._link import ChannelLink
from triogroups._rpc._rsp import Rsp, RspList
from triogroups.address import Address
from triogroups.message import Flag, Message
from triogroups.view import View

__all__ = ["CallTable", "Mode"]

_OOB = int(Flag.OOB)

Mode = Literal["all", "first", "majority", "none"]
_MODES = ("all", "first", "majority", "none")


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
        self.waking = False  # an answer completed it: counted in CallTable._waking
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


class CallTable:
    """The calls one channel has in flight (`Channel.rpc` makes them)."""

    def __init__(self, channel: ChannelLink) -> None:
        self._channel = channel
        self._calls: dict[int, _Call] = {}
        self._next_id = 0
        self.counters: defaultdict[str, int] = defaultdict(int)  # not `Counter`: see Channel
        self._waking = 0  # callers an answer woke that have not run yet
        # (deadline, req_id) of calls waiting, for `expire_loop`; entries of calls that
        # are over are dropped from the front as new calls come
        self._deadlines: list[tuple[float, int]] = []
        self._expiring: trio.CancelScope | None = None  # `expire_loop`'s sleep

    @property
    def pending(self) -> int:
        """How many calls wait for answers."""
        return len(self._calls)

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
        """`RpcDispatcher.call` (`_dispatcher`), which states what it returns and raises:
        the application's face hands its arguments on unchanged."""
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
            self.counters["calls"] += 1
            return None
        self._next_id += 1
        req_id = self._next_id
        call = _Call(targets, mode)
        self._calls[req_id] = call
        if channel.suspected:
            self.gone([m for m in targets if m in channel.suspected], "suspected")
        try:
            await self._send_request(to, targets, method, req_id, data, flags)
            self.counters["calls"] += 1
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
            self.counters["calls_timed_out"] += 1
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
        """`RpcDispatcher.call_one` (`_dispatcher`), which states what it returns and
        raises: the application's face hands its arguments on unchanged."""
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

    async def expire_loop(self) -> None:
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
                Message(dest, data, flags=flags, headers={RPC_ID: hdr}),
                urgent=dest is not None and not waking,
                join=waking,
            )

    # --- answers and failures (the channel's reader) ----------------------------------

    def response(self, msg: Message, hdr: RpcHeader) -> None:
        call = self._calls.get(hdr.req_id)
        src = msg.src
        if call is None or src is None:
            self.counters["responses_stale"] += 1
            return
        self.counters["responses_received"] += 1
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

    def view_changed(self, view: View) -> None:
        for call in list(self._calls.values()):
            for member in [m for m in call.pending if m not in view]:
                self.counters["targets_gone"] += 1
                call.settle(
                    member,
                    exception=MemberGone(member, f"{member} left the view during the call"),
                    suspected=True,
                )

    def gone(self, members: Iterable[Address], why: str) -> None:
        for member in members:
            for call in list(self._calls.values()):
                if member in call.pending:
                    self.counters["targets_gone"] += 1
                    call.settle(
                        member,
                        exception=MemberGone(member, f"{member} was {why} during the call"),
                        suspected=True,
                    )

    def close(self) -> None:
        """End every call waiting: each raises ChannelClosed (the channel closed)."""
        for call in self._calls.values():
            call.close()


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
