"""How much retransmission one peer may ask of us: a per-peer budget per interval.

A retransmission request costs the member that serves it (a copy per message
resent and, with NAKACK2's ``use_mcast_xmit``, a multicast to everyone), so a
misbehaving or malicious peer that asks for a whole window again and again
could keep a member busy serving it alone. NAKACK2, UNICAST2, UNICAST3 and MCAST each
serve at most their ``max_xmits_per_interval`` messages to one peer per
interval; the rest of a request is ignored and counted, and a genuine
receiver gets it at its next request. An addition beyond JGroups.

Sans-IO: time is passed in.
"""

from __future__ import annotations

from triogroups.address import Address

__all__ = ["PeerBudget"]

#: Peers tracked before the expired entries are swept (requesters that went quiet).
_SWEEP_AT = 1024


class PeerBudget:
    """Per peer: units used in the current interval, which starts at its first request."""

    def __init__(self) -> None:
        self._used: dict[Address, list[float]] = {}  # peer -> [interval start, units used]

    def take(self, peer: Address, wanted: int, limit: int, interval: float, now: float) -> int:
        """How many of ``wanted`` units ``peer`` may have now (``limit`` per ``interval``)."""
        entry = self._used.get(peer)
        if entry is None or now - entry[0] >= interval:
            if entry is None and len(self._used) >= _SWEEP_AT:
                self._used = {p: e for p, e in self._used.items() if now - e[0] < interval}
            entry = self._used[peer] = [now, 0]
        granted = min(wanted, max(0, limit - int(entry[1])))
        entry[1] += granted
        return granted
