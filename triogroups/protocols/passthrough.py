"""PASS: a layer that forwards everything unchanged.

Useful to measure what hosting a layer costs, and as a placeholder that
keeps a stack's shape while a real layer is switched off.
"""

from __future__ import annotations

from triogroups.message import Message
from triogroups.protocol import Protocol

__all__ = ["PassThrough"]


class PassThrough(Protocol):
    """Forwards batches and events in both directions; counts them."""

    name = "PASS"
    COUNTERS = ("msgs_down", "msgs_up")

    def down(self, batch: list[Message], now: float) -> None:
        self.counters["msgs_down"] += len(batch)
        self.send_down(batch)

    def up(self, batch: list[Message], now: float) -> None:
        self.counters["msgs_up"] += len(batch)
        self.send_up(batch)
