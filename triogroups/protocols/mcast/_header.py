"""MCAST's header, its message types, and the flags its messages carry.

One NamedTuple for every MCAST message but the most common: a regular
multicast (MSG) carries its bare seqno, an int (``bare_int`` in
`register_header`), since every multicast would pay for building, encoding,
decoding and checking the tuple. `as_header` turns either form into the tuple
for code that is not on the in-order path.
"""

from __future__ import annotations

from typing import NamedTuple

from triogroups.address import Address
from triogroups.message import Flag
from triogroups.protocols import ids
from triogroups.wire import register_header

__all__ = [
    "ACK",
    "CONTROL_FLAGS",
    "DONT_LOOPBACK",
    "INTERNAL",
    "MSG",
    "NO_RELIABILITY",
    "OOB",
    "PURGED",
    "XMIT_REQ",
    "XMIT_RSP",
    "McastHeader",
    "as_header",
]

#: Header types.
MSG = 0
XMIT_REQ = 1
XMIT_RSP = 2
ACK = 3
PURGED = 4

#: The message flags MCAST reads and sets, as ints (the hot paths test ``msg.flags & OOB``).
OOB = int(Flag.OOB)
DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
NO_RELIABILITY = int(Flag.NO_RELIABILITY)
INTERNAL = int(Flag.INTERNAL)
#: ACK, XMIT_REQ and PURGED: never numbered, never held behind the application's messages.
CONTROL_FLAGS = int(Flag.OOB | Flag.INTERNAL)


class McastHeader(NamedTuple):
    """On ACK, XMIT_REQ, PURGED and retransmissions. A regular multicast (MSG) carries
    its bare seqno instead, an int (``bare_int`` in `register_header`): every multicast
    would pay for building, encoding, decoding and checking the tuple. The tuple form of
    MSG is still understood.

    ``seqno``: the message's seqno (MSG, XMIT_RSP), the highest delivered
    (ACK), or the highest purged from the send window (PURGED). ``sender``:
    the original sender of a retransmission. ``missing``: the seqnos an
    XMIT_REQ asks for.
    """

    type: int
    seqno: int
    sender: Address | None = None
    missing: tuple[int, ...] = ()


register_header(ids.MCAST, McastHeader, bare_int=True)


def as_header(raw: McastHeader | int | None) -> McastHeader | None:
    """An MCAST header as found in ``Message.headers``, as the NamedTuple: a bare seqno
    is a MSG's. For code that looks at MCAST's messages from outside (tests,
    diagnostics), and for the protocol's slower paths; its in-order path reads the
    int itself."""
    if type(raw) is int:
        return McastHeader(MSG, raw)
    return raw  # type: ignore[return-value]
