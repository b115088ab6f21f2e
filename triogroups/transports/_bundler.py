"""The bundler: what every transport does to a queue of outgoing messages.

A transport takes everything queued by the layer above in one go (`drain`),
groups it by destination and picks out what is delivered locally (`route`),
packs each group into bundles no larger than the bundle limit (`pack`) and
encodes each bundle once (`encode_bundles`). It flushes as soon as the queue
is dry: a lone message leaves at once (no added latency), and under load many
messages share one datagram or frame (one syscall for many messages). `route`
and `pack` run once per message: they live in
`triogroups.transports._bundle_loop`, which the build compiles, and are
re-exported here in the form this process runs.

Pure functions over messages: no sockets, no clock. DONT_BUNDLE messages are
always sent in a bundle of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType

import trio

from triogroups import _compiled
from triogroups.address import Address
from triogroups.events import Event, Item
from triogroups.message import Message
from triogroups.wire import WireCodec

__all__ = ["BUNDLE_OVERHEAD", "LOOP", "drain", "encode_bundles", "pack", "route", "segments"]

#: The per-message loops (`triogroups.transports._bundle_loop`) in the form this process
#: runs: compiled where the build made it, unless ``TRIOGROUPS_PURE_PYTHON`` is set.
LOOP: ModuleType = _compiled.load("transports._bundle_loop")
route: Callable[
    [list[Message], Address], tuple[dict[Address | None, list[Message]], list[Message]]
] = LOOP.route
pack: Callable[[list[Message], int], list[list[Message]]] = LOOP.pack
#: Allowance for the bundle prefix and the [dest, src, [...]] envelope.
BUNDLE_OVERHEAD: int = LOOP.BUNDLE_OVERHEAD


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
