"""SEQUENCER's two per-member tables kept small: the forward table and the delivery table.

Pure functions on the dicts the protocol owns (`Sequencer._forward_table`, `_delivered`):
the forward table forgets what came back in the order, the delivery table forgets
forwarders gone long ago. Nothing here sends or reads a clock.
"""

from __future__ import annotations

from collections import deque

from triogroups.address import Address
from triogroups.message import Message
from triogroups.view import View

__all__ = ["DEPARTED_KEPT", "forget_departed", "forget_forwarded"]

#: Departed forwarders whose highest seqno is still kept (a tail may hold their messages).
DEPARTED_KEPT = 256


def forget_forwarded(table: dict[int, Message], seqno: int) -> Message | None:
    """Drop our multicasts up to ``seqno`` from the forward ``table`` (by seqno, ascending);
    the one of ``seqno``, if it was still there.

    The table's seqnos are always one run of consecutive numbers: each new one is one above
    the highest, and they go from the lowest up (here) or all at once. So when ``seqno`` is
    in it, what goes is ``seqno`` and the run below it, found by walking down. Asking for
    the lowest key (``next(iter(table))``) instead made CPython skip every slot popped from
    the front of the dict since its last resize: a cost per message that grew with the
    table, up to microseconds for the thousands of messages flow control lets a forwarder
    have in flight (``bench_channel.py --presets udp,udp-total``)."""
    found = table.pop(seqno, None)
    if found is None:  # not ours to find (a duplicate, a stale seqno): the general way
        while table:
            first = next(iter(table))
            if first > seqno:
                break
            del table[first]
        return None
    below = seqno - 1
    while below in table:
        del table[below]
        below -= 1
    return found


def forget_departed(delivered: dict[Address, int], departed: deque[Address], view: View) -> None:
    """Keep the delivery table bounded: of the forwarders not in ``view``, the
    `DEPARTED_KEPT` that left last keep their highest seqno (``departed`` holds them in
    the order they left); older ones are forgotten."""
    for member in delivered.keys() - set(view.members):
        if member not in departed:
            departed.append(member)
    while len(departed) > DEPARTED_KEPT:
        gone = departed.popleft()
        if gone not in view:
            delivered.pop(gone, None)
