"""Shared-secret mode over real loopback UDP multicast and TCP (issue 18).

- An outsider with no secret or a wrong one cannot join, its multicasts are
  never delivered, and its traffic is dropped and counted by the members.
- Traffic captured off the wire (a raw socket on the multicast group, or a
  raw listener that the members' discovery connects to) does not decode
  without the secret nor with a wrong one, and carries no payload in clear;
  with the secret it decodes, so what was captured really was their traffic.
- A key rollover under continuous traffic: every message is delivered exactly
  once and in order, and afterwards only the new key is accepted.
- A member without a secret never loads `cryptography` (its memory is spent
  only where a key is).
"""

from __future__ import annotations

import logging
import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts
from triogroups import Channel, Message, StackConfig, open_channel
from triogroups._keyring import Keyring, key_id
from triogroups.testing import wait_until
from triogroups.wire import WireCodec, WireError

pytestmark = pytest.mark.real

SECRET = b"the shared secret of this cluster"
WRONG = b"a secret of some other cluster!!"
NEW = b"the next secret of this cluster!"


def _transport(ch: Channel) -> dict[str, Any]:
    stats: dict[str, Any] = ch.stack.stats()["layers"][0]["stats"]
    return stats


@asynccontextmanager
async def _members(config: StackConfig, cluster: str) -> AsyncIterator[tuple[Channel, Channel]]:
    async with (
        open_channel(cluster, config, "A", secret=SECRET) as a,
        open_channel(cluster, config, "B", secret=SECRET) as b,
    ):
        await wait_until(lambda: len(a.view.members) >= 2 and len(b.view.members) >= 2, timeout=120)
        yield a, b


