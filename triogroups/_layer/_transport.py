"""`TransportActor`: a transport run at the bottom of a stack, and `StartupError`.

The transport's own loop (`Transport.serve`) runs in the actor; an inlet
offers it batches first (`Transport.send_now`). A transport that cannot open
in the stack's first incarnation is a `StartupError`, never restarted.
"""

from __future__ import annotations

from typing import Any

import trio

from triogroups._layer._actor import original_error
from triogroups._layer._ways import Inlet
from triogroups.actors import Actor, PermanentError
from triogroups.message import Message
from triogroups.transports.base import Transport

__all__ = ["StartupError", "TransportActor"]


class StartupError(PermanentError):
    """A member's stack could not start, and starting it again would fail the same way.

    Raised by `Stack.run` and `open_channel` at once, without restarts, when the
    transport cannot open in the stack's first incarnation: a taken port range,
    a ``bind_addr`` that is not an address of this host, no simulated network
    of that name. The message names the transport and the cause; ``__cause__``
    is the original error (an `OSError` keeps its ``errno``).
    """


def _reason(exc: Exception) -> str:
    """``exc`` as its message alone: an OSError's text without the "[Errno 98]" prefix."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


class TransportActor(Actor):
    """Runs a transport's `serve` at the bottom of a stack.

    The transport opens (`Transport.open`) in `started`, before the stack
    reports the layer started. In the stack's ``first`` incarnation an error
    there is a `StartupError`: nothing was ever up, so the cause is the
    configuration or the host (a port, an address, a network), which a
    restart does not change; retrying it four times would only hide it. In
    a later incarnation the same error is an ordinary crash, restarted by
    the stack's restart intensity (a port may be free again a moment later).

    The inlet from above offers batches to `Transport.send_now` first (see
    `Inlet.bind_transport`): an error there crashes this actor, as an error
    in `serve` would, not the layer whose handler sent the batch.
    """

    def __init__(
        self,
        transport: Transport,
        down_in: Inlet,
        up_out: Inlet,
        *,
        first: bool = False,
    ) -> None:
        self.protocol = transport
        self._down_in = down_in
        self._up_out = up_out
        self._first = first
        self._failure: Exception | None = None
        self._failed = trio.Event()
        down_in.bind_transport(self)
        up_out.bind_source()

    async def started(self) -> None:
        try:
            self.protocol.open()
        except Exception as exc:
            if not self._first:
                raise
            name = self.protocol.name or type(self.protocol).__name__
            raise StartupError(f"{name} cannot start: {_reason(exc)}") from exc

    async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._raise_failure)
                await self.protocol.serve(self._down_in.receiver, self._up_out)
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise original_error(group) from None

    async def _raise_failure(self) -> None:
        """Raise, in this actor, the error of a `send_now` run in another task."""
        await self._failed.wait()
        assert self._failure is not None
        raise self._failure

    def send_now(self, batch: list[Message]) -> bool:
        """`Transport.send_now` in a neighbour's task; an error crashes this actor."""
        if self._failure is not None:
            return False
        try:
            return self.protocol.send_now(batch)
        except Exception as exc:
            self._failure = exc
            self._failed.set()
            return True

    def queued(self) -> None:
        """See `Transport.queued`."""
        self.protocol.queued()

    def down_pending(self) -> bool:
        """Whether batches wait for the transport to take them (see `LayerActor.down_pending`)."""
        return bool(self._down_in.buffered())

    def reset_stats(self) -> None:
        """The host keeps no counters for the transport."""

    def stats(self) -> dict[str, Any]:
        """The transport keeps its own counters (`Transport.stats`); the host adds how many
        items wait in its inbox from above."""
        return {"queued_down": self._down_in.buffered()}
