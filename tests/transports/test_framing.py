"""TCP framing: length prefixes are never trusted, frames split and join across reads."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from triogroups import Address, Flag, Message
from triogroups.extend import WireCodec, WireError
from triogroups.transports._tcp_conn import (
    Connection,
    FrameError,
    FrameReader,
    decode_hello,
    encode_hello,
    frame,
)


def framed(data: bytes) -> bytes:
    return frame(data) + data


async def collect(chunks: list[bytes], max_frame_size: int = 100) -> list[bytes]:
    """Feed ``chunks`` through a socket pair, one read each, and return every frame read."""
    left, right = trio.socket.socketpair()
    reader = FrameReader(right, max_frame_size)
    got: list[bytes] = []

    async def feed() -> None:
        with left:
            for chunk in chunks:
                await trio.testing.wait_all_tasks_blocked()  # the reader waits: one read each
                await left.send(chunk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(feed)
        while frames := await reader.frames():
            got.extend(bytes(f) for f in frames)
    right.close()
    return got


async def reader_for(chunks: list[bytes], max_frame_size: int = 100) -> FrameReader:
    left, right = trio.socket.socketpair()
    with left:
        for chunk in chunks:
            await left.send(chunk)
    return FrameReader(right, max_frame_size)


async def test_frames_split_across_reads_and_several_per_read_come_out_whole() -> None:
    data = framed(b"one") + framed(b"two") + framed(b"three")
    assert await collect([data[:2], data[2:9], data[9:]]) == [b"one", b"two", b"three"]


async def test_a_frame_larger_than_the_read_buffer_comes_out_whole() -> None:
    big = bytes(range(256)) * 2000  # 512 000 bytes: more than the reader's first buffer
    data = framed(b"a") + framed(big) + framed(b"z")
    chunks = [data[i : i + 70_000] for i in range(0, len(data), 70_000)]
    assert await collect(chunks, max_frame_size=1 << 20) == [b"a", big, b"z"]


async def test_frames_straddling_the_buffer_end_are_moved_not_lost() -> None:
    frames = [bytes([i]) * (30_000 + 997 * i) for i in range(40)]  # ~1.9 MB, odd sizes
    data = b"".join(framed(f) for f in frames)
    chunks = [data[i : i + 50_000] for i in range(0, len(data), 50_000)]
    assert await collect(chunks, max_frame_size=1 << 20) == frames


async def test_first_returns_one_frame_and_keeps_the_rest() -> None:
    reader = await reader_for([framed(b"hello") + framed(b"data")])
    assert await reader.first() == b"hello"
    assert [bytes(f) for f in await reader.frames()] == [b"data"]
    assert await reader.first() is None


@pytest.mark.parametrize(
    ("chunk", "reason"),
    [
        ((2**31).to_bytes(4, "big"), "oversized"),
        ((101).to_bytes(4, "big") + b"x" * 101, "oversized"),
        ((0).to_bytes(4, "big"), "malformed"),
        ((50).to_bytes(4, "big") + b"cut", "truncated"),
    ],
)
async def test_bad_lengths_and_cut_frames_raise_frame_error(chunk: bytes, reason: str) -> None:
    reader = await reader_for([chunk])
    with pytest.raises(FrameError) as info:
        await reader.frames()
    assert info.value.reason == reason


def test_hello_carries_address_and_listening_endpoint() -> None:
    codec = WireCodec("c")
    me = Address.random("me")
    there = ("10.0.0.2", 7801)
    data = encode_hello(codec, me, ("10.0.0.1", 7800), there)
    assert decode_hello(codec, data[4:], there) == (me, ("10.0.0.1", 7800))
    not_hello = codec.encode(None, me, [Message(None, b"10.0.0.1:7800>10.0.0.2:7801")])
    with pytest.raises(WireError, match="bad_hello"):
        decode_hello(codec, not_hello, there)
    with pytest.raises(WireError, match="foreign_cluster"):
        decode_hello(WireCodec("other"), data[4:], there)


@pytest.mark.parametrize("payload", [b"10.0.0.1:7800", b"10.0.0.1:7800>", b">10.0.0.2:7801"])
def test_hello_without_both_endpoints_is_bad_hello(payload: bytes) -> None:
    codec = WireCodec("c")
    hello = codec.encode(None, Address.random("me"), [Message(None, payload, flags=Flag.INTERNAL)])
    with pytest.raises(WireError, match="bad_hello"):
        decode_hello(codec, hello, ("10.0.0.2", 7801))


def test_hello_for_another_endpoint_is_wrong_dest() -> None:
    """A hello is bound to the endpoint it was sent to (issue 18): one captured by a
    listener discovery probed cannot pass for its sender at another member."""
    codec = WireCodec("c")
    data = encode_hello(codec, Address.random("me"), ("10.0.0.1", 7800), ("10.0.0.9", 7802))
    for elsewhere in (("10.0.0.2", 7801), ("10.0.0.9", 7801), ("10.0.0.2", 7802)):
        with pytest.raises(WireError, match="wrong_dest"):
            decode_hello(codec, data[4:], elsewhere)


async def test_writer_coalesces_queued_frames_into_chunks_in_order() -> None:
    conn: Any = Connection.__new__(Connection)
    conn.out, conn.out_bytes = [], 0
    conn._wake = trio.Event()
    conn._sending = True  # the writer is inside a send: frames queue behind it
    for i in range(5):
        conn.enqueue(bytes([i]) * 400)
    first = conn._take(1000)  # whole frames until the limit is passed
    assert len(first) == 3 * 404 and conn.out_bytes == 2 * 404
    rest = conn._take(1_000_000)
    assert first + rest == b"".join(framed(bytes([i]) * 400) for i in range(5))
    assert conn.out == [] and conn.out_bytes == 0


async def _socket_connection() -> tuple[Connection, trio.socket.SocketType]:
    left, right = trio.socket.socketpair()
    me = Address.random("me")
    stream = trio.SocketStream(left)
    return Connection(stream, FrameReader(left, 1 << 20), me, ("127.0.0.1", 1), me), right


async def _read_exactly(sock: trio.socket.SocketType, size: int) -> bytes:
    data = b""
    while len(data) < size:
        data += await sock.recv(size - len(data))
    return data


async def test_idle_connection_writes_a_frame_at_once_without_the_writer() -> None:
    conn, peer = await _socket_connection()
    conn.enqueue(b"hello")
    assert conn.out == [] and conn.out_bytes == 0 and not conn._wake.is_set()
    assert await _read_exactly(peer, 9) == framed(b"hello")


async def test_what_the_socket_does_not_take_queues_and_frames_stay_in_order() -> None:
    """Frames past a full socket buffer queue; later frames queue behind them, never ahead."""
    conn, peer = await _socket_connection()
    frames = [bytes([i % 251]) * 100_000 for i in range(40)]
    for data in frames:
        conn.enqueue(data)
    assert conn.out and conn._wake.is_set()
    expected = b"".join(framed(data) for data in frames)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.write_loop)
        got = await _read_exactly(peer, len(expected))
        conn.close()
    assert got == expected


async def test_a_broken_connection_queues_the_frame_for_the_writer_to_report() -> None:
    conn, peer = await _socket_connection()
    peer.close()
    await trio.sleep(0.01)
    for _ in range(3):  # the first write may still succeed; a later one meets the reset
        conn.enqueue(b"x" * 100_000)
    assert conn.out
    with pytest.raises(trio.BrokenResourceError):
        await conn.write_loop()
