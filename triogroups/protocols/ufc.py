"""UFC: credit-based flow control for unicasts, credits per destination.

A sender spends the payload length of every unicast from the credits it holds
for that destination; with too few, the unicast waits (and new sends wait at
the top of the stack) until the destination's REPLENISH arrives, or the view drops it. The
shared machinery (receiver side, CREDIT_REQUEST after ``max_block_time``,
DONT_BLOCK, NO_FC, OOB) and the choices made where JGroups leaves room are
described in `triogroups.protocols._flow`.

One slow destination holds back every sender of the member while its queue is
non-empty (one down loop carries them all); unicasts to other destinations in
the same batch still go when their credits allow. Destinations outside the
view are not flow controlled (JGroups: no credit entry, no blocking).
"""

from __future__ import annotations

from typing import Any

from triogroups.address import Address
from triogroups.protocol import Passes
from triogroups.protocols import ids
from triogroups.protocols._flow import CREDIT_REQUEST, REPLENISH, FcHeader, FlowControl
from triogroups.view import View
from triogroups.wire import register_header

__all__ = ["CREDIT_REQUEST", "REPLENISH", "FcHeader", "Ufc"]

register_header(ids.UFC, FcHeader)


class Ufc(FlowControl):
    """Unicast flow control; see the module docstring."""

    name = "UFC"
    passes_up: Passes | None = "multicasts"  # credits are for unicasts
    passes_down: Passes | None = "multicasts"
    id = ids.UFC
    multicast = False

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._sent: dict[Address, int] = {}

    def _take(self, key: Address | None, cost: int) -> bool:
        if key is None or cost == 0:
            return True
        sent = self._sent
        left = sent.get(key)
        if left is None:
            return True
        if left >= cost:  # the common case, first: one comparison
            sent[key] = left - cost
            return True
        if left < self.max_credits:  # too few, and not full: a big message waits for full
            return False
        sent[key] = 0
        return True

    def _take_all(self, key: Address | None, total: int) -> bool:
        left = None if key is None else self._sent.get(key)
        if left is None:
            return True
        if left < total:
            return False
        self._sent[key] = left - total  # type: ignore[index]
        return True

    def _credit(self, member: Address, credits: int) -> None:
        left = self._sent.get(member)
        if left is not None:
            self._sent[member] = min(self.max_credits, left + credits)

    def _short_of(self, key: Address | None, cost: int) -> list[tuple[Address, int]]:
        if key is None or key not in self._sent:
            return []
        return [(key, self._sent[key])]

    def _view_members(self, view: View) -> None:
        sent = self._sent
        for member in [m for m in sent if m not in view]:
            del sent[member]
        for member in view.members:
            sent.setdefault(member, self.max_credits)

    def _credit_stats(self) -> dict[str, Any]:
        return {"sender_credits": {str(m): c for m, c in self._sent.items()}}
