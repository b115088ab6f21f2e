"""`probe` against members over real loopback sockets (issue 16).

Each test runs its members on ports of their own (the cluster's and the
diagnostics'), so parallel runs on this host do not answer each other.
"""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from triogroups import Channel, StackConfig, open_channel, probe
from triogroups._diagnostics._messages import encode_map
from triogroups.testing import free_ports, wait_until
from triogroups.wire import WireCodec

pytestmark = pytest.mark.real

SECRET = b"the shared secret of this cluster"


def _config(preset: str, **diag: Any) -> tuple[StackConfig, dict[str, Any]]:
    """``preset`` on ports of its own; and the probe options that reach its diagnostics."""
    base = free_ports(21)
    diag_port = free_ports(9)
    config = StackConfig.preset(preset)
    bottom = config.names()[0]
    if bottom == "UDP":
        config = config.configure("UDP", mcast_port=base)
    else:
        config = config.configure("TCP", bind_port=base, port_range=20)
        config = config.configure("TCPPING", initial_hosts=[f"127.0.0.1[{base}]"], port_range=3)
    config = config.configure(bottom, diagnostics_port=diag_port, diagnostics_port_range=8, **diag)
    return config, {"diagnostics_port": diag_port, "port_range": 8}


@asynccontextmanager
async def _members(
    config: StackConfig, n: int, **options: Any
) -> AsyncIterator[tuple[str, list[Channel]]]:
    cluster = f"probe-{uuid.uuid4().hex[:8]}"
    async with trio.open_nursery() as nursery:
        channels: list[Channel] = []
        done = trio.Event()

        async def member(name: str, *, task_status: trio.TaskStatus[Channel]) -> None:
            async with open_channel(cluster, config, name, handle_signals=False, **options) as ch:
                task_status.started(ch)
                await done.wait()

        for i in range(n):
            channels.append(await nursery.start(member, "ABCDEFGH"[i]))
        await wait_until(lambda: all(len(ch.view) >= n for ch in channels), timeout=120)
        yield cluster, channels
        done.set()


@pytest.mark.parametrize("preset", ["udp", "tcp"])
async def test_probe_gets_one_answer_per_member_with_the_same_view(preset: str) -> None:
    """UDP stacks answer the multicast probe, TCP stacks (no multicast) over TCP."""
    config, where = _config(preset)
    async with _members(config, 2) as (cluster, channels):
        answers = await probe(cluster=cluster, timeout=10, expect=2, **where)
    assert sorted(a["name"] for a in answers) == ["A", "B"]
    assert {a["cluster"] for a in answers} == {cluster}
    assert all(a["view"] == answers[0]["view"] for a in answers)
    assert answers[0]["view"]["members"] == [str(ch.address) for ch in channels]
    way = "udp" if preset == "udp" else "tcp"
    assert all(a["diag"][way] is not None for a in answers)


async def test_probe_for_another_cluster_gets_no_answer() -> None:
    """A probe names a cluster: members of other clusters drop it (counted as foreign)."""
    config, where = _config("udp")
    async with _members(config, 1) as (cluster, _):
        assert await probe(cluster=f"{cluster}-other", timeout=0.5, **where) == []
        (answer,) = await probe(timeout=10, expect=1, **where)  # no name: every cluster
        assert answer["cluster"] == cluster
        (again,) = await probe(cluster=cluster, timeout=10, expect=1, **where)
    assert again["diag"]["dropped"] == {"foreign_cluster": 1}


async def test_stack_with_diagnostics_off_does_not_answer() -> None:
    config, where = _config("udp", enable_diagnostics=False)
    async with _members(config, 1) as (cluster, (channel,)):
        assert await probe(cluster=cluster, timeout=0.5, **where) == []
        assert channel.stack.diagnostics is None


