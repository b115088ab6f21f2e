"""The stats keys every reliable protocol shares, so probes and the inspector compare them.

NAKACK2, MCAST, UNICAST3 and UNICAST2 each keep their own counters under
their own (JGroups) names; `reliable_stats` adds the same facts under one
vocabulary. It runs only when stats are asked for, never on a hot path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["reliable_stats"]


def reliable_stats(
    *,
    sent: int,
    received: int,
    delivered: int,
    xmit_reqs_sent: int,
    xmit_reqs_received: int,
    retransmitted: int,
    peer_windows: Mapping[str, tuple[int, int, int]],
    pending_acks: int | None = None,
) -> dict[str, Any]:
    """The shared keys: messages ``sent``, ``received`` and ``delivered``; retransmission
    requests sent and received and messages ``retransmitted``; per peer the receive window's
    ``low``, ``highest_delivered`` and ``highest_received`` (from (low, hd, hr) tuples);
    and ``pending_acks`` (acks owed and not yet sent) where the protocol acks."""
    out: dict[str, Any] = {
        "sent": sent,
        "received": received,
        "delivered": delivered,
        "xmit_reqs_sent": xmit_reqs_sent,
        "xmit_reqs_received": xmit_reqs_received,
        "retransmitted": retransmitted,
        "peer_windows": {
            peer: {"low": low, "highest_delivered": hd, "highest_received": hr}
            for peer, (low, hd, hr) in peer_windows.items()
        },
    }
    if pending_acks is not None:
        out["pending_acks"] = pending_acks
    return out
