"""Limits against abuse over real UDP and TCP (issue 18): a hostile peer is capped, the others
served.

Each test runs members A and B of the transport's preset (``transport``: udp, tcp; UNICAST2's
tests with UNICAST2 in place of UNICAST3) and a hostile peer in the test that sends crafted
bundles, encoded with the wire codec, in the plain (not shared-secret) mode, where anyone who
speaks the wire format can. It checks that the limit's counter moved, that what the member keeps
for the hostile peer stays within the limit, and that A and B still exchange multicasts
afterwards.

A retransmission budget is per interval, and how many intervals a flood spans depends on how
fast this machine runs it: the flood tests run within one interval (`_one_interval`), so what
A serves is a count, never a rate measured on the wall clock. That a budget comes back at the
next interval is checked sans-IO, in each protocol's unit tests.

- Over UDP the hostile peer is a raw socket that sends to a member's unicast port; it may claim
  any source, a made-up member or B itself.
- Over TCP it is a raw connection that says hello as an address of its own, drains whatever the
  member sends it, and sends bundles framed as the TCP transport frames them. It cannot pass
  for B, so where the UDP test claims to be B, the TCP test's peer joins the view first (plain
  mode lets anyone); it never answers, so failure detection removes it later.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts
from triogroups import Address, Channel, Message, StackConfig, open_channel
from triogroups.protocols import ids
from triogroups.protocols._discovery import REQUEST, DiscoveryHeader
from triogroups.protocols.frag import FragHeader
from triogroups.protocols.gms import GmsHeader
from triogroups.protocols.gms._header import JOIN_REQ
from triogroups.protocols.mcast import MSG as MCAST_MSG
from triogroups.protocols.mcast import XMIT_REQ as MCAST_XMIT_REQ
from triogroups.protocols.mcast import McastHeader
from triogroups.protocols.nakack2._header import MSG, XMIT_REQ, NakAckHeader2
from triogroups.protocols.unicast2 import DATA, Unicast2Header
from triogroups.protocols.unicast2 import XMIT_REQ as UNICAST2_XMIT_REQ
from triogroups.protocols.unicast3._common import XMIT_REQ as UNICAST3_XMIT_REQ
from triogroups.protocols.unicast3._common import Unicast3Header
from triogroups.testing import wait_until
from triogroups.transports._addresses import label
from triogroups.transports._tcp_conn import encode_hello, frame
from triogroups.wire import WireCodec

pytestmark = pytest.mark.real

TRANSPORTS = pytest.mark.parametrize("transport", ["udp", "tcp"])


def _layer(ch: Channel, name: str) -> dict[str, Any]:
    for layer in ch.stack.stats()["layers"]:
        if layer["protocol"] == name:
            stats: dict[str, Any] = layer["stats"]
            return stats
    raise KeyError(name)


async def _stats_when(
    ch: Channel, protocol: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """``protocol``'s stats at ``ch`` as first seen to satisfy ``done`` (polled every 50 ms):
    the snapshot the test's assertions then check."""
    stats = _layer(ch, protocol)
    while not done(stats):
        await trio.sleep(0.05)
        stats = _layer(ch, protocol)
    return stats


def _config(preset_on_own_ports: PresetOnOwnPorts, transport: str) -> StackConfig:
    """The transport's preset on ports of its own. Over TCP a hello may wait long on a loaded
    machine: with 80 connections opened at once at load 25, the member's default 2 s
    ``sock_conn_timeout`` closed a hostile peer before its hello was read, and the test failed
    for want of CPU. The limits under test are counts."""
    config = preset_on_own_ports(transport)
    return config.configure("TCP", sock_conn_timeout=60.0) if transport == "tcp" else config


def _unicast2(preset_on_own_ports: PresetOnOwnPorts, transport: str, **props: Any) -> StackConfig:
    return _config(preset_on_own_ports, transport).replace("UNICAST3", "UNICAST2", **props)


