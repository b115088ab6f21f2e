"""A member process dies with its supervisor: no orphans, even after SIGKILL.

Two independent signals, as the issue asks: on Linux the kernel sends the member SIGTERM when
its parent dies (``prctl(PR_SET_PDEATHSIG)``, through ctypes), and on every platform the member
watches a pipe from the parent (its stdin, silent after the payload was read from it) whose
EOF means the parent is gone. Both end in the same graceful leave as an ordinary SIGTERM. This
module only notices; leaving is the member runner's business.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

import trio

__all__ = ["die_with_parent", "wait_parent_gone"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel for SIGTERM when the parent dies; exit at once if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:  # it died before the prctl took effect
        sys.exit(f"supervisor {parent_pid} is gone before the member started")


async def wait_parent_gone() -> None:
    """Return when the pipe from the parent (stdin) reaches EOF or breaks."""
    stream = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stream:
        try:
            while await stream.receive_some(4096):
                pass
        except trio.BrokenResourceError:
            pass
