"""Ports for the clusters this host starts for itself: the demo, chaos runs, the test kit's
real-process tests and the benchmarks.

Each used to draw a random port from 20,000-60,000 and hope, and a suite run on two cores
failed now and then: test workers drawing side by side drew overlapping runs, so one
cluster's discovery found another's members (TCPPING found a stranger on its first port, and
each member started a group of its own); and the upper part of that range is the kernel's
ephemeral range (32768-60999 on Linux), from which every outgoing TCP connection and every
socket bound to port 0 takes its local port, which can push a member off the ports its
discovery lists.

`free_ports` checks that the ports are free when it returns them, and draws from a block
below the ephemeral range. Runs side by side on one host give each its own block through
`PORTS_ENV` (the test suite does, per worker), so they never draw the same port; what is
left is a port that another program binds between the check and the member's own bind.
"""

from __future__ import annotations

import os
import random
import socket

__all__ = ["DEFAULT_BLOCK", "PORTS_ENV", "free_ports", "port_block"]

#: The environment variable that narrows the block: ``LOW-HIGH`` (both included).
PORTS_ENV = "TRIOGROUPS_PORTS"

#: Where ports are drawn from by default: below Linux's ephemeral range, above the
#: well-known services and the presets' own defaults (7500, 7800, 45588).
DEFAULT_BLOCK = (20_000, 32_000)

_TRIES = 200


def port_block() -> tuple[int, int]:
    """The block ports are drawn from, ``(low, high)`` with both included: `PORTS_ENV`'s
    value, or `DEFAULT_BLOCK`. Raises ValueError naming the variable for a bad value."""
    text = os.environ.get(PORTS_ENV, "").strip()
    if not text:
        return DEFAULT_BLOCK
    low_text, dash, high_text = text.partition("-")
    try:
        low, high = int(low_text), int(high_text)
    except ValueError:
        low = high = -1
    if not dash or not 1024 <= low <= high <= 65535:
        raise ValueError(
            f"{PORTS_ENV} must be LOW-HIGH with 1024 <= LOW <= HIGH <= 65535, got {text!r}"
        )
    return low, high


def free_ports(count: int = 1, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive ports of `port_block` that nothing has bound on
    ``host`` right now, for TCP nor UDP: a TCP member's ``bind_port`` with its
    ``port_range`` after it, a multicast port, a diagnostics port and its range.

    Raises ValueError for a ``count`` the block cannot hold, RuntimeError when no such
    run turned up in a few hundred draws (the block is nearly full).
    """
    low, high = port_block()
    if not 1 <= count <= high - low + 1:
        raise ValueError(
            f"count must be in 1..{high - low + 1} (the block {low}-{high}), got {count}"
        )
    for _ in range(_TRIES):
        base = random.randint(low, high - count + 1)
        if all(_free(host, port) for port in range(base, base + count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports on {host} in {low}-{high}")


def _free(host: str, port: int) -> bool:
    """Whether a TCP and a UDP socket can each bind ``host:port`` now (without
    SO_REUSEADDR, so a port in use in any way, even shared, counts as taken)."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                return False
    return True
