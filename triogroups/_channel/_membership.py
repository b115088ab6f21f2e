"""The channel's join and leave: into the group (with the state), out of it gracefully.

`_join` connects and waits for a view with this member and, with a state
provider, for the state; a restart of the stack joins again (`_new_incarnation`).
`aclose` flushes what was sent and leaves; `_shut` ends everything the
application waits on.
"""

from __future__ import annotations

from typing import Any

import trio

from triogroups._channel._core import _log
from triogroups._channel._dispatcher import Dispatcher
from triogroups._errors import JoinFailed, StateTransferFailed
from triogroups.config import StackConfig
from triogroups.events import Connect, Disconnect
from triogroups.stack import Stack

__all__ = ["Membership", "leave_bound"]

_STATE_RETRY_FIRST = 0.5
_STATE_RETRY_MAX = 5.0


def leave_bound(config: StackConfig) -> float:
    """How long a graceful leave with ``config`` may take: GMS's flush and then its
    LEAVE_REQ, each at most its ``leave_timeout``, plus ``max_bundling_time`` and a
    second (2.0 s without GMS: nothing waits)."""
    layer = next((layer for layer in config.layers if layer.name == "GMS"), None)
    if layer is None:
        return 2.0
    gms: Any = layer.build()
    return float(2 * gms.leave_timeout + gms.max_bundling_time + 1.0)


class Membership(Dispatcher):
    """Joining and leaving, for a `Channel`."""

    async def _join(self) -> None:
        """Connect; return once in a view and, with a state provider, once the state is set.

        Waits for the current incarnation: if the stack restarts meanwhile,
        it waits for the new one to join.
        """
        await self._stack.send(Connect())
        if not await self._wait_until(lambda: self._in_view, self._connect_timeout):
            raise JoinFailed(
                f"{self.name or 'member'} saw no view including it within {self._connect_timeout}s"
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
                if await self._ask_for_state():
                    await self._release()

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
        ``close_timeout`` bounds the wait; by default it is GMS's own bound
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
        with trio.move_on_after(self._close_timeout):
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
        self._rpc_server.close()
        self._rpc_calls.close()
        for watch in list(self._watches):
            watch._close()
