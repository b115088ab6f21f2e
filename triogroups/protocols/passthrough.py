"""PASS: a layer that forwards everything unchanged.

Useful to measure what hosting a layer costs, and as a placeholder that
keeps a stack's shape while a real layer is switched off.
"""

from __future__ import annotations

from typing import Any

from triogroups.message import Message
from triogroups.protocol import Protocol

__all__ = ["PassThrough"]


class PassThrough(Protocol):
    """Forwards batches and events in both directions; counts them."""

    name = "PASS"

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.msgs_down = 0
        self.msgs_up = 0

    def down(self, batch: list[Message], now: float) -> None:
        self.msgs_down += len(batch)
        self.send_down(batch)

    def up(self, batch: list[Message], now: float) -> None:
        self.msgs_up += len(batch)
        self.send_up(batch)

    def stats(self) -> dict[str, Any]:
        return {"msgs_down": self.msgs_down, "msgs_up": self.msgs_up}
