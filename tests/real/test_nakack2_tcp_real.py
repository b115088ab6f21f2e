"""Seed 003 (NAKACK2 without retransmission) over real TCP on loopback, channels in this process.

With ``xmit_interval = 0`` nothing brings back a message lost below NAKACK2,
so the transport must never drop one (the seed's thread-pool rule): a
receiver that stops reading makes its TCP receive path stop reading too,
and the sender waits. And the seed's join scenario (become_server_queue):
C joins {A,B}, the digest holds B at 100, B sends 70 multicasts before C is
a server, then more; C delivers 101 onwards, every one, in order, once.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from triogroups import Address, Channel, Message, StackConfig, open_channel
from triogroups.extend import Discard
from triogroups.protocols import ids
from triogroups.protocols.gms._header import VIEW_ACK
from triogroups.testing import free_ports, wait_until

pytestmark = pytest.mark.real

COUNT = 12_000  # well above what both stacks and TCP absorb without flow control (~7k)
PAYLOAD = 4_000
QUEUE = 32_768  # TCP send_queue_size: bytes queued per connection before sending waits
HOLD = 4.0  # seconds the coordinator waits for a lost VIEW_ACK before answering a joiner

_Got = list[tuple[Address, bytes]]  # (source, payload) of each delivered message, in order


def _tcp_stack(*, probe: int, flow_control: bool = True, **tcp: Any) -> StackConfig:
    """The tcp preset in seed 003's mode (NAKACK2 ``xmit_interval = 0``: the preset itself
    retransmits) on ports of its own; TCPPING probes its first port and ``probe`` above.

    Without flow control (UFC, MFC) nothing above the transport holds a
    sender back, so a slow receiver is absorbed by its stack's channels and
    then by TCP itself. A member learns another's address when that one
    connects to it (discovery, a join): with ``probe=0`` only the first
    member's port is probed, so no probe hits a port nobody listens on.
    """
    base = free_ports(21)
    config = StackConfig.preset("tcp").configure("NAKACK2", xmit_interval=0)
    if not flow_control:
        config = config.remove("UFC").remove("MFC")
    config = config.configure("TCP", bind_port=base, port_range=20, **tcp)
    return config.configure("TCPPING", initial_hosts=[f"127.0.0.1[{base}]"], port_range=probe)


def _drops(channel: Channel) -> dict[str, Any]:
    """The TCP transport's drop counters: what it could not send, and what it threw away."""
    stats = channel.stack.protocol("TCP").stats()
    sent = {k: v for k, v in stats.items() if k.startswith("dropped_") and v}
    return {**sent, **{k: v for k, v in stats["decode_errors"].items() if v}}


async def _collect(channel: Channel, got: list[tuple[Address, bytes]]) -> None:
    async for msg in channel:
        got.append((msg.src, msg.payload))


def _from(member: Channel, got: list[tuple[Address, bytes]]) -> list[bytes]:
    return [payload for src, payload in got if src == member.address]


@asynccontextmanager
async def _a_and_b(
    cluster: str, config_a: StackConfig, config_b: StackConfig, got: dict[str, _Got]
) -> AsyncIterator[tuple[Channel, Channel, trio.Nursery]]:
    """A and B in one view, each collecting what it delivers into ``got``; and a nursery."""
    async with (
        open_channel(cluster, config_a, "A") as a,
        open_channel(cluster, config_b, "B") as b,
        trio.open_nursery() as nursery,
    ):
        await wait_until(lambda: len(a.view.members) >= 2 and len(b.view.members) >= 2, timeout=120)
        nursery.start_soon(_collect, a, got["A"])
        nursery.start_soon(_collect, b, got["B"])
        yield a, b, nursery


def _join_c(
    nursery: trio.Nursery, cluster: str, config: StackConfig, got: _Got, done: trio.Event
) -> list[Channel]:
    """Start C joining; the list holds C once it is a member, and C stays until ``done``."""
    joined: list[Channel] = []

    async def join() -> None:
        async with open_channel(cluster, config, "C") as c:
            joined.append(c)
            nursery.start_soon(_collect, c, got)
            await done.wait()

    nursery.start_soon(join)
    return joined


async def test_seed003_tcp_receive_path_never_drops_below_nakack2_xmit_interval_0() -> None:
    """Seed 003, thread pool: "The transport's thread pool must not drop messages".

    A multicasts COUNT messages while B's application reads nothing. B's
    stack fills (one batch per channel, a receive buffer of 16), its TCP
    receive path stops reading, the connection fills and A's sends wait.
    Once B reads again, every message arrives, in order, with no gap in
    NAKACK2's window, nothing asked for again, and no TCP drop counter above 0.
    """
    config = _tcp_stack(probe=0, flow_control=False, send_queue_size=QUEUE)
    cluster = f"s003-{uuid.uuid4().hex[:8]}"
    payloads = [b"%06d" % i + bytes(PAYLOAD - 6) for i in range(COUNT)]
    own: list[tuple[Address, bytes]] = []
    got: list[tuple[Address, bytes]] = []
    sent = 0
    with trio.fail_after(120):
        async with (
            open_channel(cluster, config, "A", channel_size=1) as a,
            open_channel(cluster, config, "B", channel_size=1, receive_buffer=16) as b,
        ):
            await wait_until(
                lambda: len(a.view.members) >= 2 and len(b.view.members) >= 2, timeout=120
            )
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
    assert len(got) == len(own) == COUNT and _from(a, got) == _from(a, own) == payloads
    (window,) = [w for m, w in nak_b["windows"].items() if m.startswith("A")]
    assert window["missing"] == 0 and window["size"] == 0
    assert nak_b["xmit_reqs_sent"] == 0 and not nak_b["xmit_task_running"]


