"""The bundler: routing, packing below the size limit, DONT_BUNDLE, draining the queue."""

from __future__ import annotations

import trio

from triogroups import Address, Flag, Message
from triogroups.events import Item
from triogroups.extend import ViewChange, WireCodec
from triogroups.transports._bundler import drain, encode_bundles, pack, route, segments
from triogroups.view import View

A, B, C = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C")))


def test_route_groups_by_destination_and_loops_back_multicasts_and_self_unicasts() -> None:
    msgs = [
        Message(B, b"1"),
        Message(None, b"2"),
        Message(A, b"3"),
        Message(B, b"4"),
        Message(None, b"5", flags=Flag.DONT_LOOPBACK),
    ]
    by_dest, local = route(msgs, A)
    assert {d: [m.payload for m in ms] for d, ms in by_dest.items()} == {
        B: [b"1", b"4"],
        None: [b"2", b"5"],
    }
    assert [m.payload for m in local] == [b"2", b"3"]
    assert all(m.src == A for m in msgs)


def test_pack_keeps_order_and_stays_below_max_size() -> None:
    msgs = [Message(B, bytes(100)) for _ in range(50)]
    bundles = pack(msgs, 1000)
    assert [m for b in bundles for m in b] == msgs
    assert all(64 + sum(m.size() for m in b) <= 1000 for b in bundles)
    assert len(bundles) == 7  # 8 messages of 108 estimated bytes fit in 1000 with the overhead


def test_pack_sends_dont_bundle_messages_alone() -> None:
    msgs = [Message(B, b"a"), Message(B, b"b", flags=Flag.DONT_BUNDLE | Flag.OOB), Message(B, b"c")]
    bundles = pack(msgs, 64_000)
    assert [[m.payload for m in b] for b in bundles] == [[b"b"], [b"a", b"c"]]


def test_encode_bundles_splits_what_the_codec_refuses_and_drops_only_unfittable() -> None:
    codec = WireCodec("c", max_size=400)
    # size() underestimates long names in addresses; the codec has the last word
    msgs = [Message(B, bytes(60)) for _ in range(10)] + [Message(B, bytes(1000))]
    encoded, too_large = encode_bundles(codec, B, A, msgs, 10_000)
    assert [m.payload for m in too_large] == [bytes(1000)]
    assert sum(count for _, count in encoded) == 10
    assert all(len(data) <= 400 for data, _ in encoded)
    decoded = [m for data, _ in encoded for m in codec.decode(data).messages]
    assert [len(m.payload) for m in decoded] == [60] * 10


def test_segments_merge_batches_but_keep_events_in_place() -> None:
    view = View.create(A, 1, [A])
    m1, m2, m3 = (Message(B, bytes([i])) for i in range(3))
    items: list[Item] = [[m1], [m2], ViewChange(view), [m3]]
    assert list(segments(items)) == [[m1, m2], ViewChange(view), [m3]]


async def test_drain_takes_everything_queued_without_waiting() -> None:
    send, recv = trio.open_memory_channel[Item](10)
    for i in range(5):
        send.send_nowait([Message(B, bytes([i]))])
    first = await recv.receive()
    items = drain(recv, first)
    assert len(items) == 5
    send.send_nowait([Message(B, b"later")])
    assert len(drain(recv, first, limit=1)) == 1
    await send.aclose()
    assert len(drain(recv, first)) == 2  # the queued item, then EndOfChannel stops it
