"""DELAY: holds messages coming up for a random time, so they arrive late and reordered.

Each message coming up is held for a time drawn uniformly from [0, ``in_delay``]
seconds (JGroups' DELAY, with seconds in place of milliseconds), so two
messages from one sender may overtake each other: the layers above must put
them back in order. ``in_delay`` 0 passes everything through at once; a
run-time change applies to the messages that come up after it (the chaos
runs switch delay on and off this way). Events are never held. Sans-IO: the
held messages are released by `tick` at `next_deadline`.
"""

from __future__ import annotations

import heapq
import math
import random
from typing import Any

from triogroups.message import Message
from triogroups.properties import Duration, Int, at_least
from triogroups.protocol import Protocol

__all__ = ["Delay"]


class Delay(Protocol):
    """Delays (and so reorders) messages coming up; counts them."""

    name = "DELAY"
    COUNTERS = ("delayed",)

    in_delay = Duration(
        0.0,
        doc="longest time a message coming up is held (uniform in [0, in_delay]; 0: none)",
        check=at_least(0),
    )
    seed = Int(0, doc="seed of the delays (None: from the OS)", nullable=True)

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._rng = random.Random(self.seed)
        self._held: list[tuple[float, int, Message]] = []  # (release time, arrival no, msg)
        self._arrivals = 0

    def up(self, batch: list[Message], now: float) -> None:
        if not self.in_delay and not self._held:
            self.send_up(batch)
            return
        for msg in batch:
            self._arrivals += 1
            release = now + self._rng.uniform(0.0, self.in_delay)
            heapq.heappush(self._held, (release, self._arrivals, msg))
            self.counters["delayed"] += 1
        self.tick(now)

    def tick(self, now: float) -> None:
        held = self._held
        out = []
        while held and held[0][0] <= now:
            out.append(heapq.heappop(held)[2])
        self.send_up(out)

    def next_deadline(self) -> float:
        return self._held[0][0] if self._held else math.inf

    def gauges(self) -> dict[str, Any]:
        return {"held": len(self._held)}