@pytest.mark.parametrize("preset", ["udp", "tcp"])
@pytest.mark.parametrize("outsider_secret", [None, WRONG], ids=["no-secret", "wrong-secret"])
async def test_outsider_cannot_join_nor_inject(
    preset: str,
    outsider_secret: bytes | None,
    preset_on_own_ports: PresetOnOwnPorts,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """X, without the secret or with a wrong one, forms a group of its own; A and B never
    deliver what it multicasts, count its bundles as ``auth`` (no secret) or
    ``unknown_key`` (wrong secret), and each member warns about it once (rate-limited)."""
    config = preset_on_own_ports(preset)
    cluster = f"sealed-{uuid.uuid4().hex[:8]}"
    reason = "auth" if outsider_secret is None else "unknown_key"
    with trio.fail_after(90):
        async with _members(config, cluster) as (a, b):
            options: dict[str, Any] = {} if outsider_secret is None else {"secret": outsider_secret}
            async with open_channel(cluster, config, "X", **options) as x:
                assert list(x.view.members) == [x.address]
                for i in range(20):
                    await x.send(f"injected {i}".encode())
                await a.send(b"from a")
                got = [(await b.receive()).payload]
                while sum(_transport(m)["decode_errors"].get(reason, 0) for m in (a, b)) == 0:
                    await x.send(b"more")
                    await trio.sleep(0.1)
                await trio.sleep(1.0)
                while True:
                    try:
                        got.append(b.receive_nowait().payload)
                    except trio.WouldBlock:
                        break
                assert got == [b"from a"]
                assert len(a.view.members) == len(b.view.members) == 2
                assert x.address not in a.view.members
                assert list(x.view.members) == [x.address]
    warnings = [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and f"dropped {reason} " in r.getMessage()
    ]
    assert 1 <= len(warnings) <= 3  # at most once each: A, B, and X about their traffic


def _codecs(cluster: str) -> tuple[WireCodec, WireCodec, WireCodec]:
    """No secret, a wrong one, the right one."""
    clock = trio.current_time
    return (
        WireCodec(cluster, max_size=1 << 20),
        WireCodec(cluster, max_size=1 << 20, keyring=Keyring(cluster, WRONG, clock=clock)),
        WireCodec(cluster, max_size=1 << 20, keyring=Keyring(cluster, SECRET, clock=clock)),
    )


def _check_captured(cluster: str, captured: list[bytes], payload: bytes) -> None:
    plain, wrong, right = _codecs(cluster)
    assert captured
    decoded = 0
    for data in captured:
        assert payload not in data
        for codec, reason in ((plain, "auth"), (wrong, "unknown_key")):
            with pytest.raises(WireError) as info:
                codec.decode(data)
            assert info.value.reason == reason
        right.decode(data)
        decoded += 1
    assert decoded == len(captured)


async def test_captured_udp_multicasts_cannot_be_read(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """A raw socket on the cluster's multicast group captures sealed datagrams only."""
    config = preset_on_own_ports("udp")
    (udp,) = [layer for layer in config.layers if layer.name == "UDP"]
    group, port = "228.8.8.8", int(udp.properties["mcast_port"])
    cluster = f"sealed-{uuid.uuid4().hex[:8]}"
    sniffer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sniffer.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sniffer.bind((group, port))
    mreq = struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton("127.0.0.1"))
    sniffer.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    sniffer.setblocking(False)
    captured: list[bytes] = []
    payload = b"a payload nobody outside may read"
    try:
        with trio.fail_after(60):
            async with _members(config, cluster) as (a, b):
                await a.send(payload)
                assert (await b.receive()).payload == payload
                await trio.sleep(0.2)
                while True:
                    try:
                        captured.append(sniffer.recv(1 << 16))
                    except BlockingIOError:
                        break
    finally:
        sniffer.close()
    _check_captured(cluster, captured, payload)


async def test_captured_tcp_frames_cannot_be_read(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """A raw listener on a port that TCPPING probes receives the members' hellos and
    discovery frames: sealed, like everything else they send."""
    config = preset_on_own_ports("tcp")
    (tcp,) = [layer for layer in config.layers if layer.name == "TCP"]
    base = int(tcp.properties["bind_port"])
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", base + 2))  # within TCPPING's port_range of 3
    listener.listen()
    cluster = f"sealed-{uuid.uuid4().hex[:8]}"
    captured: list[bytes] = []

    async def capture() -> None:
        conn, _ = await listener.accept()
        with conn:
            stream = b""
            with trio.move_on_after(5):
                while chunk := await conn.recv(1 << 16):
                    stream += chunk
            while len(stream) >= 4:
                size = int.from_bytes(stream[:4], "big")
                if len(stream) < 4 + size:
                    break
                captured.append(stream[4 : 4 + size])
                stream = stream[4 + size :]

    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(capture)
                async with _members(config, cluster) as (a, b):
                    await a.send(b"hello b")
                    assert (await b.receive()).payload == b"hello b"
    finally:
        listener.close()
    _check_captured(cluster, captured, b"hello b")


@pytest.mark.parametrize("preset", ["udp", "tcp"])
async def test_rollover_under_traffic_delivers_everything_once_in_order(
    preset: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """Both members send without pause while the new secret is installed on A, then on B
    half a second later (rollover_time 3 s): each delivers the other's messages exactly
    once, in order, and in the end both accept only the new key."""
    config = preset_on_own_ports(preset)
    config = config.configure(config.names()[0], rollover_time=3.0)
    cluster = f"sealed-{uuid.uuid4().hex[:8]}"
    count = 600
    with trio.fail_after(120):
        async with _members(config, cluster) as (a, b):
            got: dict[str, list[bytes]] = {"A": [], "B": []}

            async def send(me: Channel, other: Channel) -> None:
                for i in range(count):
                    await me.send(b"m%d" % i)
                    await me.send(b"u%d" % i, to=other.address)
                    await trio.sleep(0.01)

            async def receive(me: Channel, name: str) -> None:
                while len(got[name]) < 2 * count:
                    msg = await me.receive()
                    if msg.src != me.address:
                        got[name].append(msg.payload)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send, a, b)
                nursery.start_soon(send, b, a)
                nursery.start_soon(receive, a, "A")
                nursery.start_soon(receive, b, "B")
                await trio.sleep(1.0)
                a.install_secret(NEW)
                await trio.sleep(0.5)
                b.install_secret(NEW)
            await trio.sleep(3.0)
            for name in "AB":
                multicasts = [p for p in got[name] if p.startswith(b"m")]
                unicasts = [p for p in got[name] if p.startswith(b"u")]
                assert multicasts == [b"m%d" % i for i in range(count)]
                assert unicasts == [b"u%d" % i for i in range(count)]
            for ch in (a, b):
                sealed = _transport(ch)["shared_secret"]
                assert sealed["key_ids"] == [key_id(NEW, cluster).hex()]


def _sniffer(config: StackConfig) -> socket.socket:
    """A raw socket on the cluster's multicast group: sees every multicast datagram."""
    (udp,) = [layer for layer in config.layers if layer.name == "UDP"]
    group, port = "228.8.8.8", int(udp.properties["mcast_port"])
    sniffer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sniffer.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sniffer.bind((group, port))
    mreq = struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton("127.0.0.1"))
    sniffer.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    sniffer.setblocking(False)
    return sniffer


def _same_nonce(cluster: str, captured: bytes, src: Any, payload: bytes) -> bytes:
    """A different bundle from ``src``, sealed with the right key under ``captured``'s
    nonce: what a sender that repeats a nonce (or an insider) would put on the wire."""
    kid = key_id(SECRET, cluster)
    at = captured.index(kid) + len(kid)
    nonce = captured[at : at + 12]
    keyring = Keyring(cluster, SECRET, clock=trio.current_time)
    keyring._prefix, keyring._counter = nonce[:8], int.from_bytes(nonce[8:], "big")
    forged = WireCodec(cluster, keyring=keyring).encode(None, src, [Message(None, payload)])
    assert nonce in forged and forged != captured
    return forged


def _carries(cluster: str, data: bytes, payload: bytes) -> bool:
    return any(payload in m.payload for m in _codecs(cluster)[2].decode(data).messages)


async def test_tampered_replayed_and_reused_nonce_datagrams_are_dropped_and_counted(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """A multicast of A, captured off the wire, sent again at B's unicast port (a
    replay), with one bit flipped (tampered), and a different bundle sealed under its
    nonce (a reused nonce): B drops each, counts it as ``replay``, ``auth`` and
    ``replay``, delivers none of them, and goes on serving A."""
    config = preset_on_own_ports("udp")
    cluster = f"sealed-{uuid.uuid4().hex[:8]}"
    sniffer = _sniffer(config)
    raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with trio.fail_after(60):
            async with _members(config, cluster) as (a, b):
                await a.send(b"the original")
                assert (await b.receive()).payload == b"the original"
                await trio.sleep(0.2)
                captured: list[bytes] = []
                while True:
                    try:
                        captured.append(sniffer.recv(1 << 16))
                    except BlockingIOError:
                        break
                (original,) = [d for d in captured if _carries(cluster, d, b"the original")]
                host, port = _transport(b)["physical"].rsplit(":", 1)
                tampered = bytearray(original)
                tampered[-1] ^= 1
                forged = _same_nonce(cluster, original, a.address, b"never delivered")
                before = dict(_transport(b)["decode_errors"])
                for data in (original, bytes(tampered), forged):
                    raw.sendto(data, (host, int(port)))
                expected = {"replay": 2, "auth": 1}
                while True:
                    errors = _transport(b)["decode_errors"]
                    moved = {k: errors.get(k, 0) - before.get(k, 0) for k in expected}
                    if moved == expected:
                        break
                    await trio.sleep(0.05)
                await a.send(b"after")
                assert (await b.receive()).payload == b"after"
    finally:
        sniffer.close()
        raw.close()


async def test_replayed_or_tampered_tcp_hello_is_refused(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """A raw listener that discovery probes collects the members' sealed hellos. Sent
    to B on a connection of its own, A's hello (a replay to another receiver: a hello
    is bound to the endpoint it was sent to) and a tampered one are refused, counted,
    and their connection closed; B's connection count does not move, and A and B
    still exchange messages."""
    config = preset_on_own_ports("tcp")
    (tcp,) = [layer for layer in config.layers if layer.name == "TCP"]
    base = int(tcp.properties["bind_port"])
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", base + 2))  # within TCPPING's port_range of 3
    listener.listen()
    cluster = f"sealed-{uuid.uuid4().hex[:8]}"
    _, _, right = _codecs(cluster)
    hellos: dict[Any, bytes] = {}

    capturing = trio.CancelScope()

    async def capture() -> None:
        with capturing:
            while True:
                conn, _ = await listener.accept()
                with conn, trio.move_on_after(2):
                    head = await conn.recv(4)
                    size = int.from_bytes(head, "big")
                    data = b""
                    while len(data) < size:
                        data += await conn.recv(size - len(data))
                    hellos.setdefault(right.decode(data).src, head + data)

    async def refused(member: Channel, data: bytes) -> bool:
        host, port = _transport(member)["physical"].rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            await stream.send_all(data)
            with trio.move_on_after(10):
                try:
                    return await stream.receive_some(1 << 16) == b""
                except trio.BrokenResourceError:
                    return True
        return False

    try:
        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(capture)
                async with _members(config, cluster) as (a, b):
                    await wait_until(lambda: a.address in hellos, timeout=90)
                    capturing.cancel()
                    accepted = _transport(b)["connections_accepted"]
                    tampered = bytearray(hellos[a.address])
                    tampered[-1] ^= 1
                    r = await refused(b, hellos[a.address])
                    print(
                        "REPLAY",
                        r,
                        _transport(b)["decode_errors"],
                        _transport(b)["connections_accepted"],
                        accepted,
                    )
                    assert await refused(b, bytes(tampered))
                    errors = _transport(b)["decode_errors"]
                    assert errors.get("auth", 0) >= 1 and errors.get("wrong_dest", 0) >= 1
                    assert _transport(b)["connections_accepted"] == accepted
                    await a.send(b"still sealed", to=b.address)
                    assert (await b.receive()).payload == b"still sealed"
    finally:
        listener.close()


_LAZY_CRYPTO_SCRIPT = """
import sys, uuid, trio
from tests.real.conftest import _preset_on_own_ports
from triogroups import open_channel

async def exchange(secret):
    config = _preset_on_own_ports("udp")
    async with open_channel(f"lazy-{uuid.uuid4().hex[:8]}", config, "A", secret=secret) as ch:
        await ch.send(b"hello")
        async for msg in ch:
            assert msg.raw == b"hello", msg
            break
    return "cryptography" in sys.modules

print(trio.run(exchange, None), trio.run(exchange, b"the shared secret of this cluster"))
"""


def test_a_member_without_a_secret_never_loads_cryptography() -> None:
    """`cryptography` holds ~6.5 MiB of a process: it is imported with the first key,
    so a member with no secret, which sends and delivers for real, never has it, and
    one with a secret in the same process then does (its traffic is sealed)."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _LAZY_CRYPTO_SCRIPT],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"], done.stderr