@asynccontextmanager
async def _group(config: StackConfig) -> AsyncIterator[tuple[Channel, Channel]]:
    """A and B in one view, the coordinator first."""
    cluster = f"abuse-{Address.random('x').uuid:x}"[:20]
    async with (
        open_channel(cluster, config, "A") as a,
        open_channel(cluster, config, "B") as b,
    ):
        await wait_until(lambda: len(a.view.members) >= 2 and len(b.view.members) >= 2, timeout=120)
        yield (a, b) if a.view.coord == a.address else (b, a)


class UdpHostile:
    """A raw socket that sends crafted bundles to one member, as ``me`` unless told otherwise."""

    def __init__(self, target: Channel, me: Address, sock: socket.socket) -> None:
        host, port = _layer(target, "UDP")["physical"].rsplit(":", 1)
        self.where = (host, int(port))
        self.me = me
        self.codec = WireCodec(target.cluster)
        self.sock = sock

    async def send(
        self, msgs: list[Message], dest: Address | None = None, *, src: Address | None = None
    ) -> None:
        self.sock.sendto(self.codec.encode(dest, src or self.me, msgs), self.where)


class TcpHostile:
    """One raw connection to a member that said hello as ``me``."""

    def __init__(self, target: Channel, me: Address, stream: trio.SocketStream) -> None:
        self.me = me
        self.codec = WireCodec(target.cluster)
        self.stream = stream

    async def send(self, msgs: list[Message], dest: Address | None = None) -> None:
        data = self.codec.encode(dest, self.me, msgs)
        await self.stream.send_all(frame(data) + data)


@asynccontextmanager
async def _udp_hostile(target: Channel, me: Address) -> AsyncIterator[UdpHostile]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield UdpHostile(target, me, sock)


@asynccontextmanager
async def _tcp_hostile(
    target: Channel, me: Address, *, drain: bool = True
) -> AsyncIterator[TcpHostile]:
    """Connect, say hello as ``me`` (listening nowhere), and drain the member's frames
    (unless not ``drain``: a peer that never reads)."""
    host, port = _layer(target, "TCP")["physical"].rsplit(":", 1)
    codec = WireCodec(target.cluster)
    stream = await trio.open_tcp_stream(host, int(port))

    async def drain_all() -> None:
        try:
            while await stream.receive_some(1 << 16):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async with stream, trio.open_nursery() as nursery:
        await stream.send_all(encode_hello(codec, me, ("127.0.0.1", 1), (host, int(port))))
        if drain:
            nursery.start_soon(drain_all)
        yield TcpHostile(target, me, stream)
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def _hostile(transport: str, target: Channel, me: Address) -> AsyncIterator[Any]:
    """A hostile peer of ``transport`` that sends to ``target`` as ``me``."""
    hostile = _udp_hostile(target, me) if transport == "udp" else _tcp_hostile(target, me)
    async with hostile as peer:
        yield peer


@asynccontextmanager
async def _as_member(transport: str, coord: Channel, b: Channel, name: str) -> AsyncIterator[Any]:
    """A hostile peer that the coordinator takes for a member of its view: over UDP one that
    claims to be B (plain mode authenticates no source); over TCP a made-up ``name`` that
    joins the view first (see `_intrude`)."""
    if transport == "udp":
        async with _udp_hostile(coord, b.address) as hostile:
            yield hostile
    else:
        async with _tcp_hostile(coord, Address.random(name)) as hostile:
            await _intrude(hostile, coord)
            yield hostile


async def _intrude(hostile: TcpHostile, coord: Channel) -> None:
    """Join the hostile peer to the view (plain mode lets anyone): it sends a
    JOIN_REQ and never answers, so failure detection removes it a few seconds later."""
    join = Message(coord.address, headers={ids.GMS: GmsHeader(JOIN_REQ)})
    await hostile.send([join], coord.address)
    await wait_until(lambda: hostile.me in coord.view.members, timeout=120)


