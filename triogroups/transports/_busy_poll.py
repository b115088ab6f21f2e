"""Busy polling: keep the process's event loop polling for a while after I/O, not sleeping.

A request/response round trip between two processes pays for each side
waking up: the side that waits blocks in ``epoll_wait``, the kernel puts it
to sleep, and the answer has to wake it again. On virtual machines whose idle
CPUs halt at once that wake-up is a large share of a short round trip (see
docs/benchmarks.md), and the woken code runs slower on cold caches.

A transport with ``busy_poll`` set keeps one extra task, the `BusyPoller`,
runnable for that long after each send and each receive. While it is
runnable, Trio polls the sockets without blocking (``epoll_wait`` with a zero
timeout) on every pass of its run loop, so a datagram or frame that arrives
is read within one pass instead of after a wake-up. After the window, the
task parks on an event until the next send or receive; an idle member does
not spin. The trade is CPU for latency, as with Linux's ``SO_BUSY_POLL`` or
the Erlang VM's scheduler busy-wait: a waiting member keeps a CPU busy for up
to the window, which costs throughput where members outnumber the cores
(off by default; docs/how-to/busy-polling.md says when to turn it on).

Only Trio's public API is used: the spinning task yields at every pass, so
every other task runs as usual.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from triogroups.properties import Duration, Rule
from triogroups.transports.base import Transport

__all__ = ["BusyPoller", "BusyPollingTransport"]


class BusyPoller:
    """Keeps the Trio run loop polling for ``window`` seconds after the last `arm`.

    The transport runs `run` in its nursery whether busy polling is on or not (parked,
    it costs nothing), so that the ``busy_poll`` property can be turned on and off at
    run time; while it is on, the transport calls `arm` after it sends or receives (one
    float write on the hot path, an event only when the poller was parked)."""

    __slots__ = ("_parked", "_until", "_wake", "seconds", "window", "windows")

    def __init__(self, window: float) -> None:
        if not window >= 0:
            raise ValueError(f"busy-poll window must be >= 0 s, got {window}")
        #: Seconds to poll after an `arm`; 0 while busy polling is off (nothing arms it).
        self.window = window
        self._until = 0.0
        self._parked = True
        self._wake = trio.Event()
        #: Times the poller started spinning after it had parked, and the seconds it
        #: spent spinning in the windows that have ended (the CPU it cost, roughly).
        self.windows = 0
        self.seconds = 0.0

    @property
    def on(self) -> bool:
        """Whether the transport should `arm` it (a window longer than 0)."""
        return self.window > 0

    def arm(self) -> None:
        """Keep polling until ``window`` seconds from now."""
        self._until = time.perf_counter() + self.window
        if self._parked:
            self._parked = False
            self._wake.set()

    @property
    def spinning(self) -> bool:
        """True while the poller keeps the run loop polling."""
        return not self._parked

    async def run(self) -> None:
        """Spin through the run loop while armed, park while not; until cancelled."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            self.windows += 1
            began = time.perf_counter()
            now = began
            while now < self._until:
                await trio.lowlevel.checkpoint()
                now = time.perf_counter()
            self.seconds += now - began
            self._parked = True


class BusyPollingTransport(Transport):
    """A transport whose sockets may be busy-polled (UDP, TCP): the ``busy_poll``
    property, its `BusyPoller` and its stats entry.

    A subclass starts the poller in its `serve` nursery (`_start_busy_poll`) and, after
    each send and receive, arms ``self._poller`` when it is not None (busy polling on);
    a run-time change of ``busy_poll`` takes effect at once."""

    busy_poll = Duration(
        0.0,
        doc="after each send or receive, keep polling the sockets this long instead of "
        "sleeping: lower request/response latency for a busy CPU while waiting; 0 = off",
        check=Rule(lambda value: 0 <= value <= 0.1, "in [0, 100ms]"),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._spinner: BusyPoller | None = None  # made by `serve`, parked while off
        self._poller: BusyPoller | None = None  # the spinner while busy polling is on

    def _start_busy_poll(self, nursery: trio.Nursery) -> None:
        """Start the poller (parked unless ``busy_poll`` is on), before any I/O."""
        self._spinner = BusyPoller(self.busy_poll)
        nursery.start_soon(self._spinner.run)
        self._poller = self._spinner if self._spinner.on else None

    def property_changed(self, key: str, now: float) -> None:
        """``busy_poll`` set at run time takes effect at once (a window turned off while
        spinning ends when its last arm's time is up)."""
        super().property_changed(key, now)
        spinner = self._spinner
        if key == "busy_poll" and spinner is not None:  # not serving: `serve` reads it
            spinner.window = self.busy_poll
            self._poller = spinner if spinner.on else None

    def busy_poll_stats(self) -> dict[str, Any]:
        """The ``busy_poll`` stats entry: none while busy polling is off and has never
        been on."""
        spinner = self._spinner
        if spinner is None or not (spinner.on or spinner.windows):
            return {}
        return {
            "busy_poll": {
                "windows": spinner.windows,
                "seconds": round(spinner.seconds, 6),
                "spinning": spinner.spinning,
            }
        }
