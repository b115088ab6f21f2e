# cython: annotation_typing=False
# (the header above: Cython types this module from _scan.pxd alone, not its annotations)
"""The layer host's per-message scans: whether no message of a batch is one a layer handles.

A layer that promises to pass some messages on untouched (`Protocol.passes_up`) is skipped
for a batch made only of those (`triogroups._layer._ways.passes`); finding that out reads
every message of the batch at every such layer, up and down, which made these loops the
host's one cost per message per hop. Plain Python and the reference; the build compiles
this same file with Cython (typed by ``_scan.pxd``, which reads `Message`'s slots from the
layout ``triogroups/_message_layout.pxd`` declares) when a C compiler is there, and
`triogroups._compiled` picks which form runs. The Python must stay valid Cython in
pure-Python mode. The loops are written out rather than as ``all(...)`` over a generator,
which costs a generator per batch in either form (ruff's SIM110 is silenced for that).
"""

from __future__ import annotations

from triogroups.message import Message

__all__ = ["multicasts_without", "none_carries", "unicasts_without"]


def none_carries(batch: list[Message], pid: int) -> bool:
    """Whether no message of ``batch`` carries a header of protocol ``pid``."""
    for msg in batch:  # noqa: SIM110
        if pid in msg.headers:
            return False
    return True


def unicasts_without(batch: list[Message], pid: int) -> bool:
    """Whether every message of ``batch`` is a unicast without a header of ``pid``."""
    for msg in batch:  # noqa: SIM110
        if msg.dest is None or pid in msg.headers:
            return False
    return True


def multicasts_without(batch: list[Message], pid: int) -> bool:
    """Whether every message of ``batch`` is a multicast without a header of ``pid``."""
    for msg in batch:  # noqa: SIM110
        if msg.dest is not None or pid in msg.headers:
            return False
    return True