@asynccontextmanager
async def _one_interval(ch: Channel, protocol: str) -> AsyncIterator[dict[str, Any]]:
    """Run the block within one budget interval of ``protocol`` at ``ch``, however slowly:
    its ``xmit_interval`` (the budget's interval) is an hour meanwhile, and then set back,
    so what was lost meanwhile is asked for again. Yields the stats at the start, to count
    what the block changed: at most ``max_xmits_per_interval`` served per requester."""
    interval = ch.stack.protocol(protocol).xmit_interval
    await ch.stack.set_property(protocol, "xmit_interval", 3600.0)
    try:
        yield _layer(ch, protocol)
    finally:
        await ch.stack.set_property(protocol, "xmit_interval", interval)


async def _still_served(a: Channel, b: Channel) -> None:
    """A and B still exchange multicasts, both ways."""
    await a.send(b"still there, b?")
    await b.send(b"still there, a?")
    seen_a: list[Any] = []
    seen_b: list[Any] = []
    while b"still there, a?" not in seen_a:
        seen_a.append((await a.receive()).payload)
    while b"still there, b?" not in seen_b:
        seen_b.append((await b.receive()).payload)


async def _two_again(coord: Channel, other: Channel, timeout: float) -> None:
    """Failure detection removed whatever joined besides A and B."""
    await wait_until(
        lambda: len(coord.view.members) <= 2 and len(other.view.members) <= 2,
        timeout=timeout,
        interval=0.1,
    )


async def _udp_join_flood(coord: Channel, counter: str) -> tuple[dict[str, Any], int]:
    """500 JOIN_REQs from made-up members, one socket; the coordinator's GMS stats once 400
    were dropped, and the most joiners it queued meanwhile."""
    peak_queued = 0
    async with _udp_hostile(coord, coord.address) as hostile:
        for i in range(500):
            join = Message(coord.address, headers={ids.GMS: GmsHeader(JOIN_REQ)})
            await hostile.send([join], coord.address, src=Address.random(f"fake{i}"))
            if i % 50 == 49:
                peak_queued = max(peak_queued, _layer(coord, "GMS")["queued_joiners"])
                await trio.sleep(0.01)
        stats = await _stats_when(coord, "GMS", lambda s: s.get(counter, 0) >= 400)
    assert stats["queued_joiners"] <= 5
    return stats, peak_queued


async def _tcp_join_flood(coord: Channel, counter: str) -> tuple[dict[str, Any], int]:
    """80 made-up joiners, each on a connection of its own, send JOIN_REQs at once; the
    coordinator's GMS stats once 60 were dropped, and the most joiners it queued meanwhile."""
    join = [Message(coord.address, headers={ids.GMS: GmsHeader(JOIN_REQ)})]
    peak_queued = 0
    async with trio.open_nursery() as nursery:

        async def joiner(i: int, ready: trio.Event) -> None:
            async with _tcp_hostile(coord, Address.random(f"fake{i}")) as hostile:
                await hostile.send(join, coord.address)
                ready.set()
                await trio.sleep_forever()

        for i in range(80):
            ready = trio.Event()
            nursery.start_soon(joiner, i, ready)
            await ready.wait()
            peak_queued = max(peak_queued, _layer(coord, "GMS")["queued_joiners"])

        def enough(stats: dict[str, Any]) -> bool:
            nonlocal peak_queued
            peak_queued = max(peak_queued, stats["queued_joiners"])
            return stats.get(counter, 0) >= 60

        stats = await _stats_when(coord, "GMS", enough)
        nursery.cancel_scope.cancel()
    return stats, peak_queued


