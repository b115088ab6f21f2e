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

from collections.abc import Callable, Iterable
from typing import Any

from triogroups._rpc._calling import CallTable, Mode
from triogroups._rpc._header import RPC_EXC, RPC_REQ, RPC_RSP, RpcHeader
from triogroups._rpc._rsp import RspList
from triogroups._rpc._serving import Resume, RpcServer
from triogroups.address import Address

__all__ = ["RPC_EXC", "RPC_REQ", "RPC_RSP", "Mode", "Resume", "RpcDispatcher", "RpcHeader"]


class RpcDispatcher:
    """Registered methods and calls in flight for one channel (`Channel.rpc`).

    The channel makes it; what runs requests and settles calls is the channel's
    business, this is the application's face of both."""

    def __init__(self, server: RpcServer, calls: CallTable) -> None:
        self._server = server
        self._calls = calls

    # --- serving -----------------------------------------------------------------

    def register(self, name: str, fn: Callable[..., Any]) -> None:
        """Make ``fn`` (sync or async) callable by members as ``name``."""
        self._server.register(name, fn)

    def unregister(self, name: str) -> None:
        """Remove method ``name`` (a no-op if absent); later requests for it fail with
        UnknownMethod at the caller.
        """
        self._server.unregister(name)

    @property
    def methods(self) -> list[str]:
        """The names of the registered methods, sorted."""
        return self._server.methods

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
        return await self._calls.call(
            method,
            *args,
            to=to,
            mode=mode,
            timeout=timeout,
            oob=oob,
            pickle=pickle,
            exclude_self=exclude_self,
        )

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
        return await self._calls.call_one(
            method, *args, to=to, timeout=timeout, oob=oob, pickle=pickle
        )

    def stats(self) -> dict[str, Any]:
        """A plain snapshot: registered methods, calls waiting for answers, and counters
        (calls, requests executed and failed, responses sent, ...).
        """
        return {
            "methods": self.methods,
            "calls_pending": self._calls.pending,
            **self._calls.counters,
            **self._server.counters,
        }