def _view_ack_from(member: Address) -> Callable[[Message], bool]:
    def match(msg: Message) -> bool:
        hdr = msg.headers.get(ids.GMS)
        return msg.src == member and hdr is not None and hdr.type == VIEW_ACK

    return match


async def test_seed003_real_tcp_join_while_sending_delivers_all_70() -> None:
    """Seed 003, become_server_queue: C joins {A,B} while B sends 70, over real TCP.

    The tcp preset (NAKACK2 ``xmit_interval = 0``). B sends 1..100 and A
    delivers them, so the digest A hands C with the view {A,B,C} holds B at
    100. B sends 101..170 as soon as it has that view (as in the seed, it
    sends nothing while A takes the digest), and C is still a joiner then: A
    sends JOIN_RSP only once B acked the view, and a DISCARD above A's
    UNICAST3 loses that VIEW_ACK, so A waits view_ack_collection_timeout
    first and B's 70 wait in C's become_server_queue. Then B sends 171..200.
    C must deliver exactly 101..200 (what was sent after its digest), in
    order, none twice; A and B all 200.
    """
    base = _tcp_stack(probe=4).insert_above("UNICAST3", "DISCARD")  # probes: B learns C
    config_a = base.configure("GMS", view_ack_collection_timeout=HOLD)
    config_c = base.configure("GMS", join_timeout=2 * HOLD)  # no second JOIN_REQ meanwhile
    cluster = f"s003j-{uuid.uuid4().hex[:8]}"
    sent = [f"b{i}".encode() for i in range(1, 201)]
    got: dict[str, _Got] = {"A": [], "B": [], "C": []}
    with trio.fail_after(90):
        async with _a_and_b(cluster, config_a, base, got) as (a, b, nursery):
            for payload in sent[:100]:
                await b.send(payload)
            # A's digest will hold B at 100
            await wait_until(lambda: len(_from(b, got["A"])) >= 100, timeout=90, interval=0.01)
            discard = a.stack.protocol("DISCARD")
            assert isinstance(discard, Discard)
            discard.drop_if(_view_ack_from(b.address), direction="up")
            done = trio.Event()
            joined = _join_c(nursery, cluster, config_c, got["C"], done)
            await wait_until(lambda: len(b.view.members) >= 3, timeout=90, interval=0.01)
            for payload in sent[100:170]:  # the seed's 70, sent while C joins
                await b.send(payload)
            await wait_until(lambda: joined, timeout=90, interval=0.01)
            (c,) = joined
            for payload in sent[170:]:
                await b.send(payload)
            with trio.move_on_after(30):  # a gap at C would hold everything after it
                while any(len(got[m]) < n for m, n in (("A", 200), ("B", 200), ("C", 100))):
                    await trio.sleep(0.05)
            await trio.sleep(0.5)  # a message delivered twice would show up meanwhile
            nak_c = c.stack.protocol("NAKACK2").stats()
            held = discard.stats()["dropped_up"]
            done.set()
            nursery.cancel_scope.cancel()
    assert _from(b, got["C"]) == sent[100:]
    assert [src for src, _ in got["C"]] == [b.address] * 100  # nothing from anyone else
    assert _from(b, got["A"]) == _from(b, got["B"]) == sent
    assert nak_c["become_server_queue_dropped"] == 0 and nak_c["xmit_reqs_sent"] == 0
    assert held == 1  # B's VIEW_ACK: A answered C only after view_ack_collection_timeout


async def test_seed003_real_tcp_join_while_a_non_coordinator_sends_without_pause() -> None:
    """VIEW_SEQNO over real TCP: C joins {A,B} while B multicasts every millisecond.

    The coordinator A takes C's digest before B installs {A,B,C}; what B
    sends until then goes to A only. Without VIEW_SEQNO, C's window for B
    waits for those seqnos for ever and C delivers nothing more from B (seen
    in most runs of this test before the fix). With it, C delivers B's
    messages from some point on with nothing missing, in order, none twice,
    up to B's last one.
    """
    config = _tcp_stack(probe=4)
    cluster = f"s003r-{uuid.uuid4().hex[:8]}"
    got: dict[str, _Got] = {"A": [], "B": [], "C": []}
    with trio.fail_after(90):
        async with _a_and_b(cluster, config, config, got) as (_, b, nursery):
            done = trio.Event()
            joined = _join_c(nursery, cluster, config, got["C"], done)
            sent = 0
            while not joined:
                sent += 1
                await b.send(f"b{sent}".encode())
                await trio.sleep(0.001)
            for _ in range(30):
                sent += 1
                await b.send(f"b{sent}".encode())
            last = f"b{sent}".encode()
            with trio.move_on_after(30):  # a gap at C would hold everything after it
                while not got["C"] or got["C"][-1][1] != last:
                    await trio.sleep(0.05)
            await trio.sleep(0.5)  # a message delivered twice would show up meanwhile
            window = joined[0].stack.protocol("NAKACK2").stats()["windows"]["B"]
            done.set()
            nursery.cancel_scope.cancel()
    from_b = [int(p[1:]) for p in _from(b, got["C"])]
    assert from_b and from_b[-1] == sent, f"C got {len(from_b)} from B, window {window}"
    assert from_b == list(range(from_b[0], sent + 1))  # from its start on: all, in order, once
    assert window["missing"] == 0 and window["size"] == 0
    assert [int(p[1:]) for p in _from(b, got["A"])] == list(range(1, sent + 1))
