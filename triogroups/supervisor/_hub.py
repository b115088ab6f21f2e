"""Where a process group's events go: its history, every subscriber, and whoever waits.

The supervisor publishes (`publish`) and pulses on any change of its book-keeping (`pulse`);
`ProcessGroup.events` subscribes, `ProcessGroup.wait_for_view` waits for the next change. The
hub decides nothing and never blocks: subscribers have unbounded buffers.
"""

from __future__ import annotations

import math

import trio

from triogroups.supervisor._events import GroupEvent

__all__ = ["EventHub"]


class EventHub:
    """The events of one group: kept in `history`, sent to each subscriber, then a pulse."""

    def __init__(self) -> None:
        self.history: list[GroupEvent] = []
        self._subscribers: list[trio.MemorySendChannel[GroupEvent]] = []
        self._changed = trio.Event()
        self._closed = False

    def subscribe(self) -> trio.MemoryReceiveChannel[GroupEvent]:
        """The events from now on; the channel ends when the hub closes (at once if it has)."""
        send, receive = trio.open_memory_channel[GroupEvent](math.inf)
        if self._closed:
            send.close()
        else:
            self._subscribers.append(send)
        return receive

    def publish(self, event: GroupEvent) -> None:
        self.history.append(event)
        for subscriber in self._subscribers:
            subscriber.send_nowait(event)
        self.pulse()

    def pulse(self) -> None:
        """Wake every `changed` waiter: something they may be waiting for moved."""
        self._changed.set()
        self._changed = trio.Event()

    async def changed(self) -> None:
        await self._changed.wait()

    def close(self) -> None:
        """The group has ended: every subscription ends, and waiters wake a last time."""
        self._closed = True
        for subscriber in self._subscribers:
            subscriber.close()
        self.pulse()
