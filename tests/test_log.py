"""`warn_once`: a warning that would repeat at every start is logged once per process."""

from __future__ import annotations

import logging
import uuid

import pytest

from triogroups._log import warn_once


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
