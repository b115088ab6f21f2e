"""The bundler: what every transport does to a queue of outgoing messages.

A transport takes everything queued by the layer above in one go (`drain`),
groups it by destination and picks out what is delivered locally (`route`),
packs each group into bundles no larger than the bundle limit (`pack`) and
encodes each bundle once (`encode_bundles`). It flushes as soon as the queue
is dry: a lone message leaves at once (no added latency), and under load many
messages share one datagram or frame (one syscall for many messages).

Pure functions over messages: no sockets, no clock. DONT_BUNDLE messages are
always sent in a bundle of their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import trio

from triogroups.address import Address
from triogroups.events import Event, Item
from triogroups.message import Flag, Message
from triogroups.wire import WireCodec

__all__ = ["BUNDLE_OVERHEAD", "drain", "encode_bundles", "pack", "route", "segments"]

_DONT_BUNDLE = int(Flag.DONT_BUNDLE)
_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
_UNSET = object()

#: Allowance for the bundle prefix and the [dest, src, [...]] envelope.
BUNDLE_OVERHEAD = 64


def drain(channel: trio.MemoryReceiveChannel[Item], first: Item, limit: int = 1024) -> list[Item]:
    """``first`` plus every item already queued on ``channel`` (at most ``limit``), no await."""
    items = [first]
    while len(items) < limit:
        try:
            items.append(channel.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            break
    return items


def segments(items: list[Item]) -> Iterator[list[Message] | Event]:
    """Merge consecutive batches into one; events keep their place between them."""
    batch: list[Message] = []
    for item in items:
        if type(item) is list:
            batch.extend(item)
        else:
            if batch:
                yield batch
                batch = []
            yield item  # type: ignore[misc,unused-ignore]
    if batch:
        yield batch


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


def encode_bundles(
    codec: WireCodec,
    dest: Address | None,
    src: Address,
    msgs: list[Message],
    max_size: int,
) -> tuple[list[tuple[bytes, int]], list[Message]]:
    """Encoded bundles with their message counts, plus messages too large to send.

    `Message.size` is an estimate; a bundle the codec refuses is split in
    half and retried, so only a message that cannot fit on its own is dropped.
    """
    out: list[tuple[bytes, int]] = []
    too_large: list[Message] = []
    todo = pack(msgs, max_size)
    todo.reverse()
    while todo:
        bundle = todo.pop()
        try:
            out.append((codec.encode(dest, src, bundle), len(bundle)))
        except ValueError:
            if len(bundle) == 1:
                too_large.append(bundle[0])
                continue
            half = len(bundle) // 2
            todo.append(bundle[half:])
            todo.append(bundle[:half])
    return out, too_large
