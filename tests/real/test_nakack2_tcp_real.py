"""Seed 003 (NAKACK2 without retransmission) over real TCP on loopback, channels in this process.

With ``xmit_interval = 0`` nothing brings back a message lost below NAKACK2,
so the transport must never drop one (the seed's thread-pool rule): a
receiver that stops reading makes its TCP receive path stop reading too,
and the sender waits.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
import trio

from triogroups import Channel, StackConfig, open_channel

pytestmark = pytest.mark.real

COUNT = 3_000
PAYLOAD = 4_000
QUEUE = 32_768  # TCP send_queue_size: bytes queued per connection before sending waits


def _tcp_stack(**tcp: Any) -> StackConfig:
    """The tcp preset on ports of its own, without flow control.

    Without UFC and MFC nothing above the transport holds a sender back, so a
    slow receiver is absorbed by its stack's channels and then by TCP itself.
    Every member probes only the first member's port: no probe of a port
    nobody listens on, so any TCP drop counted is a real one.
    """
    base = random.randint(20_000, 40_000)
    config = StackConfig.preset("tcp").remove("UFC").remove("MFC")
    config = config.configure("TCP", bind_port=base, port_range=20, **tcp)
    return config.configure("TCPPING", initial_hosts=[f"127.0.0.1[{base}]"], port_range=0)


def _drops(channel: Channel) -> dict[str, Any]:
    """The TCP transport's drop counters: what it could not send, and what it threw away."""
    stats = channel.stack.protocol("TCP").stats()
    sent = {k: v for k, v in stats.items() if k.startswith("dropped_") and v}
    return {**sent, **{k: v for k, v in stats["decode_errors"].items() if v}}


async def _collect(channel: Channel, got: list[bytes]) -> None:
    async for msg in channel:
        got.append(msg.payload)


async def test_seed003_tcp_receive_path_never_drops_below_nakack2_xmit_interval_0() -> None:
    """Seed 003, thread pool: "The transport's thread pool must not drop messages".

    A multicasts COUNT messages while B's application reads nothing. B's
    stack fills (one batch per channel, a receive buffer of 16), its TCP
    receive path stops reading, the connection fills and A's sends wait.
    Once B reads again, every message arrives, in order, with no gap in
    NAKACK2's window, nothing asked for again, and no TCP drop counter above 0.
    """
    config = _tcp_stack(send_queue_size=QUEUE)
    cluster = f"s003-{uuid.uuid4().hex[:8]}"
    payloads = [b"%06d" % i + bytes(PAYLOAD - 6) for i in range(COUNT)]
    own: list[bytes] = []
    got: list[bytes] = []
    sent = 0
    with trio.fail_after(120):
        async with (
            open_channel(cluster, config, "A", channel_size=1) as a,
            open_channel(cluster, config, "B", channel_size=1, receive_buffer=16) as b,
        ):
            while len(a.view.members) < 2 or len(b.view.members) < 2:
                await trio.sleep(0.05)
            tcp_a = a.stack.protocol("TCP")

            def queued() -> int:
                conns = tcp_a.stats()["connections"].values()
                return max((c["queued_bytes"] for c in conns), default=0)

            async def send_all() -> None:
                nonlocal sent
                for p in payloads:
                    await a.send(p)
                    sent += 1

            async with trio.open_nursery() as nursery:
                nursery.start_soon(_collect, a, own)  # A delivers its own multicasts
                nursery.start_soon(send_all)
                before = -1
                while sent < COUNT and (queued() < QUEUE or sent != before):  # A waits on B
                    before = sent
                    await trio.sleep(0.5)
                held_back = sent
                nursery.start_soon(_collect, b, got)
                with trio.move_on_after(60):
                    while len(got) < COUNT or len(own) < COUNT:
                        await trio.sleep(0.05)
                nursery.cancel_scope.cancel()
            nak_b = b.stack.protocol("NAKACK2").stats()
            drops = {"A": _drops(a), "B": _drops(b)}
    assert drops == {"A": {}, "B": {}}
    assert held_back < COUNT  # B's stack pushed back all the way to A's application
    assert len(got) == COUNT and got == payloads and own == payloads
    (window,) = [w for m, w in nak_b["windows"].items() if m.startswith("A")]
    assert window["missing"] == 0 and window["size"] == 0
    assert nak_b["xmit_reqs_sent"] == 0 and not nak_b["xmit_task_running"]