@TRANSPORTS
@pytest.mark.parametrize(
    ("limit", "counter"),
    [("max_members", "join_requests_dropped_max_members"),
     ("max_pending_joins", "join_requests_dropped_pending")],
)  # fmt: skip
async def test_join_request_flood_is_capped_and_the_group_goes_on(
    transport: str, limit: str, counter: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """Made-up members send JOIN_REQs to the coordinator (UDP: 500 from one socket; TCP: 80,
    each on a connection of its own, at once). ``max_members=2``: the view of A and B is
    full, every one is dropped. ``max_pending_joins=5``: at most 5 are queued at a time, the
    rest dropped; the few admitted never answer, so failure detection removes them. Either
    way A and B then go on as before."""
    config = _config(preset_on_own_ports, transport).configure(
        "GMS", **{limit: 2 if limit == "max_members" else 5}
    )
    timeout = 90 if transport == "udp" else 120
    with trio.fail_after(timeout):
        async with _group(config) as (coord, other):
            flood = _udp_join_flood if transport == "udp" else _tcp_join_flood
            _, peak_queued = await flood(coord, counter)
            assert peak_queued <= 5
            await _two_again(coord, other, timeout)
            await _still_served(coord, other)


@TRANSPORTS
async def test_nakack2_xmit_request_flood_is_capped_per_peer_and_the_group_goes_on(
    transport: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """A made-up peer asking A again and again for all it multicast, within one interval
    (`_one_interval`), gets at most max_xmits_per_interval messages; the rest is counted as
    xmits_capped. B's genuine requests (UDP: for datagrams lost on the way) have a budget of
    their own, so A serves at most two budgets meanwhile."""
    config = _config(preset_on_own_ports, transport).configure("NAKACK2", max_xmits_per_interval=50)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            for i in range(100):
                await a.send(b"m%d" % i)
            req = NakAckHeader2(XMIT_REQ, 0, a.address, (1, 100))
            async with (
                _one_interval(a, "NAKACK2") as before,
                _hostile(transport, a, Address.random("greedy")) as hostile,
            ):
                for _ in range(200):
                    await hostile.send([Message(a.address, headers={ids.NAKACK2: req})])
                    await trio.sleep(0.002)
                received = 150 if transport == "udp" else 190
                stats = await _stats_when(
                    a, "NAKACK2", lambda s: s["xmit_reqs_received"] >= received
                )
            assert stats["xmits_capped"] > 0
            assert stats["xmit_rsps_sent"] - before["xmit_rsps_sent"] <= 50 * 2
            await _still_served(a, b)


async def test_mcast_xmit_request_flood_is_capped_per_peer_and_the_group_goes_on(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """MCAST (the udp-mcast preset) caps what it resends to one peer the same way: within
    one interval, at most max_xmits_per_interval to the made-up peer and as many to B."""
    config = preset_on_own_ports("udp-mcast").configure("MCAST", max_xmits_per_interval=50)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            for i in range(100):
                await a.send(b"m%d" % i)
            req = McastHeader(MCAST_XMIT_REQ, 0, None, tuple(range(1, 101)))
            async with (
                _one_interval(a, "MCAST") as before,
                _udp_hostile(a, Address.random("greedy")) as hostile,
            ):
                for _ in range(100):
                    await hostile.send([Message(a.address, headers={ids.MCAST: req})])
                    await trio.sleep(0.002)
                stats = await _stats_when(a, "MCAST", lambda s: s["xmit_reqs_received"] >= 80)
            assert stats["xmits_capped"] > 0
            assert stats["retransmissions"] - before["retransmissions"] <= 50 * 2
            await _still_served(a, b)


@TRANSPORTS
async def test_unicast3_xmit_request_flood_is_capped_per_peer_and_the_group_goes_on(
    transport: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """A sends 100 unicasts to a member, and XMIT_REQs for all of them come again and again
    from that member (UDP: claiming to be B; TCP: a peer that joined): within one interval
    A serves at most max_xmits_per_interval seqnos per requester (the hostile peer, and B
    over TCP). (UDP waits for 5,000 capped, allowing for requests lost on the way; TCP for
    all 10,000 requests.)"""
    config = _config(preset_on_own_ports, transport).configure(
        "UNICAST3", max_xmits_per_interval=50
    )
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            async with _as_member(transport, a, b, "greedy") as hostile:
                for i in range(100):
                    await a.send(b"u%d" % i, to=hostile.me)
                req = Unicast3Header(UNICAST3_XMIT_REQ, missing=tuple(range(1, 101)))
                async with _one_interval(a, "UNICAST3") as before:
                    for _ in range(100):
                        msg = Message(a.address, headers={ids.UNICAST3: req})
                        await hostile.send([msg], a.address)
                        await trio.sleep(0.002)
                    counter, enough = (
                        ("xmits_capped", 5000)
                        if transport == "udp"
                        else ("xmit_reqs_received", 100 * 100)
                    )
                    stats = await _stats_when(a, "UNICAST3", lambda s: s[counter] >= enough)
            asked = stats["xmit_reqs_received"] - before["xmit_reqs_received"]
            capped = stats["xmits_capped"] - before["xmits_capped"]
            assert asked - capped <= 50 * 2
            await _still_served(a, b)


@TRANSPORTS
async def test_nakack2_sender_that_never_fills_its_gaps_is_capped(
    transport: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """Multicasts from a member (UDP: claiming to be B; TCP: a peer that joined) far beyond
    A's window of it are dropped and counted, never buffered (UDP waits for 400 of the
    500, allowing for datagrams lost on the way)."""
    config = _config(preset_on_own_ports, transport).configure("NAKACK2", max_receive_window=100)
    timeout = 90 if transport == "udp" else 120
    with trio.fail_after(timeout):
        async with _group(config) as (a, b):
            async with _as_member(transport, a, b, "intruder") as hostile:
                for seqno in range(10_000, 10_500):
                    hdr = NakAckHeader2(MSG, seqno)
                    await hostile.send([Message(None, b"x" * 100, headers={ids.NAKACK2: hdr})])
                    if transport == "udp" and seqno % 50 == 0:
                        await trio.sleep(0.01)
                dropped = 400 if transport == "udp" else 500
                await _stats_when(
                    a, "NAKACK2", lambda s: s.get("dropped_beyond_window", 0) >= dropped
                )
            await _still_served(a, b)
            if transport == "tcp":
                await _two_again(a, b, timeout)


@TRANSPORTS
async def test_fragments_that_never_complete_are_capped(
    transport: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """First fragments of 300 messages that never complete: FRAG keeps at most
    max_pending_size bytes of them per sender and evicts the oldest."""
    config = _config(preset_on_own_ports, transport).configure(
        "FRAG", frag_size=1000, max_message_size=10_000, max_pending_size=20_000
    )
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            async with _hostile(transport, a, Address.random("fragger")) as hostile:
                for i in range(300):
                    frag = Message(None, bytes(1000), headers={ids.FRAG: FragHeader(i, 0, 10)})
                    await hostile.send([frag])
                    if transport == "udp" and i % 50 == 49:
                        await trio.sleep(0.01)
                stats = await _stats_when(a, "FRAG", lambda s: s.get("evicted", 0) >= 250)
            assert stats["pending_bytes"] <= 20_000
            await _still_served(a, b)


@TRANSPORTS
async def test_mcast_sender_beyond_the_window_is_capped(
    transport: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """MCAST's receive window is fixed (``capacity``): multicasts from a member (UDP, the
    udp-mcast preset: claiming to be B; TCP, the tcp preset with MCAST in place of NAKACK2
    and no MFC, as in udp-mcast: a peer that joined) far beyond A's window of it are
    dropped and counted as dropped_outside_window, never buffered."""
    if transport == "udp":
        config = preset_on_own_ports("udp-mcast").configure("MCAST", capacity=64)
    else:
        config = _config(preset_on_own_ports, "tcp").replace("NAKACK2", "MCAST", capacity=64)
        config = config.remove("MFC")
    with trio.fail_after(90 if transport == "udp" else 120):
        async with _group(config) as (a, b):
            async with _as_member(transport, a, b, "intruder") as hostile:
                for seqno in range(10_000, 10_500):
                    hdr = McastHeader(MCAST_MSG, seqno)
                    await hostile.send([Message(None, b"x" * 100, headers={ids.MCAST: hdr})])
                    if transport == "udp" and seqno % 50 == 0:
                        await trio.sleep(0.01)
                dropped = 400 if transport == "udp" else 500
                await _stats_when(a, "MCAST", lambda s: s["dropped_outside_window"] >= dropped)
            await _still_served(a, b)


async def test_tcp_peer_that_never_reads_cannot_stall_the_member(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """A made-up peer that never reads its connection asks A for discovery answers, 100
    per frame, without end: what A queues for it stops at send_queue_size and the rest is
    dropped and counted (``dropped_queue_full``), instead of A's sends waiting for a reader that
    never comes (back-pressure is for members). A and B go on exchanging multicasts."""
    config = _config(preset_on_own_ports, "tcp").configure("TCP", send_queue_size=1 << 16)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            mute = Address.random("mute")
            async with _tcp_hostile(a, mute, drain=False) as hostile:
                hdr = DiscoveryHeader(REQUEST, "127.0.0.1", 1, False)
                asks = [Message(None, headers={ids.TCPPING: hdr}) for _ in range(100)]
                stats = _layer(a, "TCP")
                while stats.get("dropped_queue_full", 0) < 1000:
                    for _ in range(20):
                        await hostile.send(asks)
                    await trio.sleep(0.01)
                    stats = _layer(a, "TCP")
                assert stats["connections"][label(mute)]["queued_bytes"] <= (1 << 16) + (1 << 14)
                await _still_served(a, b)


def _data(seqno: int, *, first: bool = False) -> Message:
    return Message(None, b"x" * 100, headers={ids.UNICAST2: Unicast2Header(DATA, seqno, 7, first)})


@TRANSPORTS
async def test_unicast2_sender_that_never_fills_its_gaps_is_capped(
    transport: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """UNICAST2: a made-up peer opens a connection to A (a first message) and then sends
    seqnos far beyond it: A keeps at most max_receive_window of them and counts the rest."""
    config = _unicast2(preset_on_own_ports, transport, max_receive_window=100)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            fake = Address.random("gappy")
            async with _hostile(transport, a, fake) as hostile:
                for seqno in (1, *range(1_000, 1_500)):
                    msg = _data(seqno, first=seqno == 1)
                    if transport == "udp":
                        msg.dest = a.address
                    await hostile.send([msg], a.address)
                    if transport == "udp" and seqno % 50 == 0:
                        await trio.sleep(0.01)
                stats = await _stats_when(
                    a, "UNICAST2", lambda s: s["dropped_beyond_window"] >= 400
                )
            assert stats["recv"][str(fake)]["size"] <= 100
            await _still_served(a, b)


@TRANSPORTS
async def test_unicast2_xmit_request_flood_is_capped_per_peer(
    transport: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """UNICAST2: A sends 100 unicasts to a member, and XMIT_REQs for all of them on A's
    connection to it come again and again from that member (UDP: claiming to be B; TCP: a
    peer that joined): within one interval at most max_xmits_per_interval seqnos per
    requester (the hostile peer, and B over TCP) are resent, the rest counted as capped."""
    config = _unicast2(preset_on_own_ports, transport, max_xmits_per_interval=50)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            async with _as_member(transport, a, b, "greedy") as hostile:
                for i in range(100):
                    await a.send(b"u%d" % i, to=hostile.me)
                conn_id = _layer(a, "UNICAST2")["send"][str(hostile.me)]["conn_id"]
                req = Unicast2Header(
                    UNICAST2_XMIT_REQ, conn_id=conn_id, missing=tuple(range(1, 101))
                )
                async with _one_interval(a, "UNICAST2") as before:
                    for _ in range(100):
                        msg = Message(a.address, headers={ids.UNICAST2: req})
                        await hostile.send([msg], a.address)
                        await trio.sleep(0.002)
                    stats = await _stats_when(
                        a, "UNICAST2", lambda s: s["xmit_reqs_received"] >= 100 * 100
                    )
            asked = stats["xmit_reqs_received"] - before["xmit_reqs_received"]
            capped = stats["xmits_capped"] - before["xmits_capped"]
            assert asked - capped <= 50 * 2
            await _still_served(a, b)
