"""The TCP transport on 127.0.0.1: connections, fan-out, tie-break, reaping, back-pressure."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest
import trio

from triogroups import Address, Message, View
from triogroups.events import AddPhysicalAddress, ForeignEndpoint
from triogroups.extend import SendToHosts, ViewChange, WireCodec
from triogroups.testing import wait_until
from triogroups.transports import TcpTransport
from triogroups.transports._tcp_links import Pending

TCP: dict[str, Any] = {"bind_port": 0}
TCP_LOG = "triogroups.transports.tcp"


async def introduce(*endpoints: Any) -> None:
    for e in endpoints:
        for other in endpoints:
            if other is not e:
                await e.down.send(AddPhysicalAddress(other.address, other.physical))


@pytest.fixture(params=[False, True], ids=["plain", "sealed"])
def tcp_props(request: pytest.FixtureRequest, tmp_path: Any) -> dict[str, Any]:
    """TCP plain, and in shared-secret mode (every hello then sealed with its own nonce)."""
    if not request.param:
        return dict(TCP)
    key = tmp_path / "cluster.key"
    key.write_bytes(b"a test secret of enough bytes\n")
    return {**TCP, "secret_file": str(key)}


async def test_unicast_opens_a_connection_on_demand_and_both_sides_use_it(
    open_endpoint: Any,
) -> None:
    a = await open_endpoint(TcpTransport, "A", **TCP)
    b = await open_endpoint(TcpTransport, "B", **TCP)
    await a.down.send(AddPhysicalAddress(b.address, b.physical))
    await a.down.send([Message(b.address, b"%d" % i) for i in range(100)])
    got = await b.receive(100)
    assert [m.payload for m in got] == [b"%d" % i for i in range(100)]
    await b.down.send([Message(a.address, b"reply")])  # B learned A's listen port from the hello
    assert [m.payload for m in await a.receive(1)] == [b"reply"]
    assert a.transport.stats()["connections_opened"] == 1
    assert b.transport.stats()["connections_accepted"] == 1
    assert b.transport.stats()["connections_opened"] == 0


async def test_multicast_is_encoded_once_and_sent_to_each_view_member(
    open_endpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c = [await open_endpoint(TcpTransport, n, **TCP) for n in "ABC"]
    await introduce(a, b, c)
    view = View.create(a.address, 1, [a.address, b.address, c.address])
    await a.down.send(ViewChange(view))
    encodes: list[object] = []
    original = WireCodec.encode

    def counting(self: WireCodec, dest: Any, src: Any, msgs: Any) -> bytes:
        if any(m.payload == b"to all" for m in msgs):  # not the hellos of new connections
            encodes.append(dest)
        return original(self, dest, src, msgs)

    monkeypatch.setattr(WireCodec, "encode", counting)
    await a.down.send([Message(None, b"to all")])
    for e in (a, b, c):
        assert [m.payload for m in await e.receive(1)] == [b"to all"]
    assert encodes == [None]


async def test_multicast_without_a_view_goes_to_every_known_member(open_endpoint: Any) -> None:
    a, b, c = [await open_endpoint(TcpTransport, n, **TCP) for n in "ABC"]
    await introduce(a, b, c)
    await a.down.send([Message(None, b"anyone?")])
    for e in (b, c):
        assert [m.payload for m in await e.receive(1)] == [b"anyone?"]


async def test_simultaneous_connect_leaves_the_lower_address_connection_on_both_sides(
    open_endpoint: Any, tcp_props: dict[str, Any]
) -> None:
    """Sealed too: the hellos of the two crossing connections are not replays of each other."""
    a = await open_endpoint(TcpTransport, "A", **tcp_props)
    b = await open_endpoint(TcpTransport, "B", **tcp_props)
    await introduce(a, b)
    a.down.send_nowait([Message(b.address, b"a0")])  # both queued before either can connect
    b.down.send_nowait([Message(a.address, b"b0")])
    for i in range(1, 200):
        await a.down.send([Message(b.address, b"a%d" % i)])
        await b.down.send([Message(a.address, b"b%d" % i)])
    assert sorted(m.payload for m in await b.receive(200)) == sorted(b"a%d" % i for i in range(200))
    assert sorted(m.payload for m in await a.receive(200)) == sorted(b"b%d" % i for i in range(200))

    def settled() -> bool:
        conns = [e.transport.stats()["connections"] for e in (a, b)]
        return all(len(c) == 1 for c in conns) and a.transport.stats()["connections_closed"] >= 1

    await wait_until(settled, timeout=20, interval=0.01)
    assert [e.transport.stats()["connections_opened"] for e in (a, b)] == [1, 1]  # both dialled
    lower = min(a.address, b.address)
    for e in (a, b):
        (conn,) = e.transport.stats()["connections"].values()
        assert conn["initiated_here"] == (e.address == lower)
    retired = sum(e.transport.stats()["duplicate_connections_retired"] for e in (a, b))
    assert retired >= 1
    assert [e.transport.stats()["decode_errors"] for e in (a, b)] == [{}, {}]


async def test_idle_connections_are_reaped_and_reopened_on_demand(
    open_endpoint: Any, tcp_props: dict[str, Any]
) -> None:
    props = {**tcp_props, "conn_expire_time": 0.2}
    a = await open_endpoint(TcpTransport, "A", **props)
    b = await open_endpoint(TcpTransport, "B", **props)
    await a.down.send(AddPhysicalAddress(b.address, b.physical))
    await a.down.send([Message(b.address, b"first")])
    await b.receive(1)
    await wait_until(
        lambda: not a.transport.stats()["connections"] and not b.transport.stats()["connections"],
        timeout=20,
        interval=0.01,
    )
    assert (
        a.transport.stats()["connections_reaped"] + b.transport.stats()["connections_reaped"] >= 1
    )
    await a.down.send([Message(b.address, b"second")])
    assert [m.payload for m in await b.receive(1)] == [b"second"]
    assert a.transport.stats()["connections_opened"] == 2


async def test_slow_layers_above_stop_reading_and_push_back_without_losing_frames(
    open_endpoint: Any,
) -> None:
    small = {**TCP, "send_queue_size": 32_768, "recv_buf_size": 1 << 18, "send_buf_size": 1 << 18}
    a = await open_endpoint(TcpTransport, "A", down_size=1, **small)
    b = await open_endpoint(TcpTransport, "B", up_size=1, **small)
    await a.down.send(AddPhysicalAddress(b.address, b.physical))
    payloads = [b"%05d" % i + bytes(1000) for i in range(4000)]
    sent = 0
    blocked = False
    with trio.move_on_after(20):
        while sent < len(payloads):
            try:
                a.down.send_nowait([Message(b.address, payloads[sent])])
                sent += 1
            except trio.WouldBlock:
                # nobody reads B: once the pipes are full, A's transport stops taking more
                with trio.move_on_after(0.5) as waited:
                    await a.down.send([Message(b.address, payloads[sent])])
                    sent += 1
                if waited.cancelled_caught:
                    blocked = True
                    break
    assert blocked and sent < len(payloads)
    async with trio.open_nursery() as senders:

        async def send_rest() -> None:
            for p in payloads[sent:]:
                await a.down.send([Message(b.address, p)])

        senders.start_soon(send_rest)
        got = await b.receive(len(payloads))
    assert [m.payload for m in got] == payloads


async def test_peer_outside_the_view_that_never_reads_gets_drops_not_back_pressure(
    open_endpoint: Any,
) -> None:
    """Issue 18: back-pressure is for the members of the view. M, outside A's view, stops
    reading; what A sends it past send_queue_size is dropped and counted
    (dropped_queue_full) instead of blocking A's sends, and B, in the view, still gets
    what A sends it."""
    small = {**TCP, "send_queue_size": 32_768, "send_buf_size": 1 << 16}
    a = await open_endpoint(TcpTransport, "A", down_size=1, **small)
    b = await open_endpoint(TcpTransport, "B", **small)
    mute = await open_endpoint(TcpTransport, "M", up_size=1, **{**small, "recv_buf_size": 1 << 16})
    await a.down.send(ViewChange(View.create(a.address, 1, [a.address, b.address])))
    await a.down.send(AddPhysicalAddress(b.address, b.physical))
    await a.down.send(AddPhysicalAddress(mute.address, mute.physical))
    with trio.fail_after(20):
        for _ in range(4000):
            await a.down.send([Message(mute.address, bytes(1000))])
        stats = a.transport.stats()
        assert stats["dropped_queue_full"] > 0
        (queued,) = [c["queued_bytes"] for p, c in stats["connections"].items() if p[0] == "M"]
        assert queued < 32_768 + 2_000
        await a.down.send([Message(b.address, b"still served")])
        (msg,) = await b.receive(1)
    assert msg.payload == b"still served"


async def test_unreachable_member_drops_its_messages_and_counts_the_failure(
    open_endpoint: Any,
) -> None:
    a = await open_endpoint(TcpTransport, "A", **{**TCP, "sock_conn_timeout": 1.0})
    b = await open_endpoint(TcpTransport, "B", **TCP)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nowhere = closed.getsockname()
    await a.down.send(AddPhysicalAddress(b.address, nowhere))
    await a.down.send([Message(b.address, b"lost"), Message(b.address, b"lost too")])
    await wait_until(
        lambda: a.transport.stats()["connect_failures"] == 1, timeout=20, interval=0.01
    )
    assert a.transport.stats()["dropped_connect_failed"] == 2
    await a.down.send(AddPhysicalAddress(b.address, b.physical))  # found again
    await a.down.send([Message(b.address, b"delivered")])
    assert [m.payload for m in await b.receive(1)] == [b"delivered"]


async def test_send_to_hosts_connects_by_endpoint_and_learns_who_is_there(
    open_endpoint: Any,
) -> None:
    a = await open_endpoint(TcpTransport, "A", **TCP)
    b = await open_endpoint(TcpTransport, "B", **TCP)
    await a.down.send(SendToHosts((b.physical, a.physical), (Message(None, b"who?"),)))
    (got,) = await b.receive(1)
    assert got.payload == b"who?" and got.src == a.address and got.dest is None
    await a.down.send([Message(b.address, b"now by name")])
    assert [m.payload for m in await b.receive(1)] == [b"now by name"]
    assert a.transport.stats()["connections_opened"] == 1


async def test_message_larger_than_a_frame_is_dropped_and_counted(open_endpoint: Any) -> None:
    a = await open_endpoint(TcpTransport, "A", **{**TCP, "max_frame_size": 4096})
    b = await open_endpoint(TcpTransport, "B", **TCP)
    await a.down.send(AddPhysicalAddress(b.address, b.physical))
    await a.down.send([Message(b.address, bytes(10_000)), Message(b.address, b"fits")])
    assert [m.payload for m in await b.receive(1)] == [b"fits"]
    assert a.transport.stats()["dropped_oversized"] == 1


def _drop_lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == TCP_LOG and r.levelno == level and "dropped" in r.getMessage()
    ]


async def test_messages_to_a_peer_that_stopped_are_counted_without_a_warning(
    open_endpoint: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A peer that exits leaves messages queued to it (acks, retransmissions): still in the
    view, its endpoint now refuses connections. Dropped and counted, logged at DEBUG only."""
    caplog.set_level(logging.DEBUG, logger=TCP_LOG)
    a = await open_endpoint(TcpTransport, "A", **TCP)
    b = await open_endpoint(TcpTransport, "B", **TCP)
    await b.down.send(AddPhysicalAddress(a.address, a.physical))
    await b.down.send(ViewChange(View.create(a.address, 1, [a.address, b.address])))
    await b.down.send([Message(a.address, b"before")])
    assert [m.payload for m in await a.receive(1)] == [b"before"]
    await a.down.aclose()  # A's transport stops: its listener and connections close
    await wait_until(lambda: not b.transport.stats()["connections"], timeout=20, interval=0.01)
    await b.down.send([Message(a.address, b"ack"), Message(a.address, b"retransmission")])
    await wait_until(
        lambda: b.transport.stats()["connect_failures"] == 1, timeout=20, interval=0.01
    )
    assert b.transport.stats()["dropped_connect_failed"] == 2
    assert _drop_lines(caplog, logging.WARNING) == []
    assert any("connect_failed to A" in line for line in _drop_lines(caplog, logging.DEBUG))


