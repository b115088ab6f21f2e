"""What a command stopped by a signal says on stderr (issue 38 item 6), checked in one place."""

from __future__ import annotations

import signal


def assert_stopped_in_one_line(err: str, command: str, signum: signal.Signals) -> None:
    """One line about the stop, after at most the launch's one socket-buffer warning (said
    once per launch on a machine whose kernel grants smaller buffers than asked)."""
    *before, last = err.splitlines()
    assert last == (
        f"triogroups {command}: stopped by {signum.name}: its member processes were stopped; "
        "nothing was checked"
    ), err
    assert all("socket buffers" in line for line in before) and len(before) <= 1, err
