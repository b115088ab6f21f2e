"""The stack host: layers as supervised actors joined by bounded batch channels."""

from __future__ import annotations

import math
import socket
from typing import Any

import pytest
import trio

from triogroups import Address, Message, RestartIntensityExceeded, Stack, StackConfig, View
from triogroups.extend import Protocol, ViewChange
from triogroups.properties import Duration
from triogroups.testing import wait_until
from triogroups.transports.sim import open_sim_network


class _Crasher(Protocol):
    """Raises when a message with payload b"boom" goes down."""

    name = "TEST_CRASHER"

    def down(self, batch: list[Message], now: float) -> None:
        if any(m.payload == b"boom" for m in batch):
            raise RuntimeError("crasher was told to crash")
        self.send_down(batch)


class _Gate(Protocol):
    """Holds messages going down until a message with payload b"open" comes up."""

    name = "TEST_GATE"

    def __init__(self, **props: Any) -> None:
        super().__init__(**props)
        self.held: list[Message] = []
        self.closed = True

    def down(self, batch: list[Message], now: float) -> None:
        if self.closed:
            self.held.extend(batch)
        else:
            self.send_down(batch)

    def up(self, batch: list[Message], now: float) -> None:
        if any(m.payload == b"open" for m in batch):
            self.closed = False
            self.send_down(self.held)
            self.held = []
        self.send_up(batch)

    def blocks_down(self) -> bool:
        return len(self.held) >= 3

    def view_changed(self, view: Any, now: float) -> None:
        """A view opens the gate too: like MCAST dropping a member that never acks."""
        self.closed = False
        self.send_down(self.held)
        self.held = []


