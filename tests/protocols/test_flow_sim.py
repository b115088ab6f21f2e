"""UFC and MFC on the simulated network: slow receivers, lost credits, views that release.

The receivers here are stacks whose application stops reading: the top
channel is bounded, so an unread stack stops consuming, stops counting and
stops replenishing, which is exactly a slow receiver.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Address, Flag, Message, Stack, StackConfig, View
from triogroups.extend import Discard, Protocol, ViewChange
from triogroups.protocols import ids
from triogroups.testing import DeliveryLog, open_cluster, wait_until
from triogroups.transports.sim import open_sim_network

_INSTALL = b"<install the planned view>"
_CREDITS = {"max_credits": 10_000, "min_threshold": 0.4, "max_block_time": 0.5}
#: Bytes that may wait in a flow-control layer: what was in flight between the application
#: and the layer when it blocked (the top channel's 16 items of one 1000-byte message, twice).
_IN_FLIGHT = 2 * 16 * 1000


#: Virtual seconds a scenario may take: a stuck stack fails the test instead of hanging it.
_GUARD = 120


class _ViewFromBelow(Protocol):
    """Stands in for GMS, which sits below UFC/MFC: a marked message becomes a view going up."""

    name = "TEST_VIEW_FROM_BELOW"

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.planned: View | None = None

    def up(self, batch: list[Message], now: float) -> None:
        keep: list[Message] = []
        for msg in batch:
            if msg.payload == _INSTALL and self.planned is not None:
                self.send_up(keep)
                keep = []
                self.pass_up(ViewChange(self.planned))
            else:
                keep.append(msg)
        self.send_up(keep)


@dataclass
class _Node:
    """A member whose application reads only while ``reading`` is set."""

    stack: Stack
    got: list[Message] = field(default_factory=list)
    reading: trio.Event = field(default_factory=trio.Event)
    delay: float = 0.0
    log: DeliveryLog | None = None

    @property
    def address(self) -> Address:
        return self.stack.address

    def pause(self) -> None:
        self.reading = trio.Event()

    def resume(self) -> None:
        self.reading.set()

    def stats(self, name: str) -> dict[str, Any]:
        return self.stack.protocol(name).stats()

    async def read(self) -> None:
        while True:
            await self.reading.wait()
            item = await self.stack.receive()
            if isinstance(item, list):
                self.got.extend(item)
                if self.log is not None:
                    for msg in item:
                        assert msg.src is not None
                        self.log.record_delivery(self.address, msg.src, msg.payload)
            if self.delay:
                await trio.sleep(self.delay)


@asynccontextmanager
async def _members(
    names: str, *layers: tuple[str, dict[str, Any]], seed: int = 0
) -> AsyncIterator[list[_Node]]:
    """Stacks on a lossless (TCP-like) simulated network, one view with all of them."""
    async with open_sim_network(seed=seed) as net, trio.open_nursery() as nursery:
        sim = ("SIM", {"network": net.name, "lossless": True})
        cfg = StackConfig.of(sim, "DISCARD", "TEST_VIEW_FROM_BELOW", *layers)
        rng = random.Random(seed)
        nodes = []
        for name in names:
            stack = Stack(cfg, "fc", name, new_address=lambda n: Address(rng.getrandbits(128), n))
            await nursery.start(stack.run)
            node = _Node(stack)
            node.resume()
            nursery.start_soon(node.read)
            nodes.append(node)
        view = View.create(nodes[0].address, 1, [n.address for n in nodes])
        for node in nodes:
            await node.stack.send(ViewChange(view))
        yield nodes
        nursery.cancel_scope.cancel()


def _discard(node: _Node) -> Discard:
    layer = node.stack.protocol("DISCARD")
    assert isinstance(layer, Discard)
    return layer


def _payload(i: int, size: int = 1000) -> bytes:
    return f"{i:05d}".encode().ljust(size, b".")


async def _install_from_below(at: _Node, via: _Node, members: list[_Node]) -> None:
    """The view ``members`` reaches ``at`` from below, as GMS would deliver it."""
    layer = at.stack.protocol("TEST_VIEW_FROM_BELOW")
    assert isinstance(layer, _ViewFromBelow)
    layer.planned = View.create(members[0].address, 2, [m.address for m in members])
    await via.stack.send([Message(at.address, _INSTALL, flags=Flag.NO_FC)])


async def test_ufc_slow_receiver_throttles_the_sender_and_keeps_its_memory_bounded(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(_GUARD):
        async with _members("AB", ("UFC", _CREDITS)) as (a, b), trio.open_nursery() as nursery:
            b.pause()
            sent = 0

            async def sender() -> None:
                nonlocal sent
                for i in range(1000):
                    await a.stack.send([Message(b.address, _payload(i))])
                    sent += 1

            nursery.start_soon(sender)
            await trio.sleep(5)
            sa, sb = a.stats("UFC"), b.stats("UFC")
            assert a.stack.protocol("UFC").blocks_down() and sent < 400
            # What A sent and B has not yet counted never exceeds the credits; B's stack stops
            # counting once its top channel is full, so A is held from then on.
            assert sa["bytes_sent"] - sb["bytes_received"] <= _CREDITS["max_credits"]
            assert sa["queued_bytes"] <= _IN_FLIGHT  # at most what was in flight above UFC
            assert sa["credit_requests_sent"] >= 1 and sa["sender_credits"][str(b.address)] < 1000
            await trio.sleep(5)
            assert a.stats("UFC")["bytes_sent"] == sa["bytes_sent"]  # still held while B is stuck
            b.resume()
            await wait_until(lambda: len(b.got) == 1000, timeout=30)
            assert [m.payload for m in b.got] == [_payload(i) for i in range(1000)]
            assert sent == 1000 and not a.stack.protocol("UFC").blocks_down()
            assert b.stats("UFC")["credit_requests_received"] >= 1
            nursery.cancel_scope.cancel()


async def test_mfc_slow_member_throttles_multicasts_to_everyone(autojump_clock: Any) -> None:
    with trio.fail_after(_GUARD):
        async with _members("ABC", ("MFC", _CREDITS)) as (a, b, c), trio.open_nursery() as nursery:
            c.pause()

            async def sender() -> None:
                for i in range(600):
                    await a.stack.send([Message(None, _payload(i))])

            nursery.start_soon(sender)
            await trio.sleep(5)
            sa = a.stats("MFC")
            assert a.stack.protocol("MFC").blocks_down() and sa["queued_bytes"] <= _IN_FLIGHT
            slow_counted = c.stats("MFC")["bytes_received"]
            assert sa["bytes_sent"] - slow_counted <= _CREDITS["max_credits"]
            got = len(b.got)  # the fast member gets only what the slow one's credits allow
            assert got * 1000 <= slow_counted + _CREDITS["max_credits"] and got < 400
            await trio.sleep(5)
            assert len(b.got) == got
            c.resume()
            await wait_until(lambda: len(c.got) == 600 and len(b.got) == 600, timeout=30)
            assert [m.payload for m in b.got] == [m.payload for m in c.got]
            nursery.cancel_scope.cancel()


async def test_ufc_view_change_that_removes_the_slow_member_releases_the_blocked_sender(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(_GUARD):
        async with _members("ABC", ("UFC", _CREDITS)) as (a, b, c), trio.open_nursery() as nursery:
            b.pause()
            done = trio.Event()

            async def sender() -> None:
                for i in range(1000):
                    await a.stack.send([Message(b.address, _payload(i))])
                done.set()

            nursery.start_soon(sender)
            await trio.sleep(3)
            assert a.stack.protocol("UFC").blocks_down() and not done.is_set()
            await _install_from_below(a, c, [a, c])
            with trio.fail_after(5):
                await done.wait()
            assert not a.stack.protocol("UFC").blocks_down()
            assert str(b.address) not in a.stats("UFC")["sender_credits"]
            nursery.cancel_scope.cancel()


async def test_mfc_view_change_that_removes_the_slow_member_releases_the_blocked_sender(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(_GUARD):
        async with _members("ABC", ("MFC", _CREDITS)) as (a, b, c), trio.open_nursery() as nursery:
            c.pause()
            done = trio.Event()

            async def sender() -> None:
                for i in range(1000):
                    await a.stack.send([Message(None, _payload(i))])
                done.set()

            nursery.start_soon(sender)
            await trio.sleep(3)
            assert a.stack.protocol("MFC").blocks_down() and not done.is_set()
            await _install_from_below(a, b, [a, b])
            with trio.fail_after(5):
                await done.wait()
            await wait_until(lambda: len(b.got) == 1000, timeout=30)
            assert [m.payload for m in b.got] == [_payload(i) for i in range(1000)]
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("fc", ["UFC", "MFC"])
async def test_flow_send_blocked_on_credits_returns_once_its_member_left(
    autojump_clock: Any, fc: str
) -> None:
    """C never replenishes, so B's sends block on credits; B leaves the group (GMS,
    below the flow control). Its blocked sends never returned: nobody grants credits to
    a member that left. Now the leave releases what waited, and every send returns."""
    stack = StackConfig.of(
        "SIM", "PING", "NAKACK2", "UNICAST3", "GMS", "DISCARD", (fc, {"max_credits": 1000})
    )
    pid = getattr(ids, fc)
    with trio.fail_after(_GUARD):
        async with open_cluster(3, stack, seed=348) as cluster, trio.open_nursery() as nursery:
            _, b, c = cluster.members
            c.protocol("DISCARD").drop_if(lambda m: pid in m.headers, count=None)
            to = c.address if fc == "UFC" else None
            returned = 0

            async def sender() -> None:
                nonlocal returned
                for _ in range(30):
                    await b.send(b"x" * 100, to=to, wait_accepted=True)
                    returned += 1

            nursery.start_soon(sender)
            await trio.sleep(3)
            assert returned < 30 and b.protocol(fc).blocks_down()
            await b.disconnect()
            await wait_until(
                lambda: returned >= 30 and not b.stack.sends_pending(), timeout=2, interval=0.01
            )
            assert b.left and not b.protocol(fc).blocks_down()
            assert b.protocol(fc).stats()["released_at_leave"] > 0
            nursery.cancel_scope.cancel()


async def test_ufc_credit_request_recovers_from_a_lost_replenish(autojump_clock: Any) -> None:
    """CREDIT_REQUEST: a sender blocked longer than max_block_time asks for credits."""
    with trio.fail_after(_GUARD):
        async with _members("AB", ("UFC", _CREDITS)) as (a, b):
            _discard(b).drop_if(lambda m: ids.UFC in m.headers, count=1)
            start = trio.current_time()
            for i in range(30):
                await a.stack.send([Message(b.address, _payload(i))])
            await wait_until(lambda: len(b.got) == 30, timeout=30)
            sa, sb = a.stats("UFC"), b.stats("UFC")
            assert sa["credit_requests_sent"] >= 1 and sb["credit_requests_received"] >= 1
            assert sa["blockings"] >= 1 and sa["time_blocked"] >= _CREDITS["max_block_time"]
            assert trio.current_time() - start < 5


async def test_ufc_dont_block_messages_are_dropped_while_credits_are_exhausted(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(_GUARD):
        async with _members("AB", ("UFC", _CREDITS)) as (a, b):
            _discard(b).drop_if(lambda m: ids.UFC in m.headers, count=None)
            await a.stack.send([Message(b.address, _payload(i)) for i in range(10)])
            await trio.sleep(1)
            assert a.stats("UFC")["sender_credits"][str(b.address)] == 0
            extra = [Message(b.address, _payload(100 + i), flags=Flag.DONT_BLOCK) for i in range(5)]
            await a.stack.send(extra)
            await trio.sleep(1)
            assert a.stats("UFC")["dont_block_drops"] == 5
            assert not a.stack.protocol("UFC").blocks_down()  # dropped, not queued
            assert [m.payload for m in b.got] == [_payload(i) for i in range(10)]


@dataclass
class _Plan:
    members: int
    seed: int
    max_credits: int
    min_threshold: float
    sends: list[list[tuple[int, int, int]]]  # per member: (dest index or -1, size, flags)
    delays: list[float]
    stall: tuple[int, float, float] | None  # member, start, length


_FLAGS = st.sampled_from([0, 0, int(Flag.OOB), int(Flag.NO_FC)])
_plans = st.builds(
    _Plan,
    members=st.integers(3, 4),
    seed=st.integers(0, 2**16),
    max_credits=st.integers(1_000, 8_000),
    min_threshold=st.floats(0.05, 0.95),
    sends=st.lists(
        st.lists(st.tuples(st.integers(-1, 3), st.integers(0, 3_000), _FLAGS), max_size=40),
        min_size=4,
        max_size=4,
    ),
    delays=st.lists(st.sampled_from([0.0, 0.001, 0.01, 0.05, 0.1]), min_size=4, max_size=4),
    stall=st.none() | st.tuples(st.integers(0, 3), st.floats(0, 0.5), st.floats(0.1, 2.0)),
)


def _check_credits(node: _Node, max_credits: int) -> None:
    for name in ("UFC", "MFC"):
        stats = node.stats(name)
        assert all(0 <= c <= max_credits for c in stats["sender_credits"].values()), stats
        assert stats["queued_bytes"] <= 2 * 16 * 3_000, stats["queued_bytes"]


async def _run_plan(plan: _Plan) -> None:
    props = {"max_credits": plan.max_credits, "min_threshold": plan.min_threshold}
    layers = (("UFC", {**props, "max_block_time": 0.1}), ("MFC", {**props, "max_block_time": 0.1}))
    log = DeliveryLog()
    async with _members("ABCD"[: plan.members], *layers, seed=plan.seed) as nodes:
        for node, delay in zip(nodes, plan.delays, strict=False):
            node.log, node.delay = log, delay

        async def sender(node: _Node, sends: list[tuple[int, int, int]]) -> None:
            for i, (dest_index, size, flags) in enumerate(sends):
                dest = None if dest_index < 0 else nodes[dest_index % len(nodes)].address
                payload = f"{node.stack.name}{i}:".encode().ljust(size, b".")
                log.record_send(node.address, dest, payload, bool(flags & Flag.OOB))
                await node.stack.send([Message(dest, payload, flags=flags)])

        async def stall(node: _Node, start: float, length: float) -> None:
            await trio.sleep(start)
            node.pause()
            await trio.sleep(length)
            node.resume()

        async def watch(cancel: trio.CancelScope) -> None:
            with cancel:
                while True:
                    for node in nodes:
                        _check_credits(node, plan.max_credits)
                    await trio.sleep(0.01)

        watcher = trio.CancelScope()
        with trio.fail_after(300):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch, watcher)
                if plan.stall is not None:
                    index, start, length = plan.stall
                    nursery.start_soon(stall, nodes[index % len(nodes)], start, length)
                async with trio.open_nursery() as senders:
                    for node, sends in zip(nodes, plan.sends, strict=False):
                        senders.start_soon(sender, node, sends)
                addresses = [n.address for n in nodes]
                while True:
                    try:
                        log.check(addresses, addresses)
                        break
                    except AssertionError:
                        await trio.sleep(0.05)
                watcher.cancel()


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_plans)
def test_flow_control_keeps_the_delivery_contract_and_bounded_credits(plan: _Plan) -> None:
    """UFC + MFC with random sizes, OOB and NO_FC, slow and stalled readers.

    Every message is delivered exactly once and per-sender in order; sender
    credits stay within [0, max_credits] and a blocked layer holds no more
    than what was in flight above it.
    """
    trio.run(_run_plan, plan, clock=trio.testing.MockClock(autojump_threshold=0))