async def test_member_of_the_view_that_does_not_answer_is_tried_again_not_dropped(
    open_endpoint: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A member of the view that accepts but never says hello (paused, say) is connected to
    again and again, its bundles kept: NAKACK2 in seed 003's mode does not retransmit, so a
    drop would lose them for good. Once the view has lost it, they are dropped, counted and
    logged at DEBUG: an expected drop."""
    caplog.set_level(logging.DEBUG, logger=TCP_LOG)
    b = await open_endpoint(TcpTransport, "B", **{**TCP, "sock_conn_timeout": 0.3})
    c = Address.random("C")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody answers the hello
        await b.down.send(AddPhysicalAddress(c, silent.getsockname()))
        await b.down.send(ViewChange(View.create(b.address, 2, [b.address, c])))
        await b.down.send([Message(c, b"hello?")])
        await wait_until(
            lambda: b.transport.stats()["connect_failures"] >= 2, timeout=20, interval=0.01
        )
        stats = b.transport.stats()
        assert stats["connect_retries"] >= 1 and "dropped_connect_failed" not in stats
        await b.down.send(ViewChange(View.create(b.address, 3, [b.address])))
        await wait_until(
            lambda: b.transport.stats().get("dropped_connect_failed") == 1,
            timeout=20,
            interval=0.01,
        )
    assert _drop_lines(caplog, logging.WARNING) == []
    assert any("connect_failed to C" in line for line in _drop_lines(caplog, logging.DEBUG))


async def test_unreachable_endpoint_of_a_non_member_is_dropped_quietly_at_once(
    open_endpoint: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The same silent endpoint for an address the view does not have: one attempt, the
    bundle dropped, counted, logged at DEBUG."""
    caplog.set_level(logging.DEBUG, logger=TCP_LOG)
    b = await open_endpoint(TcpTransport, "B", **{**TCP, "sock_conn_timeout": 0.3})
    c = Address.random("C")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        await b.down.send(AddPhysicalAddress(c, silent.getsockname()))
        await b.down.send(ViewChange(View.create(b.address, 2, [b.address])))
        await b.down.send([Message(c, b"hello?")])
        await wait_until(
            lambda: b.transport.stats()["connect_failures"] == 1, timeout=20, interval=0.01
        )
    stats = b.transport.stats()
    assert stats["dropped_connect_failed"] == 1 and stats["connect_retries"] == 0
    assert _drop_lines(caplog, logging.WARNING) == []
    assert len(_drop_lines(caplog, logging.DEBUG)) == 1


async def test_bundles_for_a_member_without_a_known_endpoint_wait_for_it(
    open_endpoint: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A member of the view we never heard from (it was paused while we joined): its
    bundles wait, counted in ``waited_for_address``, and go out, in order, once discovery
    says where it listens. A non-member without an endpoint is dropped (``no_physical``),
    logged at DEBUG: it is what is left for a member that left (acks, retransmissions)."""
    caplog.set_level(logging.DEBUG, logger=TCP_LOG)
    a = await open_endpoint(TcpTransport, "A", **TCP)
    b = await open_endpoint(TcpTransport, "B", **TCP)
    stranger = Address.random("S")
    await b.down.send(ViewChange(View.create(b.address, 1, [b.address, a.address])))
    await b.down.send([Message(a.address, b"one"), Message(a.address, b"two")])
    await b.down.send([Message(stranger, b"lost")])
    await wait_until(
        lambda: b.transport.stats().get("dropped_no_physical") == 1, timeout=20, interval=0.01
    )
    assert b.transport.stats()["waited_for_address"] == 1
    assert _drop_lines(caplog, logging.WARNING) == []  # a non-member: one that left, at DEBUG
    assert any("no_physical to S" in line for line in _drop_lines(caplog, logging.DEBUG))
    await b.down.send(AddPhysicalAddress(a.address, a.physical))
    assert [m.payload for m in await a.receive(2)] == [b"one", b"two"]


async def test_a_full_queue_for_a_member_without_an_endpoint_never_stalls_the_transport(
    open_endpoint: Any,
) -> None:
    """Bundles for a member of the view whose endpoint is unknown fill its queue past
    ``send_queue_size``: senders are held back a while at a time, not for ever, so the
    transport still takes the view that drops that member, and sends on to the others."""
    a = await open_endpoint(TcpTransport, "A", **TCP)
    b = await open_endpoint(TcpTransport, "B", **{**TCP, "send_queue_size": 4096})
    ghost = Address.random("G")
    await b.down.send(AddPhysicalAddress(a.address, a.physical))
    await b.down.send(ViewChange(View.create(b.address, 1, [b.address, a.address, ghost])))
    for i in range(8):
        await b.down.send([Message(None, bytes(1000) + b"%d" % i)])
    await b.down.send(ViewChange(View.create(b.address, 2, [b.address, a.address])))
    await b.down.send([Message(a.address, b"after")])
    got = await a.receive(9)
    assert got[-1].payload == b"after" and len(got) == 9
    assert b.transport.stats()["dropped_connect_failed"] == 8


async def test_what_a_stopping_member_could_not_send_is_counted_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """During its own shutdown (its task cancelled) a member loses what it has not sent:
    expected, so counted and logged at DEBUG, even to a member of the view."""
    caplog.set_level(logging.DEBUG, logger=TCP_LOG)
    transport = TcpTransport(**TCP)
    me, peer = Address.random("A"), Address.random("B")
    transport.start(me, "stopping", trio.current_time())
    transport.view_changed(View.create(me, 1, [me, peer]), trio.current_time())
    transport._pending[peer] = pending = Pending()
    pending.add(b"bundle", 3)
    with trio.CancelScope() as scope:
        scope.cancel()
        transport._fail_pending(("127.0.0.1", 9), peer, "cannot connect to 127.0.0.1:9")
    assert transport.stats()["dropped_connect_failed"] == 3
    assert _drop_lines(caplog, logging.WARNING) == []
    assert len(_drop_lines(caplog, logging.DEBUG)) == 1


async def test_a_discovery_probe_to_another_clusters_member_reports_a_foreign_endpoint(
    open_endpoint: Any,
) -> None:
    """Issue 12 item 6: a probe (SendToHosts) that reaches a member of another cluster goes
    up as ForeignEndpoint, so discovery can say what it found instead of finding nobody."""
    x = await open_endpoint(TcpTransport, "X", cluster="cluster-x", **TCP)
    y = await open_endpoint(TcpTransport, "Y", cluster="cluster-y", **TCP)
    await y.down.send(SendToHosts((x.physical,), (Message(None, b"who?"),)))
    with trio.fail_after(20):
        while not isinstance(item := await y.up.receive(), ForeignEndpoint):
            pass
    assert item.physical == x.physical
    assert "closed before its hello" in item.detail
