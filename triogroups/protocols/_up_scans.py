# cython: annotation_typing=False
# (the header above: Cython types this module from _up_scans.pxd alone, not its annotations)
"""The reads protocols make of every message of a batch that comes up, one loop each.

UFC and MFC spend a sender's credits by the payload bytes it sent (`FlowControl.up`),
STABLE counts the multicast bytes received towards its ``max_bytes`` (`Stable.up`), and
NAKACK2 and MCAST look for a VIEW in every batch they deliver (`ViewDigest.at_controls`):
each reads every message of every batch that passes it on its way up, which made these
loops a cost per message per layer on the receive path (issue 43). Plain Python and the
reference; the build compiles this same file with Cython (typed by ``_up_scans.pxd``, which
reads `Message`'s slots from the layout ``triogroups/_message_layout.pxd`` declares) when a
C compiler is there, and `triogroups._compiled` picks which form runs. The Python must stay
valid Cython in pure-Python mode. ``any_flagged`` is written out rather than as
``any(...)`` over a generator, which costs a generator per batch in either form.
"""

from __future__ import annotations

from triogroups.address import Address
from triogroups.message import Flag, Message

__all__ = ["any_flagged", "bytes_by_sender", "multicast_bytes"]

_NO_FC = int(Flag.NO_FC)


def multicast_bytes(batch: list[Message], pid: int) -> int:
    """The payload bytes of the multicasts of ``batch``, or -1 if a message of it carries
    a header of protocol ``pid`` (then the layer reads the batch message by message)."""
    total = 0
    for msg in batch:
        if pid in msg.headers:
            return -1
        if msg.dest is None:
            total += len(msg.payload)
    return total


def bytes_by_sender(
    batch: list[Message], pid: int, multicast: bool, used: dict[Address, int]
) -> bool:
    """Add to ``used`` the payload bytes each sender sent in ``batch`` that flow control
    counts: multicasts if ``multicast``, else unicasts, without `Flag.NO_FC`, from a known
    source, with a payload. True if a message of ``batch`` carries a header of protocol
    ``pid`` (a control message, which is not counted).

    A batch holds runs from one sender: the bytes are summed per run, one dict operation
    per run, not per message.
    """
    controls = False
    run_src = None
    run_bytes = 0
    for msg in batch:
        if pid in msg.headers:
            controls = True
            continue
        if (msg.dest is None) != multicast or msg.flags & _NO_FC:
            continue
        src = msg.src
        if src is run_src:
            run_bytes += len(msg.payload)
        elif src is not None and msg.payload:
            if run_src is not None:
                used[run_src] = used.get(run_src, 0) + run_bytes
            run_src = src
            run_bytes = len(msg.payload)
    if run_src is not None:
        used[run_src] = used.get(run_src, 0) + run_bytes
    return controls


def any_flagged(batch: list[Message], flags: int) -> bool:
    """Whether a message of ``batch`` has one of ``flags`` set."""
    for msg in batch:  # noqa: SIM110
        if msg.flags & flags:
            return True
    return False
