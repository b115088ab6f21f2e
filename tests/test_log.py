"""`warn_once`: a warning that would repeat at every start is logged once per process."""

from __future__ import annotations

import logging
import uuid

import pytest

from triogroups._log import said_elsewhere, warn_once


def test_warn_once_logs_a_key_once_per_logger(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 12 item 9: the same key on the same logger is said once; another key, or
    the same key on another logger, is news."""
    run = uuid.uuid4().hex  # keys of this run's own: the memory is the process's
    first, second = f"test.once.{run}.a", f"test.once.{run}.b"
    with caplog.at_level(logging.WARNING):
        said = [
            warn_once(logging.getLogger(first), ("buffers", 1), "short %s", "A"),
            warn_once(logging.getLogger(first), ("buffers", 1), "short %s", "B"),
            warn_once(logging.getLogger(first), ("buffers", 2), "short %s", "C"),
            warn_once(logging.getLogger(second), ("buffers", 1), "short %s", "D"),
        ]
    assert said == [True, False, True, True]
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        (first, logging.WARNING, "short A"),
        (first, logging.WARNING, "short C"),
        (second, logging.WARNING, "short D"),
    ]


def test_a_warning_said_elsewhere_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 38 item 13: a member process of a group whose supervisor says a socket-buffer
    shortfall once for all keeps its own at INFO; other kinds stay warnings."""
    run = uuid.uuid4().hex
    logger = logging.getLogger(f"test.elsewhere.{run}")
    said_elsewhere(f"buffers-{run}")
    with caplog.at_level(logging.INFO):
        warn_once(logger, (f"buffers-{run}", 1), "short")
        warn_once(logger, ("resolve", run), "unresolved")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "short"),
        (logging.WARNING, "unresolved"),
    ]
