# cython: annotation_typing=False
# (the header above: Cython types this module from _handoff.pxd alone, not its annotations)
"""The channel's hand-off: a run of plain application messages made into `Received` records.

What the channel's reader and dispatcher do with each plain application message they hand to
the receive queue (`Reader._ready_run`): decode its payload, align it with the state the
member received (`Alignment`), and make the record the application reads. It runs once per
delivered message, the receive side's largest cost in the channel (issue 43). Plain Python
and the reference; the build compiles this same file with Cython (typed by
``_handoff.pxd``, which reads `Message`'s slots from the layout
``triogroups/_message_layout.pxd`` declares) when a C compiler is there, and
`triogroups._compiled` picks which form runs. The Python must stay valid Cython in
pure-Python mode.
"""

from __future__ import annotations

from triogroups._channel._core import _OOB, _RPC, _SEQNO, _STATE, _TAGGED
from triogroups._channel._inbox import Received
from triogroups._channel._state import Alignment
from triogroups._payload import PayloadError, decode_payload
from triogroups.message import Message

__all__ = ["ready_run"]

# `Received` is a NamedTuple, whose own constructor is a Python function with keyword
# defaults; its records are made as the tuples they are, in one call (`received`).
_new = tuple.__new__


def ready_run(
    batch: list[Message | Received],
    i: int,
    out: list[Received],
    limit: int,
    align: Alignment,
    allow_pickle: bool,
) -> int:
    """Append to ``out`` the `Received` of each plain application message of ``batch`` from
    ``batch[i]`` on, at most ``limit`` of them, and return the index of the first message
    not done: one that is not a `Message`, carries state or RPC, has no source, or has a
    payload that does not decode. A message the state already contains (`Alignment.accept`
    says so) is done and makes no record.

    An untagged payload, what most applications send, is handed over as it is; a tagged one
    is `decode_payload`'s. A batch holds runs of one sender's next seqnos: such a run is
    accepted without `Alignment.accept` and written to its table once, at the run's end,
    instead of twice per message (each an `Address.__hash__` call); every other seqno goes
    to `accept`, with the table up to date.
    """
    delivered = align.delivered
    run_src = None  # the sender of the current run of next seqnos
    last = 0  # run_src's last seqno accepted, not yet written to `delivered`
    end = min(len(batch), i + limit)
    while i < end:
        item = batch[i]
        if type(item) is not Message:
            break
        msg = item
        headers = msg.headers
        src = msg.src
        if _STATE in headers or _RPC in headers or src is None:
            break
        flags = msg.flags
        if flags & _TAGGED:
            try:
                value, body = decode_payload(msg.payload, allow_pickle=allow_pickle)
            except PayloadError:
                break
        else:
            value = body = msg.payload
        i += 1
        seqno = headers.get(_SEQNO)
        if seqno is not None:
            if src is run_src and seqno == last + 1:
                last = seqno
            else:
                if run_src is not None:
                    delivered[run_src] = last
                    run_src = None
                if seqno == delivered.get(src, 0) + 1:
                    run_src = src
                    last = seqno
                elif not align.accept(src, seqno):
                    continue
        out.append(_new(Received, (src, value, body, (flags & _OOB) != 0, msg.dest is None)))
    if run_src is not None:
        delivered[run_src] = last
    return i
