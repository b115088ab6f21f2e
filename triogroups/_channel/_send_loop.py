# cython: annotation_typing=False
# (the header above: Cython types this module from _send_loop.pxd alone, not its annotations)
"""The channel's per-message send work: making an application's multicast and numbering it.

Every ordered multicast an application sends gets the next application seqno of its channel
(the APP_SEQNO header, a plain int), which lets a receiver's channel tell what it missed
across a state transfer. `multicast` makes the message `Channel.send` sends for a payload of
bytes, numbered; `stamp` numbers the ordered multicasts of a batch made otherwise. Plain
Python and the reference; the build compiles this same file with Cython (typed by
``_send_loop.pxd``: `Message`'s slots in the layout ``triogroups/_message_layout.pxd``
declares, and its C constructor as ``message.new_message``) when a C compiler is there, and
`triogroups._compiled` picks which form runs (issue 43).
"""

from __future__ import annotations

from triogroups import message
from triogroups.message import Flag, Message
from triogroups.protocols import ids

__all__ = ["multicast", "stamp"]

_SEQNO = ids.APP_SEQNO
_UNORDERED = int(Flag.OOB | Flag.DONT_LOOPBACK)  # multicasts that get no application seqno


def multicast(payload: bytes, seqno: int) -> Message:
    """The ordered multicast of the application's ``payload`` as it is (untagged),
    numbered ``seqno``."""
    return message.new_message(None, None, 0, {_SEQNO: seqno}, payload)


def stamp(msgs: list[Message], seqno: int) -> int:
    """Give each ordered multicast of ``msgs`` (to the group, neither OOB nor
    DONT_LOOPBACK) the next application seqno after ``seqno``; the last one given."""
    for msg in msgs:
        if msg.dest is None and not msg.flags & _UNORDERED:
            seqno += 1
            msg.headers[_SEQNO] = seqno
    return seqno
