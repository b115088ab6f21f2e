"""Hostile bytes written at a live member from raw sockets: dropped, counted, survived.

Each case writes garbage, truncated or oversized data, a newer wire version,
another cluster's traffic or (TCP) a 2 GB frame length at a running
transport, then checks the reason was counted in ``stats()`` and that a good
message sent afterwards is still delivered.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio

from triogroups import Address, Message
from triogroups.extend import WireCodec
from triogroups.testing import wait_until
from triogroups.transports import TcpTransport, UdpTransport
from triogroups.transports._tcp_conn import encode_hello

MAX = 4096


def newer_version(data: bytes) -> bytes:
    return data[:2] + bytes([data[2] + 1]) + data[3:]


@pytest.fixture
async def udp_member(open_endpoint: Any, mcast_port: int) -> Any:
    return await open_endpoint(UdpTransport, "victim", mcast_port=mcast_port, max_bundle_size=MAX)


def udp_cases(cluster: str, target: Address) -> dict[str, bytes]:
    codec = WireCodec(cluster, max_size=65_000)
    stranger = Address.random("stranger")
    good = codec.encode(target, stranger, [Message(target, b"x")])
    return {
        "bad_magic": b"GET / HTTP/1.1\r\n\r\n",
        "truncated": good[:4],
        "oversized": good[:6] + bytes(MAX),
        "version": newer_version(good),
        "foreign_cluster": WireCodec("other").encode(target, stranger, [Message(target, b"x")]),
        "malformed": good[: len(good) - 3],
        "wrong_dest": codec.encode(Address.random(), stranger, [Message(None, b"x")]),
    }


@pytest.mark.parametrize(
    "reason",
    [
        "bad_magic",
        "truncated",
        "oversized",
        "version",
        "foreign_cluster",
        "malformed",
        "wrong_dest",
    ],
)
async def test_udp_member_drops_counts_and_survives_hostile_datagram(
    udp_member: Any, cluster_name: str, reason: str
) -> None:
    cases = udp_cases(cluster_name, udp_member.address)
    codec = WireCodec(cluster_name)
    sender = Address.random("friend")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
        for _ in range(3):
            raw.sendto(cases[reason], udp_member.physical)
        await wait_until(
            lambda: udp_member.transport.stats()["decode_errors"].get(reason) == 3,
            timeout=20,
            interval=0.01,
        )
        good = codec.encode(udp_member.address, sender, [Message(udp_member.address, b"still ok")])
        raw.sendto(good, udp_member.physical)
        (msg,) = await udp_member.receive(1)
    assert msg.payload == b"still ok" and msg.src == sender
    assert udp_member.transport.stats()["decode_errors"] == {reason: 3}


async def test_udp_member_survives_a_flood_of_random_bytes(udp_member: Any) -> None:
    rng = __import__("random").Random(7)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
        for _ in range(500):
            raw.sendto(rng.randbytes(rng.randint(0, 2000)), udp_member.physical)
        await wait_until(
            lambda: sum(udp_member.transport.stats()["decode_errors"].values()) == 500,
            timeout=20,
            interval=0.01,
        )


# --- TCP -------------------------------------------------------------------------------------


@pytest.fixture
async def tcp_member(open_endpoint: Any) -> Any:
    return await open_endpoint(
        TcpTransport, "victim", bind_port=0, max_frame_size=MAX, sock_conn_timeout=1.0
    )


def framed(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


async def raw_connection(where: tuple[str, int]) -> trio.SocketStream:
    return await trio.open_tcp_stream(*where)


async def closed_by_peer(stream: trio.SocketStream) -> bool:
    """True once the member closed the connection (everything it sends is read)."""
    with trio.fail_after(20):
        while True:
            try:
                if not await stream.receive_some(65536):
                    return True
            except trio.BrokenResourceError:
                return True


async def good_message_still_delivered(member: Any, cluster: str) -> None:
    codec = WireCodec(cluster)
    friend = Address.random("friend")
    stream = await raw_connection(member.physical)
    async with stream:
        await stream.send_all(encode_hello(codec, friend, ("127.0.0.1", 1), member.physical))
        await stream.send_all(
            framed(codec.encode(member.address, friend, [Message(member.address, b"still ok")]))
        )
        (msg,) = await member.receive(1)
    assert msg.payload == b"still ok" and msg.src == friend


def hello_cases(cluster: str) -> dict[str, bytes]:
    stranger = Address.random("stranger")
    nowhere = ("127.0.0.1", 1)
    hello = encode_hello(WireCodec(cluster), stranger, nowhere, nowhere)
    not_a_hello = WireCodec(cluster).encode(None, stranger, [Message(None, b"hi")])
    return {
        "oversized": (2**31).to_bytes(4, "big") + b"\x00" * 100,  # a 2 GB frame length
        "bad_magic": framed(b"garbage that is not a bundle"),
        "truncated": (100).to_bytes(4, "big") + b"short",
        "version": hello[:4] + newer_version(hello[4:]),
        "foreign_cluster": encode_hello(WireCodec("other"), stranger, nowhere, nowhere),
        "bad_hello": framed(not_a_hello),
        "wrong_dest": hello,  # a hello for another endpoint (issue 18: no replay elsewhere)
        "malformed": (0).to_bytes(4, "big") + b"\x00",  # an empty frame
    }


@pytest.mark.parametrize(
    "reason",
    [
        "oversized",
        "bad_magic",
        "truncated",
        "version",
        "foreign_cluster",
        "bad_hello",
        "wrong_dest",
        "malformed",
    ],
)
async def test_tcp_member_closes_a_connection_with_a_hostile_start_and_counts_it(
    tcp_member: Any, cluster_name: str, reason: str
) -> None:
    stream = await raw_connection(tcp_member.physical)
    async with stream:
        await stream.send_all(hello_cases(cluster_name)[reason])
        if reason == "truncated":
            await stream.send_eof()
        assert await closed_by_peer(stream)
    await wait_until(
        lambda: tcp_member.transport.stats()["decode_errors"].get(reason) == 1,
        timeout=20,
        interval=0.01,
    )
    await good_message_still_delivered(tcp_member, cluster_name)
    assert tcp_member.transport.stats()["decode_errors"] == {reason: 1}


async def test_tcp_member_closes_a_silent_connection_after_the_hello_timeout(
    tcp_member: Any, cluster_name: str
) -> None:
    stream = await raw_connection(tcp_member.physical)
    async with stream:
        assert await closed_by_peer(stream)
    assert tcp_member.transport.stats()["decode_errors"] == {"bad_hello": 1}
    await good_message_still_delivered(tcp_member, cluster_name)


async def test_tcp_member_drops_bad_frames_after_a_good_hello_and_keeps_the_connection(
    tcp_member: Any, cluster_name: str
) -> None:
    codec = WireCodec(cluster_name)
    friend = Address.random("friend")
    me = tcp_member.address
    good = codec.encode(me, friend, [Message(me, b"good")])
    stream = await raw_connection(tcp_member.physical)
    async with stream:
        await stream.send_all(encode_hello(codec, friend, ("127.0.0.1", 1), tcp_member.physical))
        await stream.send_all(
            framed(b"garbage")
            + framed(newer_version(good))
            + framed(WireCodec("other").encode(me, friend, [Message(me, b"x")]))
            + framed(codec.encode(me, Address.random("impostor"), [Message(me, b"x")]))
            + framed(good)
        )
        (msg,) = await tcp_member.receive(1)
        assert msg.payload == b"good"
        errors = tcp_member.transport.stats()["decode_errors"]
        assert errors == {"bad_magic": 1, "version": 1, "foreign_cluster": 1, "wrong_src": 1}
        await stream.send_all((2**31 - 1).to_bytes(4, "big"))
        assert await closed_by_peer(stream)
    assert tcp_member.transport.stats()["decode_errors"]["oversized"] == 1


async def test_tcp_member_drops_a_flood_of_bad_frames_without_starving_other_tasks(
    tcp_member: Any, cluster_name: str
) -> None:
    """Every bad frame is counted, and other tasks run between reads.

    The reader does not await while data is ready, so the read loop must
    checkpoint after a read that gave nothing to pass up. Trio may run the
    reader first in one scheduling batch and last in the one before, so at
    most two reads' worth of frames (256 KB each, 11-byte frames) may be
    dropped between two turns of another task.
    """
    codec = WireCodec(cluster_name)
    hello = encode_hello(codec, Address.random("friend"), ("127.0.0.1", 1), tcp_member.physical)
    flood = framed(b"garbage") * 20_000
    rounds = 5

    def send_flood() -> None:
        with socket.create_connection(tcp_member.physical) as raw:
            raw.sendall(hello)
            for _ in range(rounds):
                raw.sendall(flood)
            raw.shutdown(socket.SHUT_WR)
            while raw.recv(65536):  # the member's hello, then its EOF once it read everything
                pass

    def dropped() -> int:
        return int(tcp_member.transport.stats()["decode_errors"].get("bad_magic", 0))

    most_between_turns = 0

    async def watch() -> None:
        nonlocal most_between_turns
        last = dropped()
        while True:
            await trio.lowlevel.checkpoint()
            now = dropped()
            most_between_turns = max(most_between_turns, now - last)
            last = now

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        await trio.to_thread.run_sync(send_flood)
        nursery.cancel_scope.cancel()
    assert tcp_member.transport.stats()["decode_errors"] == {"bad_magic": 20_000 * rounds}
    assert 0 < most_between_turns <= 2 * ((1 << 18) // len(framed(b"garbage")) + 1)
