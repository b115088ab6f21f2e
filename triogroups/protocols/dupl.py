"""DUPL: duplicates messages coming up, so the layers above must drop the copies.

Each message coming up is followed by ``incoming_copies`` copies of itself,
with probability ``probability`` (JGroups' DUPL copies every message; the
probability is an addition so a run can duplicate a share of its traffic).
Copies are `Message.copy`, so a layer above that changes one leaves the
others intact. ``incoming_copies`` 0 passes everything through; both can be
changed at run time (the chaos runs switch duplication on and off this way).
"""

from __future__ import annotations

import random
from typing import Any

from triogroups.message import Message
from triogroups.properties import Float, Int, at_least, between
from triogroups.protocol import Protocol

__all__ = ["Dupl"]


class Dupl(Protocol):
    """Duplicates messages coming up; counts the copies."""

    name = "DUPL"
    COUNTERS = ("copies",)

    incoming_copies = Int(0, doc="copies added after a message coming up", check=at_least(0))
    probability = Float(
        1.0,
        doc="chance that a message coming up is copied",
        check=between(0, 1),
    )
    seed = Int(0, doc="seed of the copy decisions (None: from the OS)", nullable=True)

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._rng = random.Random(self.seed)

    def up(self, batch: list[Message], now: float) -> None:
        copies = self.incoming_copies
        if not copies or not self.probability:
            self.send_up(batch)
            return
        out = []
        for msg in batch:
            out.append(msg)
            if self.probability >= 1.0 or self._rng.random() < self.probability:
                out.extend(msg.copy() for _ in range(copies))
                self.counters["copies"] += copies
        self.send_up(out)
