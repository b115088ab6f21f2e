"""UNICAST2's limits against abuse over real UDP and TCP (issue 18): the udp and tcp presets
with UNICAST2 in place of UNICAST3, and a hostile peer (a raw socket or a raw connection in
the test, as in test_abuse_limits_real.py and test_abuse_limits_tcp_real.py) that is capped
while A and B go on."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts
from tests.real.test_abuse_limits_real import Hostile, _group, _layer, _still_served
from tests.real.test_abuse_limits_tcp_real import _coord, _hostile, _intrude
from triogroups import Address, Channel, Message, StackConfig
from triogroups.protocols import ids
from triogroups.protocols.unicast2 import DATA, XMIT_REQ, Unicast2Header

pytestmark = pytest.mark.real


def _unicast2(preset_on_own_ports: PresetOnOwnPorts, preset: str, **props: Any) -> StackConfig:
    return preset_on_own_ports(preset).replace("UNICAST3", "UNICAST2", **props)


def _data(seqno: int, *, first: bool = False) -> Message:
    return Message(None, b"x" * 100, headers={ids.UNICAST2: Unicast2Header(DATA, seqno, 7, first)})


async def _beyond_window_dropped(a: Channel) -> dict[str, Any]:
    stats = _layer(a, "UNICAST2")
    while stats["dropped_beyond_window"] < 400:
        await trio.sleep(0.05)
        stats = _layer(a, "UNICAST2")
    return stats


async def test_udp_unicast2_sender_that_never_fills_its_gaps_is_capped(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """A made-up peer opens a connection to A (a first message) and then sends seqnos far
    beyond it: A keeps at most max_receive_window of them and counts the rest."""
    config = _unicast2(preset_on_own_ports, "udp", max_receive_window=100)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            hostile = Hostile(a)
            fake = Address.random("gappy")
            try:
                msg = _data(1, first=True)
                msg.dest = a.address
                hostile.send(fake, [msg], a.address)
                for seqno in range(1_000, 1_500):
                    msg = _data(seqno)
                    msg.dest = a.address
                    hostile.send(fake, [msg], a.address)
                    if seqno % 50 == 0:
                        await trio.sleep(0.01)
                stats = await _beyond_window_dropped(a)
            finally:
                hostile.close()
            assert stats["recv"][str(fake)]["size"] <= 100
            await _still_served(a, b)


async def test_udp_unicast2_xmit_request_flood_is_capped_per_peer(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """XMIT_REQs for A's unicasts to B on A's connection to B, claiming to come from B
    (plain mode authenticates no source): at most max_xmits_per_interval per interval."""
    config = _unicast2(preset_on_own_ports, "udp", max_xmits_per_interval=50, xmit_interval=1.0)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            for i in range(100):
                await a.send(b"u%d" % i, to=b.address)
            conn_id = _layer(a, "UNICAST2")["send"][str(b.address)]["conn_id"]
            hostile = Hostile(a)
            try:
                req = Unicast2Header(XMIT_REQ, conn_id=conn_id, missing=tuple(range(1, 101)))
                started = trio.current_time()
                for _ in range(100):
                    msg = Message(a.address, headers={ids.UNICAST2: req})
                    hostile.send(b.address, [msg], a.address)
                    await trio.sleep(0.002)
                stats = _layer(a, "UNICAST2")
                while stats["xmit_reqs_received"] < 100 * 100:
                    await trio.sleep(0.05)
                    stats = _layer(a, "UNICAST2")
                elapsed = trio.current_time() - started
            finally:
                hostile.close()
            assert stats["xmits_capped"] >= 100 * 100 - 50 * (int(elapsed) + 2)
            await _still_served(a, b)


async def test_tcp_unicast2_sender_that_never_fills_its_gaps_is_capped(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """The same over TCP, from a raw connection that says hello as the made-up peer."""
    config = _unicast2(preset_on_own_ports, "tcp", max_receive_window=100)
    with trio.fail_after(90):
        async with _group(config) as (a, b):
            fake = Address.random("gappy")
            async with _hostile(a, fake) as hostile:
                await hostile.send([_data(1, first=True)], a.address)
                for seqno in range(1_000, 1_500):
                    await hostile.send([_data(seqno)], a.address)
                stats = await _beyond_window_dropped(a)
            assert stats["recv"][str(fake)]["size"] <= 100
            await _still_served(a, b)


async def test_tcp_unicast2_xmit_request_flood_is_capped_per_peer(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """The hostile peer joins, the coordinator sends it 100 unicasts, and it asks for all of
    them again and again: at most max_xmits_per_interval are resent per xmit_interval."""
    config = _unicast2(preset_on_own_ports, "tcp", max_xmits_per_interval=50, xmit_interval=1.0)
    with trio.fail_after(90):
        async with _group(config) as (first, second):
            a, b = _coord(first, second)
            greedy = Address.random("greedy")
            async with _hostile(a, greedy) as hostile:
                await _intrude(hostile, a)
                for i in range(100):
                    await a.send(b"u%d" % i, to=greedy)
                conn_id = _layer(a, "UNICAST2")["send"][str(greedy)]["conn_id"]
                req = Unicast2Header(XMIT_REQ, conn_id=conn_id, missing=tuple(range(1, 101)))
                started = trio.current_time()
                for _ in range(100):
                    await hostile.send([Message(a.address, headers={ids.UNICAST2: req})], a.address)
                    await trio.sleep(0.002)
                stats = _layer(a, "UNICAST2")
                while stats["xmit_reqs_received"] < 100 * 100:
                    await trio.sleep(0.05)
                    stats = _layer(a, "UNICAST2")
                elapsed = trio.current_time() - started
            assert stats["xmits_capped"] >= 100 * 100 - 50 * (int(elapsed) + 2)
            await _still_served(a, b)
