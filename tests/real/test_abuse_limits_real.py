"""Limits against abuse over real UDP (issue 18): a hostile peer is capped, the others served.

The same limits over TCP: test_abuse_limits_tcp_real.py.

The hostile peer is a raw UDP socket in the test that sends crafted bundles,
encoded with the wire codec, to a member's unicast port: the plain (not
shared-secret) mode, where anyone who speaks the wire format can do this.
Each test checks that the limit's counter moved, that what the member keeps
for the hostile peer stays within the limit, and that members A and B still
exchange multicasts afterwards.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts
from triogroups import Address, Channel, Message, StackConfig, open_channel
from triogroups.protocols import ids
from triogroups.protocols.frag import FragHeader
from triogroups.protocols.gms import GmsHeader
from triogroups.protocols.gms._header import JOIN_REQ
from triogroups.protocols.mcast import MSG as MCAST_MSG
from triogroups.protocols.mcast import XMIT_REQ as MCAST_XMIT_REQ
from triogroups.protocols.mcast import McastHeader
from triogroups.protocols.nakack2._header import MSG, XMIT_REQ, NakAckHeader2
from triogroups.protocols.unicast3._common import XMIT_REQ as UNICAST3_XMIT_REQ
from triogroups.protocols.unicast3._common import Unicast3Header
from triogroups.wire import WireCodec

pytestmark = pytest.mark.real


def _layer(ch: Channel, name: str) -> dict[str, Any]:
    for layer in ch.stack.stats()["layers"]:
        if layer["protocol"] == name:
            stats: dict[str, Any] = layer["stats"]
            return stats
    raise KeyError(name)


@asynccontextmanager
async def _group(config: StackConfig) -> AsyncIterator[tuple[Channel, Channel]]:
    cluster = f"abuse-{Address.random('x').uuid:x}"[:20]
    async with (
        open_channel(cluster, config, "A") as a,
        open_channel(cluster, config, "B") as b,
    ):
        while len(a.view.members) < 2 or len(b.view.members) < 2:
            await trio.sleep(0.05)
        yield a, b


class Hostile:
    """A raw socket that sends crafted bundles to one member."""

    def __init__(self, target: Channel) -> None:
        host, port = _layer(target, "UDP")["physical"].rsplit(":", 1)
        self.where = (host, int(port))
        self.target = target.address
        self.codec = WireCodec(target.cluster)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))

    def send(self, src: Address, msgs: list[Message], dest: Address | None = None) -> None:
        self.sock.sendto(self.codec.encode(dest, src, msgs), self.where)

    def close(self) -> None:
        self.sock.close()


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


@pytest.mark.parametrize(
    ("limit", "counter"),
    [("max_members", "join_requests_dropped_max_members"),
     ("max_pending_joins", "join_requests_dropped_pending")],
)  # fmt: skip
async def test_join_request_flood_is_capped_and_the_group_goes_on(
    limit: str, counter: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """500 JOIN_REQs from made-up members at the coordinator. ``max_members=2``: the
    view of A and B is full, every one is dropped. ``max_pending_joins=5``: at most 5
    are queued at a time, the rest dropped; the few admitted never answer, so failure
    detection removes them. Either way A and B then go on as before."""
    config = preset_on_own_ports("udp").configure(
        "GMS", **{limit: 2 if limit == "max_members" else 5}
    )
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            coord = a if a.view.coord == a.address else b
            other = b if coord is a else a
            hostile = Hostile(coord)
            peak_queued = 0
            try:
                for i in range(500):
                    fake = Address.random(f"fake{i}")
                    join = Message(coord.address, headers={ids.GMS: GmsHeader(JOIN_REQ)})
                    hostile.send(fake, [join], coord.address)
                    if i % 50 == 49:
                        peak_queued = max(peak_queued, _layer(coord, "GMS")["queued_joiners"])
                        await trio.sleep(0.01)
                stats = _layer(coord, "GMS")
                while stats.get(counter, 0) < 400:
                    await trio.sleep(0.05)
                    stats = _layer(coord, "GMS")
            finally:
                hostile.close()
            assert peak_queued <= 5 and stats["queued_joiners"] <= 5
            while len(coord.view.members) > 2 or len(other.view.members) > 2:
                await trio.sleep(0.1)
            await _still_served(coord, other)


async def test_xmit_request_flood_is_capped_per_peer_and_the_group_goes_on(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """A peer asking A again and again for all it sent gets max_xmits_per_interval
    messages per xmit_interval; the rest is counted as xmits_capped."""
    config = preset_on_own_ports("udp").configure(
        "NAKACK2", max_xmits_per_interval=50, xmit_interval=1.0
    )
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            for i in range(100):
                await a.send(b"m%d" % i)
            hostile = Hostile(a)
            fake = Address.random("greedy")
            try:
                req = NakAckHeader2(XMIT_REQ, 0, a.address, (1, 100))
                started = trio.current_time()
                for _ in range(200):
                    hostile.send(fake, [Message(a.address, headers={ids.NAKACK2: req})])
                    await trio.sleep(0.002)
                stats = _layer(a, "NAKACK2")
                while stats["xmit_reqs_received"] < 150:
                    await trio.sleep(0.05)
                    stats = _layer(a, "NAKACK2")
                elapsed = trio.current_time() - started
            finally:
                hostile.close()
            intervals = int(elapsed) + 1
            assert stats["xmits_capped"] > 0
            assert stats["xmit_rsps_sent"] <= 50 * intervals + 100  # + B's genuine requests
            await _still_served(a, b)


async def test_mcast_xmit_request_flood_is_capped_per_peer_and_the_group_goes_on(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """MCAST (the udp-mcast preset) caps what it resends to one peer the same way."""
    config = preset_on_own_ports("udp-mcast").configure(
        "MCAST", max_xmits_per_interval=50, xmit_interval=1.0
    )
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            for i in range(100):
                await a.send(b"m%d" % i)
            hostile = Hostile(a)
            fake = Address.random("greedy")
            try:
                req = McastHeader(MCAST_XMIT_REQ, 0, None, tuple(range(1, 101)))
                started = trio.current_time()
                for _ in range(100):
                    hostile.send(fake, [Message(a.address, headers={ids.MCAST: req})])
                    await trio.sleep(0.002)
                stats = _layer(a, "MCAST")
                while stats["xmit_reqs_received"] < 80:
                    await trio.sleep(0.05)
                    stats = _layer(a, "MCAST")
                elapsed = trio.current_time() - started
            finally:
                hostile.close()
            served = stats["xmit_reqs_received"] * 100 - stats["xmits_capped"]
            assert stats["xmits_capped"] > 0
            assert served <= 50 * (int(elapsed) + 1) + 100 * 5  # + B's genuine requests
            await _still_served(a, b)


async def test_unicast3_xmit_request_flood_is_capped_per_peer_and_the_group_goes_on(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """XMIT_REQs for A's unicasts to B, claiming to come from B (plain mode authenticates
    no source): A serves at most max_xmits_per_interval seqnos of them per interval."""
    config = preset_on_own_ports("udp").configure(
        "UNICAST3", max_xmits_per_interval=50, xmit_interval=1.0
    )
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            for i in range(100):
                await a.send(b"u%d" % i, to=b.address)
            hostile = Hostile(a)
            try:
                req = Unicast3Header(UNICAST3_XMIT_REQ, missing=tuple(range(1, 101)))
                for _ in range(100):
                    msg = Message(a.address, headers={ids.UNICAST3: req})
                    hostile.send(b.address, [msg], a.address)
                    await trio.sleep(0.002)
                stats = _layer(a, "UNICAST3")
                while stats["xmits_capped"] < 5000:
                    await trio.sleep(0.05)
                    stats = _layer(a, "UNICAST3")
            finally:
                hostile.close()
            await _still_served(a, b)


async def test_sender_that_never_fills_its_gaps_is_capped(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """Messages claiming to come from B far beyond A's window of B (spoofed source:
    plain mode authenticates nothing) are dropped and counted, not buffered."""
    config = preset_on_own_ports("udp").configure("NAKACK2", max_receive_window=100)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            hostile = Hostile(a)
            try:
                for seqno in range(10_000, 10_500):
                    msg = Message(
                        None, b"x" * 100, headers={ids.NAKACK2: NakAckHeader2(MSG, seqno)}
                    )
                    hostile.send(b.address, [msg])
                    if seqno % 50 == 0:
                        await trio.sleep(0.01)
                stats = _layer(a, "NAKACK2")
                while stats.get("dropped_beyond_window", 0) < 400:
                    await trio.sleep(0.05)
                    stats = _layer(a, "NAKACK2")
            finally:
                hostile.close()
            await _still_served(a, b)


async def test_fragments_that_never_complete_are_capped(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """First fragments of 300 messages that never complete: FRAG keeps at most
    max_pending_size bytes of them per sender and evicts the oldest."""
    config = preset_on_own_ports("udp").configure(
        "FRAG", frag_size=1000, max_message_size=10_000, max_pending_size=20_000
    )
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            hostile = Hostile(a)
            fake = Address.random("fragger")
            try:
                for i in range(300):
                    frag = Message(None, bytes(1000), headers={ids.FRAG: FragHeader(i, 0, 10)})
                    hostile.send(fake, [frag])
                    if i % 50 == 49:
                        await trio.sleep(0.01)
                stats = _layer(a, "FRAG")
                while stats.get("evicted", 0) < 250:
                    await trio.sleep(0.05)
                    stats = _layer(a, "FRAG")
            finally:
                hostile.close()
            assert stats["pending_bytes"] <= 20_000
            await _still_served(a, b)


async def test_mcast_sender_beyond_the_window_is_capped(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """MCAST's receive window is fixed (``capacity``): multicasts claiming to come from B
    far beyond A's window of B are dropped and counted as dropped_outside_window."""
    config = preset_on_own_ports("udp-mcast").configure("MCAST", capacity=64)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            hostile = Hostile(a)
            try:
                for seqno in range(10_000, 10_500):
                    hdr = McastHeader(MCAST_MSG, seqno)
                    hostile.send(b.address, [Message(None, b"x" * 100, headers={ids.MCAST: hdr})])
                    if seqno % 50 == 0:
                        await trio.sleep(0.01)
                stats = _layer(a, "MCAST")
                while stats["dropped_outside_window"] < 400:
                    await trio.sleep(0.05)
                    stats = _layer(a, "MCAST")
            finally:
                hostile.close()
            await _still_served(a, b)
