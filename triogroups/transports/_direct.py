"""The gate in front of a transport's `send_now`.

`send_now` may send in the caller's task only while the transport's own task waits
for the next item from above with nothing queued: then nothing it sends can overtake
an earlier item. What `send_now` cannot finish (datagrams the socket refused, member
queues it filled) it hands back to that task, which does it before it takes anything
more. UDP and TCP share this protocol; only what is handed back differs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from triogroups.events import Item

__all__ = ["DirectGate"]


class DirectGate:
    """Open while the transport's task waits, with nothing queued, for the next item."""

    __slots__ = ("_wake", "open")

    def __init__(self) -> None:
        self.open = False  # `send_now` may send now
        self._wake: trio.CancelScope | None = None  # the wait; cancelled by `hand_back`

    async def next_item(
        self, down: trio.MemoryReceiveChannel[Item], catch_up: Callable[[], Awaitable[None]]
    ) -> Item | None:
        """The next item from above (None: the channel closed), each time after
        ``catch_up`` has done what `send_now` handed back; the gate is open while none
        waits."""
        while True:
            await catch_up()
            try:
                return down.receive_nowait()
            except trio.WouldBlock:
                pass
            except trio.EndOfChannel:
                return None
            self.open = True
            try:
                with trio.CancelScope() as self._wake:
                    return await down.receive()
            except trio.EndOfChannel:
                return None
            finally:
                self.open = False

    def close(self) -> None:
        """An item was queued for the transport's task: `send_now` must not overtake it."""
        self.open = False

    def hand_back(self) -> None:
        """`send_now` left work for the transport's task: close the gate and wake the task,
        whose `catch_up` does it first."""
        self.open = False
        assert self._wake is not None
        self._wake.cancel()
