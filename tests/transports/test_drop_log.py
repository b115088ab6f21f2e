"""Dropped input is counted per reason and logged at most once per interval per reason."""

from __future__ import annotations

import logging

import pytest

from triogroups.transports._drops import DropLog


def test_drops_are_counted_by_reason_and_logged_rate_limited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = DropLog(logging.getLogger("test.drops"), "UDP A", interval=3600)
    with caplog.at_level(logging.DEBUG, logger="test.drops"):
        for _ in range(100):
            log.drop("bad_magic", "starts with b'GE'", "10.0.0.9:1234")
        log.drop("version", "wire version 2", "10.0.0.9:1234", count=5)
    assert log.snapshot() == {"bad_magic": 100, "version": 5}
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "UDP A: dropped bad_magic from 10.0.0.9:1234: starts with b'GE'",
        "UDP A: dropped version from 10.0.0.9:1234: wire version 2",
    ]


def test_the_next_report_says_how_many_were_suppressed(caplog: pytest.LogCaptureFixture) -> None:
    log = DropLog(logging.getLogger("test.drops"), "TCP", interval=3600)
    with caplog.at_level(logging.WARNING, logger="test.drops"):
        log.drop("oversized", "frame length 2147483648", None)
        log.drop("oversized", "again", None, count=2)
        log._last[("oversized", False)] -= 7200  # the interval has passed
        log.drop("oversized", "once more", None)
    assert caplog.records[-1].getMessage().endswith("(2 more since the last report)")
    assert len(caplog.records) == 2


def test_another_clusters_traffic_is_logged_at_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    log = DropLog(logging.getLogger("test.drops"), "UDP")
    with caplog.at_level(logging.INFO, logger="test.drops"):
        log.drop("foreign_cluster", "cluster 'blue'", None)
    assert caplog.records == [] and log.snapshot() == {"foreign_cluster": 1}


def test_quiet_drops_are_counted_at_debug_and_never_hold_back_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A peer that left (quiet) and a member that cannot be reached share a reason and a
    counter; the quiet lines are rate-limited apart, so the warning still comes out."""
    log = DropLog(logging.getLogger("test.drops"), "TCP", interval=3600)
    with caplog.at_level(logging.DEBUG, logger="test.drops"):
        log.drop("connect_failed", "refused", "A", count=2, quiet=True)
        log.drop("connect_failed", "refused again", "A", quiet=True)
        log.drop("connect_failed", "timed out", "B")
    assert log.snapshot() == {"connect_failed": 4}
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, "TCP: dropped connect_failed from A: refused"),
        (logging.WARNING, "TCP: dropped connect_failed from B: timed out"),
    ]


def test_what_could_not_be_sent_names_the_peer_it_was_for(caplog: pytest.LogCaptureFixture) -> None:
    """A transport's send drops say "to" the peer: "from" read as if B had sent it."""
    log = DropLog(logging.getLogger("test.drops"), "TCP", direction="to")
    with caplog.at_level(logging.WARNING, logger="test.drops"):
        log.drop("no_physical", "unknown physical address", "B")
    assert (
        caplog.records[0].getMessage() == "TCP: dropped no_physical to B: unknown physical address"
    )