async def test_probe_without_the_shared_secret_gets_no_answer() -> None:
    """Requests and answers go through the wire codec, so shared-secret mode covers them:
    a probe without the key (or with another) is dropped, with it it is answered."""
    config, where = _config("udp")
    async with _members(config, 1, secret=SECRET) as (cluster, _):
        assert await probe(cluster=cluster, timeout=0.5, **where) == []
        assert await probe(timeout=0.5, **where) == []
        wrong = b"another secret, not this one!!!!"
        assert await probe(cluster=cluster, secret=wrong, timeout=0.5, **where) == []
        (answer,) = await probe(cluster=cluster, secret=SECRET, timeout=10, expect=1, **where)
    assert answer["diag"]["dropped"] == {"auth": 2, "unknown_key": 1}


async def test_malformed_probe_datagrams_are_dropped_and_counted() -> None:
    """Garbage, a truncated prefix and a valid bundle whose payload is not a map are
    dropped, counted by reason, and the member still answers the next probe."""
    config, where = _config("udp")
    async with _members(config, 1) as (cluster, _):
        codec = WireCodec(cluster)
        from triogroups import Address, Message

        src = Address.random("x")
        not_a_map = codec.encode(None, src, [Message(None, b"\x93\x01\x02\x03", src=src)])
        bad_op = encode_map(codec, None, src, {"op": "shutdown"})
        group = ("224.0.75.75", where["diagnostics_port"])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("127.0.0.1", 0))
            sock.setsockopt(
                socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1")
            )
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
            for data in (b"garbage", b"TG", not_a_map, bad_op):
                sock.sendto(data, group)
        (answer,) = await probe(cluster=cluster, timeout=10, expect=1, **where)
    assert answer["diag"]["dropped"] == {
        "bad_magic": 1,
        "truncated": 1,
        "malformed": 1,
        "bad_request": 1,
    }
    assert answer["diag"]["answers"] == 0  # counted before this answer went out


async def test_probe_set_changes_xmit_interval_of_the_named_member_only() -> None:
    config, where = _config("udp")
    async with _members(config, 2) as (cluster, (a, _b)):
        (changed,) = await probe(
            cluster=cluster, request="set", members=["A"], protocol="NAKACK2",
            property="xmit_interval", value="250ms", timeout=10, expect=1, **where,
        )  # fmt: skip
        answers = await probe(cluster=cluster, timeout=10, expect=2, **where)
        (bad,) = await probe(
            cluster=cluster, request="set", members=["B"], protocol="NAKACK2",
            property="xmit_interval", value="soon", timeout=10, expect=1, **where,
        )  # fmt: skip
    assert changed["name"] == "A" and "error" not in changed
    assert a.stack.protocol("NAKACK2").properties()["xmit_interval"] == 0.25
    xmit = {
        ans["name"]: next(
            layer["properties"]["xmit_interval"]
            for layer in ans["stack"]
            if layer["protocol"] == "NAKACK2"
        )
        for ans in answers
    }
    assert xmit["A"] == 0.25 and xmit["B"] != 0.25
    assert "xmit_interval" in bad["error"]


async def test_tcp_probe_frames_that_are_cut_short_or_too_long_are_dropped_and_counted() -> None:
    """Over TCP a request frame that ends early or announces more than a datagram is
    dropped and counted; the member answers a probe sent to its port (``targets``)."""
    config, _ = _config("tcp")
    async with _members(config, 1) as (cluster, (channel,)):
        diag = channel.stack.diagnostics
        assert diag is not None and diag.tcp is not None
        host, port = diag.tcp.rsplit(":", 1)
        for frame in (b"\x00\x00", struct.pack("!I", 1 << 20) + b"x" * 64):
            stream = await trio.open_tcp_stream(host, int(port))
            async with stream:
                try:
                    await stream.send_all(frame)
                    await stream.send_eof()
                    got = await stream.receive_some()
                except trio.BrokenResourceError:  # closed before we were done
                    got = b""
                assert got == b""  # no answer
        (answer,) = await probe(
            cluster=cluster, udp=False, targets=[(host, int(port))], timeout=10, expect=1
        )
    assert answer["diag"]["dropped"] == {"truncated": 2}
