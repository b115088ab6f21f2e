"""The shipped presets form a group and deliver, over real loopback sockets."""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts
from triogroups import Channel, open_channel
from triogroups.testing import wait_until

#: Multicasts each member sends, and their size: enough to fill MCAST's and the flow
#: controls' windows, small enough for a busy 2-core machine.
_COUNT = 2000
_SIZE = 1024


def _payload(name: str, i: int) -> bytes:
    return f"{name}-{i}".encode().ljust(_SIZE, b".")


def _seqno(payload: bytes) -> int:
    return int(payload.rstrip(b".").rsplit(b"-", 1)[1])


@pytest.mark.real
@pytest.mark.parametrize("preset", ["udp", "tcp", "udp-mcast"])
async def test_preset_every_member_delivers_every_senders_multicasts_once_in_order(
    preset: str, preset_on_own_ports: PresetOnOwnPorts
) -> None:
    """Three members join one at a time (B joins A alone, then C), each multicasts
    2,000 1 KB messages: every member delivers all of them from every sender, itself
    included, exactly once and in send order.

    Issue 12: with udp-mcast, B (the first joiner) delivered none of A's multicasts:
    its window for A waited for a seqno A had purged while it was alone.
    """
    config = preset_on_own_ports(preset)
    cluster = f"real-{uuid.uuid4().hex[:8]}"
    names = ["A", "B", "C"]
    with trio.fail_after(240):
        async with AsyncExitStack() as stack:
            channels: list[Channel] = []
            for name in names:  # open_channel returns once this member is in the view
                channels.append(
                    await stack.enter_async_context(open_channel(cluster, config, name))
                )
            await wait_until(
                lambda: all(len(ch.view.members) >= len(names) for ch in channels), timeout=240
            )
            got: dict[str, dict[str, list[int]]] = {n: {s: [] for s in names} for n in names}

            async def receive(name: str, ch: Channel) -> None:
                mine = got[name]
                for _ in range(_COUNT * len(names)):
                    msg = await ch.receive()
                    mine[msg.src.name].append(_seqno(msg.payload))

            async def send(name: str, ch: Channel) -> None:
                for i in range(_COUNT):
                    await ch.send(_payload(name, i))

            with trio.move_on_after(120):  # then say who lacks what, rather than time out
                async with trio.open_nursery() as nursery:
                    for name, ch in zip(names, channels, strict=True):
                        nursery.start_soon(receive, name, ch)
                        nursery.start_soon(send, name, ch)
            counts = {r: {s: len(got[r][s]) for s in names} for r in names}
            expected = list(range(_COUNT))
            for receiver in names:
                for sender in names:
                    assert got[receiver][sender] == expected, f"{receiver} from {sender}: {counts}"


@pytest.mark.real
async def test_udp_mcast_joiner_delivers_the_coordinators_multicasts_though_it_leaves_when_done(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """Two members over udp-mcast (B joins A) each multicast a few hundred messages and
    leave as soon as they delivered everything, as processes whose work is done do: each
    must deliver all of both senders' messages, in order.

    A's VIEW for B's join (its first multicast after B's digest) reached B before the
    JOIN_RSP carrying that digest; B dropped it and held all of A's multicasts behind
    the gap. A, done first, left before B asked for it again, and B delivered none of
    A's multicasts (2 real processes x 2,000: one member got nothing from the other).
    """
    config = preset_on_own_ports("udp-mcast")
    cluster = f"real-{uuid.uuid4().hex[:8]}"
    names = ["A", "B"]
    count = 300
    got: dict[str, dict[str, list[int]]] = {n: {s: [] for s in names} for n in names}
    a_joined = trio.Event()

    async def member(name: str) -> None:
        if name != "A":
            await a_joined.wait()
        async with open_channel(cluster, config, name) as ch:
            a_joined.set()
            await wait_until(lambda: len(ch.view.members) >= len(names), timeout=120)
            mine = got[name]

            async def receive() -> None:
                for _ in range(count * len(names)):
                    msg = await ch.receive()
                    mine[msg.src.name].append(_seqno(msg.payload))

            async def send() -> None:
                for i in range(count):
                    await ch.send(_payload(name, i))

            with trio.move_on_after(60):  # then say who lacks what, rather than time out
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(receive)
                    nursery.start_soon(send)
        # the channel has left the group: done

    with trio.fail_after(180):
        async with trio.open_nursery() as nursery:
            for name in names:
                nursery.start_soon(member, name)
    counts = {r: {s: len(got[r][s]) for s in names} for r in names}
    expected = list(range(count))
    for receiver in names:
        for sender in names:
            assert got[receiver][sender] == expected, f"{receiver} from {sender}: {counts}"
