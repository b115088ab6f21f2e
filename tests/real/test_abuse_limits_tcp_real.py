"""Limits against abuse over real TCP (issue 18): a hostile peer is capped, the others served.

The hostile peer is a raw TCP connection in the test: it says hello as an
address of its own (plain mode authenticates nobody, so any process that
speaks the wire format can), drains whatever the member sends it, and sends
crafted bundles framed as the TCP transport frames them. Each test checks
that the limit's counter moved, that what the member keeps for the hostile
peer stays within the limit, and that members A and B still exchange
multicasts afterwards. The same limits over UDP: test_abuse_limits_real.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts
from tests.real.test_abuse_limits_real import _group, _layer, _still_served
from triogroups import Address, Channel, Message
from triogroups.config import StackConfig
from triogroups.protocols import ids
from triogroups.protocols._discovery import REQUEST, DiscoveryHeader
from triogroups.protocols.frag import FragHeader
from triogroups.protocols.gms import GmsHeader
from triogroups.protocols.gms._header import JOIN_REQ
from triogroups.protocols.mcast import MSG as MCAST_MSG
from triogroups.protocols.mcast import McastHeader
from triogroups.protocols.nakack2._header import MSG, XMIT_REQ, NakAckHeader2
from triogroups.protocols.unicast3._common import XMIT_REQ as UNICAST3_XMIT_REQ
from triogroups.protocols.unicast3._common import Unicast3Header
from triogroups.transports._addresses import label
from triogroups.transports._tcp_conn import encode_hello, frame
from triogroups.wire import WireCodec

pytestmark = pytest.mark.real


class TcpHostile:
    """One raw connection to ``target`` that claims to be ``me``."""

    def __init__(self, target: Channel, me: Address, stream: trio.SocketStream) -> None:
        self.target = target.address
        self.me = me
        self.codec = WireCodec(target.cluster)
        self.stream = stream

    async def send(self, msgs: list[Message], dest: Address | None = None) -> None:
        data = self.codec.encode(dest, self.me, msgs)
        await self.stream.send_all(frame(data) + data)


def _patient(config: StackConfig) -> StackConfig:
    """A hello may wait long on a loaded machine: with 80 connections opened at once at load
    25, the member's default 2 s ``sock_conn_timeout`` closed a hostile peer before its
    hello was read, and the test failed for want of CPU. The limits under test are counts."""
    return config.configure("TCP", sock_conn_timeout=60.0)


@asynccontextmanager
async def _hostile(
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


def _coord(a: Channel, b: Channel) -> tuple[Channel, Channel]:
    return (a, b) if a.view.coord == a.address else (b, a)


async def _intrude(hostile: TcpHostile, coord: Channel) -> None:
    """Join the hostile peer to the view (plain mode lets anyone): it sends a
    JOIN_REQ and never answers, so failure detection removes it a few seconds later."""
    join = Message(coord.address, headers={ids.GMS: GmsHeader(JOIN_REQ)})
    await hostile.send([join], coord.address)
    while hostile.me not in coord.view.members:
        await trio.sleep(0.05)


@pytest.mark.parametrize(
    ("limit", "counter"),
    [("max_members", "join_requests_dropped_max_members"),
     ("max_pending_joins", "join_requests_dropped_pending")],
)  # fmt: skip
async def test_tcp_join_request_flood_is_capped_and_the_group_goes_on(
    limit: str, counter: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """80 made-up joiners, each on a connection of its own, send JOIN_REQs to the
    coordinator at once. ``max_members=2``: the view is full, every one is dropped.
    ``max_pending_joins=5``: at most 5 are queued at a time, the rest dropped; the
    few admitted never answer, so failure detection removes them."""
    config = _patient(preset_on_own_ports("tcp")).configure(
        "GMS", **{limit: 2 if limit == "max_members" else 5}
    )
    with trio.fail_after(120):
        async with _group(config) as (a, b):
            coord, other = _coord(a, b)
            join = [Message(coord.address, headers={ids.GMS: GmsHeader(JOIN_REQ)})]
            peak_queued = 0
            async with trio.open_nursery() as nursery:

                async def joiner(i: int, ready: trio.Event) -> None:
                    async with _hostile(coord, Address.random(f"fake{i}")) as hostile:
                        await hostile.send(join, coord.address)
                        ready.set()
                        await trio.sleep_forever()

                for i in range(80):
                    ready = trio.Event()
                    nursery.start_soon(joiner, i, ready)
                    await ready.wait()
                    peak_queued = max(peak_queued, _layer(coord, "GMS")["queued_joiners"])
                stats = _layer(coord, "GMS")
                while stats.get(counter, 0) < 60:
                    await trio.sleep(0.05)
                    stats = _layer(coord, "GMS")
                    peak_queued = max(peak_queued, stats["queued_joiners"])
                nursery.cancel_scope.cancel()
            assert peak_queued <= 5
            while len(coord.view.members) > 2 or len(other.view.members) > 2:
                await trio.sleep(0.1)
            await _still_served(coord, other)


async def test_tcp_xmit_request_flood_is_capped_per_peer_and_the_group_goes_on(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """A peer asking A again and again for all it multicast gets at most
    max_xmits_per_interval messages a second (NAKACK2 without retransmission, as
    over TCP); the rest is counted as xmits_capped."""
    config = _patient(preset_on_own_ports("tcp")).configure("NAKACK2", max_xmits_per_interval=50)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            for i in range(100):
                await a.send(b"m%d" % i)
            req = NakAckHeader2(XMIT_REQ, 0, a.address, (1, 100))
            async with _hostile(a, Address.random("greedy")) as hostile:
                started = trio.current_time()
                for _ in range(200):
                    await hostile.send([Message(a.address, headers={ids.NAKACK2: req})])
                    await trio.sleep(0.002)
                stats = _layer(a, "NAKACK2")
                while stats["xmit_reqs_received"] < 190:
                    await trio.sleep(0.05)
                    stats = _layer(a, "NAKACK2")
                elapsed = trio.current_time() - started
            assert stats["xmits_capped"] > 0
            assert stats["xmit_rsps_sent"] <= 50 * (int(elapsed) + 2)
            await _still_served(a, b)


async def test_tcp_unicast3_xmit_request_flood_is_capped_per_peer_and_the_group_goes_on(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """The hostile peer joins, the coordinator sends it 100 unicasts, and it asks for
    all of them again and again: at most max_xmits_per_interval are resent per
    xmit_interval."""
    config = _patient(preset_on_own_ports("tcp")).configure(
        "UNICAST3", max_xmits_per_interval=50, xmit_interval=1.0
    )
    with trio.fail_after(90):
        async with _group(config) as (coord, b):
            a, b = _coord(coord, b)
            greedy = Address.random("greedy")
            async with _hostile(a, greedy) as hostile:
                await _intrude(hostile, a)
                for i in range(100):
                    await a.send(b"u%d" % i, to=greedy)
                req = Unicast3Header(UNICAST3_XMIT_REQ, missing=tuple(range(1, 101)))
                started = trio.current_time()
                for _ in range(100):
                    msg = Message(a.address, headers={ids.UNICAST3: req})
                    await hostile.send([msg], a.address)
                    await trio.sleep(0.002)
                stats = _layer(a, "UNICAST3")
                while stats["xmit_reqs_received"] < 100 * 100:
                    await trio.sleep(0.05)
                    stats = _layer(a, "UNICAST3")
                elapsed = trio.current_time() - started
            assert stats["xmits_capped"] >= 100 * 100 - 50 * (int(elapsed) + 2)
            await _still_served(a, b)


async def test_tcp_member_that_never_fills_its_gaps_is_capped(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """An intruder joins (plain mode lets anyone), then multicasts seqnos far beyond
    the coordinator's window of it: dropped and counted, never buffered, while it is
    in the view; failure detection then removes it, as it never sends heartbeats."""
    config = _patient(preset_on_own_ports("tcp")).configure("NAKACK2", max_receive_window=100)
    with trio.fail_after(120):
        async with _group(config) as (a, b):
            coord, other = _coord(a, b)
            intruder = Address.random("intruder")
            async with _hostile(coord, intruder) as hostile:
                await _intrude(hostile, coord)
                for seqno in range(10_000, 10_500):
                    hdr = NakAckHeader2(MSG, seqno)
                    await hostile.send([Message(None, b"x" * 100, headers={ids.NAKACK2: hdr})])
                stats = _layer(coord, "NAKACK2")
                while stats.get("dropped_beyond_window", 0) < 500:
                    await trio.sleep(0.05)
                    stats = _layer(coord, "NAKACK2")
            await _still_served(coord, other)
            while len(coord.view.members) > 2 or len(other.view.members) > 2:
                await trio.sleep(0.1)


async def test_tcp_fragments_that_never_complete_are_capped(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """First fragments of 300 messages that never complete: FRAG keeps at most
    max_pending_size bytes of them per sender and evicts the oldest."""
    config = _patient(preset_on_own_ports("tcp")).configure(
        "FRAG", frag_size=1000, max_message_size=10_000, max_pending_size=20_000
    )
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            async with _hostile(a, Address.random("fragger")) as hostile:
                for i in range(300):
                    frag = Message(None, bytes(1000), headers={ids.FRAG: FragHeader(i, 0, 10)})
                    await hostile.send([frag])
                stats: dict[str, Any] = _layer(a, "FRAG")
                while stats.get("evicted", 0) < 250:
                    await trio.sleep(0.05)
                    stats = _layer(a, "FRAG")
            assert stats["pending_bytes"] <= 20_000
            await _still_served(a, b)


async def test_tcp_mcast_member_beyond_the_window_is_capped(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """The tcp preset with MCAST in place of NAKACK2 (and no MFC, as in udp-mcast): an
    intruder that joined multicasts seqnos far beyond the coordinator's fixed window of
    it (``capacity``): dropped and counted as dropped_outside_window, never buffered."""
    config = (
        _patient(preset_on_own_ports("tcp")).replace("NAKACK2", "MCAST", capacity=64).remove("MFC")
    )
    with trio.fail_after(120):
        async with _group(config) as (a, b):
            coord, other = _coord(a, b)
            async with _hostile(coord, Address.random("intruder")) as hostile:
                await _intrude(hostile, coord)
                for seqno in range(10_000, 10_500):
                    hdr = McastHeader(MCAST_MSG, seqno)
                    await hostile.send([Message(None, b"x" * 100, headers={ids.MCAST: hdr})])
                stats = _layer(coord, "MCAST")
                while stats["dropped_outside_window"] < 500:
                    await trio.sleep(0.05)
                    stats = _layer(coord, "MCAST")
            await _still_served(coord, other)


async def test_tcp_peer_that_never_reads_cannot_stall_the_member(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """A made-up peer that never reads its connection asks A for discovery answers, 100
    per frame, without end: what A queues for it stops at send_queue_size and the rest is
    dropped and counted (``dropped_queue_full``), instead of A's sends waiting for a reader that
    never comes (back-pressure is for members). A and B go on exchanging multicasts."""
    config = _patient(preset_on_own_ports("tcp")).configure("TCP", send_queue_size=1 << 16)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            mute = Address.random("mute")
            async with _hostile(a, mute, drain=False) as hostile:
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