class _Ticker(Protocol):
    """Ticks every 0.25 s and records when."""

    name = "TEST_TICKER"

    def __init__(self, **props: Any) -> None:
        super().__init__(**props)
        self.ticks: list[float] = []
        self._next = math.inf

    def start(self, local_address: Any, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self._next = now + 0.25

    def tick(self, now: float) -> None:
        self.ticks.append(now)
        self._next = now + 0.25

    def next_deadline(self) -> float:
        return self._next


async def _receive_payloads(stack: Stack, count: int) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < count:
        item = await stack.receive()
        if isinstance(item, list):
            got.extend(m.payload for m in item)
    return got


async def test_eight_layer_stack_delivers_unicasts_to_self_in_order(autojump_clock: Any) -> None:
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        cfg = StackConfig.of(("SIM", {"network": net.name}), *["PASS"] * 8)
        stack = Stack(cfg, "c", "A", channel_size=2)
        await nursery.start(stack.run)
        payloads = [str(i).encode() for i in range(500)]
        async with trio.open_nursery() as senders:

            async def send() -> None:
                for i in range(0, 500, 7):
                    await stack.send([Message(stack.address, p) for p in payloads[i : i + 7]])

            senders.start_soon(send)
            assert await _receive_payloads(stack, 500) == payloads
        layer_stats = stack.stats()["layers"]
        assert [entry["protocol"] for entry in layer_stats] == ["SIM"] + ["PASS"] * 8
        assert all(entry["stats"]["msgs_down"] == 500 for entry in layer_stats[1:])
        nursery.cancel_scope.cancel()


async def test_two_stacks_exchange_unicasts_and_multicasts(autojump_clock: Any) -> None:
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        cfg = StackConfig.of(("SIM", {"network": net.name}), "PASS")
        a, b = Stack(cfg, "c", "A"), Stack(cfg, "c", "B")
        await nursery.start(a.run)
        await nursery.start(b.run)
        await a.send([Message(b.address, b"to-b"), Message(None, b"to-all")])
        assert sorted(await _receive_payloads(b, 2)) == [b"to-all", b"to-b"]
        assert await _receive_payloads(a, 1) == [b"to-all"]  # own multicast loops back once
        nursery.cancel_scope.cancel()


async def test_crashing_layer_restarts_the_whole_stack_as_a_new_incarnation(
    autojump_clock: Any,
) -> None:
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        cfg = StackConfig.of(("SIM", {"network": net.name}), "PASS", "TEST_CRASHER")
        stack = Stack(cfg, "c", "A")
        seen: list[int] = []
        stack.on_incarnation(lambda s: seen.append(s.incarnation))
        await nursery.start(stack.run)
        first = stack.address
        old_pass = stack.protocol("PASS")
        await stack.send([Message(None, b"boom")])
        await wait_until(lambda: stack.incarnation >= 2, timeout=10, interval=0.01)
        assert stack.address != first and stack.address.name == "A"
        assert stack.protocol("PASS") is not old_pass
        assert seen == [1, 2]
        report = stack.crash_reports[0]
        assert isinstance(report.exception, RuntimeError)
        assert "TEST_CRASHER" in report.actor
        assert "crasher was told to crash" in report.traceback and "in down" in report.traceback
        await stack.send([Message(stack.address, b"after")])
        assert await _receive_payloads(stack, 1) == [b"after"]
        assert stack.stats()["incarnation"] == 2 and stack.stats()["restarts"] == 1
        nursery.cancel_scope.cancel()


async def test_repeated_crashes_beyond_the_intensity_escalate(autojump_clock: Any) -> None:
    async with open_sim_network() as net:
        cfg = StackConfig.of(("SIM", {"network": net.name}), "TEST_CRASHER")
        stack = Stack(cfg, "c", "A", max_restarts=2, restart_window=60)
        with pytest.raises(ExceptionGroup) as info:
            async with trio.open_nursery() as nursery:
                await nursery.start(stack.run)
                for _ in range(5):
                    await stack.send([Message(None, b"boom")])
                    await trio.sleep(1)
        assert info.group_contains(RestartIntensityExceeded, depth=1)
        assert len(stack.crash_reports) == 3


async def test_a_transport_that_cannot_open_after_a_restart_is_an_ordinary_crash() -> None:
    """Issue 12 item 8: only the first incarnation's start-up error is final. Once the stack
    was up, a port taken while it restarts may be free again a moment later, so the new
    incarnation's OSError is retried like any crash until the intensity runs out."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = StackConfig.of(("TCP", {"bind_port": port, "port_range": 0}), "TEST_CRASHER")
    stack = Stack(config, "c", "A", max_restarts=2, restart_window=60)
    squatter = socket.socket()

    def take_the_port(s: Stack) -> None:
        if s.incarnation == 2:  # the old listener is closed, the new one not yet bound
            squatter.bind(("127.0.0.1", port))
            squatter.listen()

    stack.on_incarnation(take_the_port)
    with squatter, trio.fail_after(30), pytest.raises(ExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            await nursery.start(stack.run)
            await stack.send([Message(None, b"boom")])
    assert info.group_contains(RestartIntensityExceeded, depth=1)
    crashes = [type(r.exception) for r in stack.crash_reports]
    assert crashes == [RuntimeError, OSError, OSError]


async def test_blocked_layer_parks_senders_but_keeps_handling_traffic_from_below(
    autojump_clock: Any,
) -> None:
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        cfg = StackConfig.of(("SIM", {"network": net.name}), "TEST_GATE")
        a = Stack(cfg, "c", "A", channel_size=1)
        b = Stack(StackConfig.of(("SIM", {"network": net.name}), "PASS"), "c", "B")
        await nursery.start(a.run)
        await nursery.start(b.run)
        sent: list[int] = []

        async def sender() -> None:
            for i in range(10):
                await a.send([Message(b.address, str(i).encode())])
                sent.append(i)

        nursery.start_soon(sender)
        await trio.sleep(5)
        gate = a.protocol("TEST_GATE")
        assert gate.blocks_down()
        assert len(sent) < 10  # the sender is parked, not dropping
        await b.send([Message(a.address, b"open")])  # traffic from below is still handled
        got = await _receive_payloads(b, 10)
        assert got == [str(i).encode() for i in range(10)]
        nursery.cancel_scope.cancel()


async def test_timer_ticks_at_the_protocols_deadlines(autojump_clock: Any) -> None:
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        stack = Stack(StackConfig.of(("SIM", {"network": net.name}), "TEST_TICKER"), "c", "A")
        start = trio.current_time()
        await nursery.start(stack.run)
        await trio.sleep(1.01)
        ticks = stack.protocol("TEST_TICKER").ticks
        assert [round(t - start, 6) for t in ticks] == [0.25, 0.5, 0.75, 1.0]
        nursery.cancel_scope.cancel()


async def test_events_travel_down_in_order_with_batches(autojump_clock: Any) -> None:
    from triogroups import View

    async with open_sim_network() as net, trio.open_nursery() as nursery:
        stack = Stack(StackConfig.of(("SIM", {"network": net.name}), "PASS", "PASS"), "c", "A")
        await nursery.start(stack.run)
        view = View.create(stack.address, 1, [stack.address])
        await stack.send(ViewChange(view))
        await stack.send([Message(stack.address, b"x")])
        await _receive_payloads(stack, 1)
        assert all(p.view == view for p in stack.protocols)
        nursery.cancel_scope.cancel()


def test_stack_refuses_a_bad_config_before_running() -> None:
    from triogroups import PropertyError

    with pytest.raises(PropertyError, match="PASS has no property 'x'"):
        Stack(StackConfig.of("SIM", ("PASS", {"x": 1})), "c")


def test_stack_address_before_run_is_a_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        _ = Stack(StackConfig.of("SIM"), "c").address


class _Interval(Protocol):
    """Ticks every ``every`` seconds; a run-time change restarts the interval."""

    name = "TEST_INTERVAL"
    every = Duration(10.0, doc="tick interval")

    def __init__(self, **props: Any) -> None:
        super().__init__(**props)
        self.ticks: list[float] = []
        self._next = math.inf

    def start(self, local_address: Any, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self._next = now + self.every

    def property_changed(self, key: str, now: float) -> None:
        self._next = now + self.every

    def tick(self, now: float) -> None:
        self.ticks.append(now)
        self._next = now + self.every

    def next_deadline(self) -> float:
        return self._next


async def test_set_property_at_run_time_rearms_the_layer_timer_at_once(
    autojump_clock: Any,
) -> None:
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        stack = Stack(StackConfig.of(("SIM", {"network": net.name}), "TEST_INTERVAL"), "c", "A")
        start = trio.current_time()
        await nursery.start(stack.run)
        await trio.sleep(0.5)
        await stack.set_property("TEST_INTERVAL", "every", 1.0)
        await trio.sleep(2.6)
        ticks = stack.protocol("TEST_INTERVAL").ticks
        assert [round(t - start, 6) for t in ticks] == [1.5, 2.5]
        with pytest.raises(KeyError, match="no protocol 'NOPE'"):
            await stack.set_property("NOPE", "x", 1)
        nursery.cancel_scope.cancel()


async def test_parked_senders_wake_when_an_unblocking_batch_follows_a_blocking_one(
    autojump_clock: Any,
) -> None:
    """Traffic from below that leaves the layer blocked must not lose the wake-up
    for the later batch that unblocks it (the up loop never touches the parking flag)."""

    async with open_sim_network() as net, trio.open_nursery() as nursery:
        cfg = StackConfig.of(("SIM", {"network": net.name}), "TEST_GATE")
        a = Stack(cfg, "c", "A", channel_size=1)
        b = Stack(StackConfig.of(("SIM", {"network": net.name}), "PASS"), "c", "B")
        await nursery.start(a.run)
        await nursery.start(b.run)
        sent: list[int] = []

        async def sender() -> None:
            for i in range(10):
                await a.send([Message(b.address, str(i).encode())])
                sent.append(i)

        async def drain_a() -> None:
            async for _ in a.deliveries:
                pass

        nursery.start_soon(drain_a)
        nursery.start_soon(sender)
        await trio.sleep(5)
        await b.send([Message(a.address, b"not yet")])  # handled while still blocked
        await trio.sleep(1)
        assert len(sent) < 10
        await b.send([Message(a.address, b"open")])
        await wait_until(lambda: len(sent) >= 10, timeout=10, interval=0.1)
        nursery.cancel_scope.cancel()


async def test_a_view_change_reaches_a_blocking_layer_while_senders_wait_at_the_top(
    autojump_clock: Any,
) -> None:
    """Layers never park: batches wait in `Stack.send`, events pass, so a view from
    above can release a blocked window (MCAST dropping a silent member); several
    waiting senders then go on in the order they came."""

    async with open_sim_network() as net, trio.open_nursery() as nursery:
        cfg = StackConfig.of(("SIM", {"network": net.name}), "TEST_GATE")
        a = Stack(cfg, "c", "A", channel_size=1)
        b = Stack(StackConfig.of(("SIM", {"network": net.name}), "PASS"), "c", "B")
        await nursery.start(a.run)
        await nursery.start(b.run)
        order: list[str] = []

        async def sender(name: str) -> None:
            for i in range(5):
                await a.send([Message(b.address, f"{name}{i}".encode())])
                order.append(f"{name}{i}")

        nursery.start_soon(sender, "x")
        await trio.sleep(1)
        assert a.protocol("TEST_GATE").blocks_down()
        nursery.start_soon(sender, "y")
        await trio.sleep(1)
        assert len(order) < 10
        with pytest.raises(trio.WouldBlock):
            a.send_nowait([Message(b.address, b"z")])
        view = View.create(a.address, 2, [a.address, Address.random("C")])
        with trio.fail_after(1):
            await a.send(ViewChange(view))  # an event never waits at the gate
        got = await _receive_payloads(b, 10)
        assert sorted(got) == sorted(p.encode() for p in order) and len(order) == 10
        assert [p for p in got if p.startswith(b"x")] == [f"x{i}".encode() for i in range(5)]
        assert [p for p in got if p.startswith(b"y")] == [f"y{i}".encode() for i in range(5)]
        nursery.cancel_scope.cancel()


class _StartFirst(Protocol):
    """Sets its first deadline in `start` and has none before (as the README's Heartbeat)."""

    name = "TEST_START_FIRST"

    def start(self, local_address: Any, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self._next = now + 0.5
        self.ticks: list[float] = []

    def next_deadline(self) -> float:
        return self._next

    def tick(self, now: float) -> None:
        self.ticks.append(now)
        self._next = now + 0.5


async def test_host_starts_a_protocol_before_asking_its_deadline(autojump_clock: Any) -> None:
    """`Protocol.start` runs before any other handler, `next_deadline` included."""
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        stack = Stack(StackConfig.of(("SIM", {"network": net.name}), "TEST_START_FIRST"), "c")
        start = trio.current_time()
        await nursery.start(stack.run)
        await trio.sleep(1.01)
        ticks = stack.protocol("TEST_START_FIRST").ticks
        assert [round(t - start, 6) for t in ticks] == [0.5, 1.0]
        nursery.cancel_scope.cancel()
