"""Counting and logging what a transport throws away.

Hostile or stale input (garbage, truncated or oversized datagrams and frames,
a newer wire version, another cluster's traffic) is normal: it is dropped,
counted by reason for `stats`, and logged at most once per ``interval`` per
reason, with how many were suppressed since, so a flood cannot flood the
log. Another cluster on a shared multicast address is expected traffic, so
it is logged at DEBUG only.

So is what a transport could not send because it is stopping or the peer
has gone (the caller says ``quiet``): a member that exits leaves acks and
retransmissions queued to it, and that is no news. Such drops are counted
under their reason like any other and rate-limited apart from that reason's
warnings, so a run of them never holds back a warning about a member that
should be reachable.
"""

from __future__ import annotations

import logging
import time
from typing import Any

__all__ = ["DropLog", "bundle_stats", "drop_stats"]

_QUIET = frozenset({"foreign_cluster"})


class DropLog:
    """Per-reason drop counters plus a rate-limited log line.

    ``direction`` is how a line names the peer: "from" for what came in, "to" for what
    could not be sent ("TCP: dropped no_physical to B: ...").
    """

    def __init__(
        self, logger: logging.Logger, who: str, interval: float = 10.0, direction: str = "from"
    ) -> None:
        self.logger = logger
        self.who = who
        self.interval = interval
        self.direction = direction
        self.counts: dict[str, int] = {}
        self._last: dict[tuple[str, bool], float] = {}
        self._suppressed: dict[tuple[str, bool], int] = {}

    def drop(
        self, reason: str, detail: str, peer: object = None, count: int = 1, *, quiet: bool = False
    ) -> None:
        """Count ``count`` dropped items for ``reason``; log unless logged recently.

        ``quiet``: the drop is expected (see the module docstring): counted
        the same, logged at DEBUG.
        """
        self.count(reason, count)
        key = (reason, quiet or reason in _QUIET)
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + count
            return
        self._last[key] = now
        more = self._suppressed.pop(key, 0)
        level = logging.DEBUG if key[1] else logging.WARNING
        self.logger.log(
            level,
            "%s: dropped %s %s %s: %s%s",
            self.who,
            reason,
            self.direction,
            peer if peer is not None else "unknown",
            detail,
            f" ({more} more since the last report)" if more else "",
        )

    def count(self, reason: str, count: int = 1) -> None:
        """Count ``count`` dropped items for ``reason``, without a log line."""
        self.counts[reason] = self.counts.get(reason, 0) + count

    def snapshot(self) -> dict[str, int]:
        return dict(self.counts)


def drop_stats(sent: DropLog, received: DropLog) -> dict[str, Any]:
    """The drop keys of a socket transport's `stats`, the same for UDP and TCP.

    What was thrown away on the way out is one ``dropped_<reason>`` key per
    reason, with ``dropped_no_physical`` always present (0 until the first),
    so a dashboard finds it before anything went wrong; what came in and was
    thrown away is ``decode_errors``, by reason.
    """
    return {
        "dropped_no_physical": 0,
        **{f"dropped_{reason}": count for reason, count in sent.counts.items()},
        "decode_errors": received.snapshot(),
    }


def bundle_stats(counters: dict[str, int]) -> dict[str, float]:
    """Bundle sizes of a socket transport, from its counters: the average bytes and
    messages per bundle sent and received (0 before the first)."""
    sent, received = counters["bundles_sent"], counters["bundles_received"]
    return {
        "avg_bundle_bytes_sent": counters["bytes_sent"] / sent if sent else 0.0,
        "avg_bundle_msgs_sent": counters["msgs_sent"] / sent if sent else 0.0,
        "avg_bundle_msgs_received": counters["msgs_received"] / received if received else 0.0,
    }
