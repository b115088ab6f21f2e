# cython: annotation_typing=False
# (the header above: Cython types this module from _bundle_loop.pxd alone, not its annotations)
"""The bundler's per-message loops: routing a queue of outgoing messages, packing bundles.

`route` groups what the layer above queued by destination and picks out what is delivered
locally; `pack` splits a destination's messages into bundles below the size limit (the rest
of the bundler, `triogroups.transports._bundler`, runs once per flush or bundle). Plain
Python and the reference; the build compiles this same file with Cython (typed by
``_bundle_loop.pxd``, which reads `Message`'s slots from the layout
``triogroups/_message_layout.pxd`` declares) when a C compiler is there, and
`triogroups._compiled` picks which form runs. The Python must stay valid Cython in
pure-Python mode.

`route` stamps each message's source: the compiled form stores it into the slot directly,
which assumes the slot is set, as it is in every message (`Message.__init__` and
`new_message` set all five).
"""

from __future__ import annotations

from triogroups.address import Address
from triogroups.message import Flag, Message

__all__ = ["BUNDLE_OVERHEAD", "pack", "route"]

_DONT_BUNDLE = int(Flag.DONT_BUNDLE)
_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
_UNSET = object()

#: Allowance for the bundle prefix and the [dest, src, [...]] envelope.
BUNDLE_OVERHEAD = 64


def route(
    batch: list[Message], me: Address
) -> tuple[dict[Address | None, list[Message]], list[Message]]:
    """Group by destination (None = the group) and pick out local deliveries.

    Stamps every message with ``src = me``. A unicast to ``me`` is only local;
    a multicast is sent and also looped back unless it has DONT_LOOPBACK.
    """
    by_dest: dict[Address | None, list[Message]] = {}
    local: list[Message] = []
    last: object = _UNSET
    group: list[Message] = local
    to_me = False
    for msg in batch:
        msg.src = me
        dest = msg.dest
        if dest is not last:  # runs of one destination skip Address.__eq__ / __hash__
            last = dest
            to_me = dest is not None and dest == me
            if not to_me:
                group = by_dest.setdefault(dest, [])
        if to_me:
            local.append(msg)
            continue
        if dest is None and not msg.flags & _DONT_LOOPBACK:
            local.append(msg)
        group.append(msg)
    return by_dest, local


def pack(msgs: list[Message], max_size: int) -> list[list[Message]]:
    """Split into bundles whose estimated size stays below ``max_size``; keeps order."""
    bundles: list[list[Message]] = []
    current: list[Message] = []
    size = BUNDLE_OVERHEAD
    for msg in msgs:
        if msg.flags & _DONT_BUNDLE:
            bundles.append([msg])
            continue
        msize = len(msg.payload) + 8 + 16 * len(msg.headers)  # Message.size(), inlined
        if current and size + msize > max_size:
            bundles.append(current)
            current, size = [], BUNDLE_OVERHEAD
        current.append(msg)
        size += msize
    if current:
        bundles.append(current)
    return bundles
