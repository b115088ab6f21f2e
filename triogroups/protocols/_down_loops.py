# cython: annotation_typing=False
# (the header above: Cython types this module from _down_loops.pxd alone, not its annotations)
"""The per-message loops of the protocols' send paths: what each message costs on its way down.

A batch the channel sends crosses the stack's layers in one call each, but some layers read
every message of it: NAKACK2 numbers each multicast and makes the copy it delivers at once
(`number_multicasts`), FRAG looks for a payload it must split (`largest_payload`), the flow
control layers add up the bytes a batch costs (`flow_cost`), and MFC and STABLE the bytes
that will not loop back (`unlooped_bytes`). Plain Python and the reference; the build compiles this
same file with Cython (typed by ``_down_loops.pxd``, which reads and makes `Message`s in the
layout ``triogroups/_message_layout.pxd`` declares) when a C compiler is there, and
`triogroups._compiled` picks which form runs (issue 43). The Python must stay valid Cython in
pure-Python mode: ``message.new_message`` is `triogroups.message.new_message` here and the C
constructor of ``_message_layout.pxd`` once compiled (see there).
"""

from __future__ import annotations

from triogroups import message
from triogroups.address import Address
from triogroups.message import Flag, Message

__all__ = ["NO_DESTINATION", "flow_cost", "largest_payload", "number_multicasts", "unlooped_bytes"]

_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
_NO_RELIABILITY = int(Flag.NO_RELIABILITY)
_NO_FC = int(Flag.NO_FC)

#: `flow_cost`'s destination when the batch has none of the kind asked for.
NO_DESTINATION = object()


def number_multicasts(
    batch: list[Message], seqno: int, me: Address, pid: int
) -> tuple[list[Message], list[Message]]:
    """NAKACK2's numbering: give each reliable multicast of ``batch`` (no NO_RELIABILITY)
    the next seqno after ``seqno`` as the bare int header of protocol ``pid``; returns
    those multicasts, in order, and the copies of them to deliver here at once.

    A multicast without DONT_LOOPBACK gets a copy from ``me`` (`Message.copy`'s, the
    source set) and then the flag: delivered here, it must not come back from the
    transport a second time."""
    kept: list[Message] = []
    local: list[Message] = []
    for msg in batch:
        flags = msg.flags
        if msg.dest is not None or flags & _NO_RELIABILITY:
            continue
        seqno += 1
        headers = msg.headers
        headers[pid] = seqno
        kept.append(msg)
        if not flags & _DONT_LOOPBACK:
            local.append(message.new_message(None, me, flags, headers.copy(), msg.payload))
            msg.flags = flags | _DONT_LOOPBACK
    return kept, local


def largest_payload(batch: list[Message]) -> int:
    """The size of the largest payload in ``batch`` (0 for an empty batch): FRAG splits
    none of a batch whose largest payload fits one fragment."""
    largest = 0
    for msg in batch:
        size = len(msg.payload)
        if size > largest:
            largest = size
    return largest


def flow_cost(batch: list[Message], multicast: bool) -> tuple[object, int] | None:
    """What a flow control layer (multicasts or unicasts, as ``multicast`` says) charges
    for ``batch`` when its messages of that kind all go to one destination: that
    destination (`NO_DESTINATION` if none is of that kind) and the payload bytes of
    those without NO_FC; None when they go to more than one."""
    key: object = NO_DESTINATION
    total = 0
    for msg in batch:
        dest = msg.dest
        if (dest is None) is not multicast:
            continue
        if dest is not key:
            if key is not NO_DESTINATION:
                return None
            key = dest
        if not msg.flags & _NO_FC:
            total += len(msg.payload)
    return key, total


def unlooped_bytes(batch: list[Message], skip: int) -> int:
    """The payload bytes of the multicasts in ``batch`` that carry DONT_LOOPBACK and none
    of the flags ``skip``: what their sender will never receive, which STABLE counts
    (``skip`` 0) and MFC credits itself for (``skip`` NO_FC)."""
    total = 0
    for msg in batch:
        flags = msg.flags
        if msg.dest is None and flags & _DONT_LOOPBACK and not flags & skip:
            total += len(msg.payload)
    return total
