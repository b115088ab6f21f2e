"""MFC: credit-based flow control for multicasts, the minimum over the members.

A multicast reaches every member, so it may go only when every member of the
view has granted enough credits; it spends its payload length from each. The
credits of member P grow when P's REPLENISH arrives; a sender blocked longer
than ``max_block_time`` asks exactly the members whose credits are short. A
view change that removes a slow member takes it out of the minimum, so the
waiting multicasts go. The shared machinery and the choices made where JGroups
leaves room are described in `triogroups.protocols._flow`.

The member itself is one of the receivers (its multicasts loop back and are
counted like anyone else's); a DONT_LOOPBACK multicast never comes back, so
its length is accounted at once, as JGroups does. MCAST's window already
limits what is in flight, so the ``udp-mcast`` stack runs without MFC.

Spending is O(1) per message: the credits of member P are kept as
``granted[P] - spent``, so a send bumps one counter and only a REPLENISH or a
view change touches the per-member table.
"""

from __future__ import annotations

from typing import Any

from triogroups.address import Address
from triogroups.message import Flag, Message
from triogroups.protocol import Passes
from triogroups.protocols import ids
from triogroups.protocols._flow import CREDIT_REQUEST, DOWN_LOOPS, REPLENISH, FcHeader, FlowControl
from triogroups.view import View
from triogroups.wire import register_header

__all__ = ["CREDIT_REQUEST", "REPLENISH", "FcHeader", "Mfc"]

_NO_FC = int(Flag.NO_FC)

register_header(ids.MFC, FcHeader)


class Mfc(FlowControl):
    """Multicast flow control; see the module docstring."""

    name = "MFC"
    passes_up: Passes | None = "unicasts"  # credits are for multicasts
    passes_down: Passes | None = "unicasts"
    id = ids.MFC
    multicast = True

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._granted: dict[Address, int] = {}
        self._spent = 0
        self._min_granted = 0

    def _left(self, member: Address) -> int:
        return max(0, self._granted[member] - self._spent)

    def _take(self, key: Address | None, cost: int) -> bool:
        if cost == 0 or not self._granted:
            return True
        if self._min_granted - self._spent < min(cost, self.max_credits):
            return False
        self._spent = min(self._spent + cost, self._min_granted)
        return True

    def _take_all(self, key: Address | None, total: int) -> bool:
        if not self._granted:
            return True
        if self._min_granted - self._spent < total:
            return False
        self._spent += total
        return True

    def _credit(self, member: Address, credits: int) -> None:
        if member in self._granted:
            left = self._left(member)
            self._granted[member] = self._spent + min(self.max_credits, left + credits)
            self._min_granted = min(self._granted.values())

    def _short_of(self, key: Address | None, cost: int) -> list[tuple[Address, int]]:
        need = min(cost, self.max_credits)
        return [(m, self._left(m)) for m in self._granted if self._left(m) < need]

    def _view_members(self, view: View) -> None:
        granted = self._granted
        for member in [m for m in granted if m not in view]:
            del granted[member]
        for member in view.members:
            granted.setdefault(member, self._spent + self.max_credits)
        self._min_granted = min(granted.values(), default=0)

    def _sent_locally(self, sent: list[Message]) -> None:
        me = self.local_address
        if me is None:
            return
        length = DOWN_LOOPS.unlooped_bytes(sent, _NO_FC)
        if length:
            self._account(me, length)

    def _credit_stats(self) -> dict[str, Any]:
        return {
            "sender_credits": {str(m): self._left(m) for m in self._granted},
            "min_credits_left": max(0, self._min_granted - self._spent) if self._granted else None,
        }
