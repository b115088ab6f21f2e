"""NAKACK2's header, its message types, and the seqno-range encoding of XMIT_REQ.

One NamedTuple for every NAKACK2 message but the most common: a regular
multicast (MSG) carries its bare seqno, an int (``bare_int`` in
`register_header`), since every multicast pays for building, encoding,
decoding and checking its header. A MSG header as the NamedTuple is still
understood.
`fit_ranges` sizes an XMIT_REQ's ranges in encoded bytes (the wire codec
packs the tuple as a msgpack array of ints), so a request fits one bundle.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from triogroups.address import Address
from triogroups.message import Message
from triogroups.protocols import ids
from triogroups.wire import register_header

__all__ = [
    "HIGHEST_SEQNO",
    "MSG",
    "TYPE_NAMES",
    "VIEW_SEQNO",
    "XMIT_REQ",
    "XMIT_RSP",
    "NakAckHeader2",
    "as_header",
    "expand_ranges",
    "fit_ranges",
    "position",
    "to_ranges",
]

MSG = 1
XMIT_REQ = 2
XMIT_RSP = 3
HIGHEST_SEQNO = 4
VIEW_SEQNO = 5

TYPE_NAMES = {
    MSG: "MSG",
    XMIT_REQ: "XMIT_REQ",
    XMIT_RSP: "XMIT_RSP",
    HIGHEST_SEQNO: "HIGHEST_SEQNO",
    VIEW_SEQNO: "VIEW_SEQNO",
}


class NakAckHeader2(NamedTuple):
    """``type`` is MSG, XMIT_REQ, XMIT_RSP, HIGHEST_SEQNO or VIEW_SEQNO.

    MSG and XMIT_RSP: ``seqno`` of the message; HIGHEST_SEQNO: the sender's
    highest seqno; VIEW_SEQNO: the sender's highest seqno when it installed
    the view in which the receiver is new. XMIT_REQ and XMIT_RSP: ``sender`` is the original sender.
    XMIT_REQ: ``ranges`` lists the missing seqnos as flattened (first, last)
    pairs, so a long run of losses costs two ints.
    """

    type: int
    seqno: int = 0
    sender: Address | None = None
    ranges: tuple[int, ...] = ()


register_header(ids.NAKACK2, NakAckHeader2, bare_int=True)


def as_header(raw: NakAckHeader2 | int | None) -> NakAckHeader2 | None:
    """A NAKACK2 header as found in ``Message.headers``, as the NamedTuple: a bare
    seqno is a MSG's. For code that looks at NAKACK2's messages from outside (tests,
    diagnostics); the protocol reads the int itself."""
    if type(raw) is int:
        return NakAckHeader2(MSG, raw)
    return raw  # type: ignore[return-value]


def position(msg: Message) -> tuple[Address, int] | None:
    """A delivered multicast's original sender and seqno, None if NAKACK2 did not number it
    (for `ViewDigest.at_controls`). A delivered XMIT_RSP already has its sender as ``src``."""
    hdr = msg.headers.get(ids.NAKACK2)
    if hdr is None or msg.dest is not None or msg.src is None:
        return None
    if type(hdr) is int:
        return msg.src, hdr
    if hdr.type not in (MSG, XMIT_RSP):
        return None
    return msg.src, hdr.seqno


def to_ranges(seqnos: Iterable[int]) -> tuple[int, ...]:
    """Ascending seqnos as flattened (first, last) pairs: [1, 2, 3, 7] -> (1, 3, 7, 7)."""
    out: list[int] = []
    for s in seqnos:
        if out and s == out[-1] + 1:
            out[-1] = s
        else:
            out += (s, s)
    return tuple(out)


def expand_ranges(ranges: tuple[int, ...], low: int, high: int, limit: int) -> list[int] | None:
    """The seqnos of ``ranges`` that lie in [low, high], at most ``limit`` of them.

    None when ``ranges`` is malformed (odd length, first > last, seqno < 1):
    it comes off the wire, so a hostile request can neither crash the
    sender nor make it walk a billion-long range.
    """
    if len(ranges) % 2:
        return None
    out: list[int] = []
    for i in range(0, len(ranges), 2):
        first, last = ranges[i], ranges[i + 1]
        if first < 1 or first > last:
            return None
        for s in range(max(first, low), min(last, high) + 1):
            if len(out) >= limit:
                return out
            out.append(s)
    return out


def _packed_int_size(n: int) -> int:
    """Bytes msgpack packs a non-negative int into (a seqno)."""
    if n < 0x80:
        return 1
    if n < 0x100:
        return 2
    if n < 0x1_0000:
        return 3
    if n < 0x1_0000_0000:
        return 5
    return 9


def _packed_array_header_size(length: int) -> int:
    """Bytes msgpack spends on the header of an array of ``length`` items."""
    return 1 if length < 16 else 3 if length < 0x1_0000 else 5


def fit_ranges(seqnos: Iterable[int], budget: int) -> tuple[tuple[int, ...], int]:
    """The ranges of the longest prefix of ascending ``seqnos`` that packs into ``budget``
    bytes, and how many seqnos that prefix holds.

    The size is exactly what the wire codec emits for the ``ranges`` field
    (array header included), so the caller can budget a request in bytes
    (JGRP-1868: a request larger than a bundle is dropped by the transport).
    """
    out: list[int] = []
    size = _packed_array_header_size(0)
    count = 0
    for s in seqnos:
        if out and s == out[-1] + 1:
            grown = size - _packed_int_size(out[-1]) + _packed_int_size(s)
            if grown > budget:
                break
            out[-1] = s
        else:
            n = len(out) + 2
            grown = size + 2 * _packed_int_size(s)
            grown += _packed_array_header_size(n) - _packed_array_header_size(n - 2)
            if grown > budget:
                break
            out += (s, s)
        size = grown
        count += 1
    return tuple(out), count
