"""Busy polling: the poller keeps Trio polling without blocking for its window, then parks;
the UDP and TCP transports arm it on every send and receive (``busy_poll``)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel

from triogroups import Message, StackConfig
from triogroups.events import AddPhysicalAddress
from triogroups.properties import PropertyError
from triogroups.testing import wait_until
from triogroups.transports import TcpTransport, UdpTransport
from triogroups.transports._busy_poll import BusyPoller

#: A window long enough for a loaded machine to take many run-loop passes in it.
WINDOW = 0.05


class _IoWaits(trio.abc.Instrument):
    """Records every I/O wait of the run loop: its timeout (0: a poll that cannot block)
    and whether ``poller`` was spinning then."""

    def __init__(self, poller: BusyPoller) -> None:
        self.poller = poller
        self.waits: list[tuple[float, bool]] = []

    def before_io_wait(self, timeout: float) -> None:
        self.waits.append((timeout, self.poller.spinning))


async def test_an_armed_poller_keeps_the_run_loop_from_blocking_until_its_window_ends() -> None:
    poller = BusyPoller(WINDOW)
    waits = _IoWaits(poller)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(poller.run)
        await trio.testing.wait_all_tasks_blocked()
        assert not poller.spinning and poller.windows == 0
        trio.lowlevel.add_instrument(waits)
        try:
            poller.arm()
            assert poller.spinning
            await wait_until(lambda: not poller.spinning, timeout=20, interval=0.01)
            await trio.sleep(0.02)  # nothing runnable now: the loop must sleep in its wait
        finally:
            trio.lowlevel.remove_instrument(waits)
        nursery.cancel_scope.cancel()
    spinning = [timeout for timeout, spun in waits.waits if spun]
    assert spinning and set(spinning) == {0}  # every pass while armed polled, none slept
    assert any(timeout > 0 for timeout, spun in waits.waits if not spun)  # then it slept again
    assert poller.windows == 1 and poller.seconds > 0


async def test_arming_while_spinning_extends_the_window_without_starting_another() -> None:
    poller = BusyPoller(1.0)  # far longer than the pauses below, even on a loaded machine
    async with trio.open_nursery() as nursery:
        nursery.start_soon(poller.run)
        poller.arm()
        for _ in range(5):
            await trio.sleep(0.01)
            assert poller.spinning
            poller.arm()
        await wait_until(lambda: not poller.spinning, timeout=20, interval=0.01)
        assert poller.windows == 1
        poller.arm()  # parked: a new window
        await wait_until(
            lambda: poller.windows == 2 and not poller.spinning, timeout=20, interval=0.01
        )
        nursery.cancel_scope.cancel()


async def test_a_spinning_poller_stops_at_once_when_its_nursery_is_cancelled() -> None:
    poller = BusyPoller(60.0)  # a window no test would wait out
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poller.run)
            poller.arm()
            await trio.sleep(0.01)
            assert poller.spinning
            nursery.cancel_scope.cancel()


def test_a_poller_window_is_never_negative_and_zero_is_off() -> None:
    with pytest.raises(ValueError, match="busy-poll window must be >= 0 s, got -1"):
        BusyPoller(-1)
    assert not BusyPoller(0.0).on and BusyPoller(0.001).on


@pytest.mark.parametrize("transport", ["UDP", "TCP"])
def test_busy_poll_is_off_by_default_and_takes_microseconds(transport: str) -> None:
    config = StackConfig.preset(transport.lower())
    assert config.build()[0].busy_poll == 0.0
    built = config.configure(transport, busy_poll="200us").build()[0]
    assert built.busy_poll == 0.0002


@pytest.mark.parametrize("cls", [UdpTransport, TcpTransport])
@pytest.mark.parametrize("value", [-0.001, 0.5, "1s"])
def test_busy_poll_out_of_range_names_the_property(cls: Any, value: object) -> None:
    with pytest.raises(PropertyError, match=rf"{cls.name}.busy_poll must be in \[0, 100ms\], got"):
        cls(busy_poll=value)


def _polled(endpoint: Any) -> dict[str, Any]:
    return endpoint.transport.stats()["busy_poll"]  # type: ignore[no-any-return]


async def _polls_after_send_and_receive(a: Any, b: Any, *, loops_back: bool) -> None:
    """``a`` busy-polls (``b`` does not): a window after it sends, another after it
    receives, and it parks after each."""
    assert "busy_poll" not in b.transport.stats()  # off: no entry
    assert _polled(a) == {"windows": 0, "seconds": 0.0, "spinning": False}
    await a.down.send([Message(b.address, b"ping")])
    assert [m.payload for m in await b.receive(1)] == [b"ping"]
    await wait_until(
        lambda: _polled(a)["windows"] >= 1 and not _polled(a)["spinning"], timeout=20, interval=0.01
    )
    before = _polled(a)["windows"]
    await b.down.send([Message(a.address, b"pong")])
    assert [m.payload for m in await a.receive(1)] == [b"pong"]
    await wait_until(
        lambda: _polled(a)["windows"] > before and not _polled(a)["spinning"],
        timeout=20,
        interval=0.01,
    )
    if loops_back:  # a multicast comes back to its sender too
        await a.down.send([Message(None, b"all")])
        assert [m.payload for m in await a.receive(1)] == [b"all"]
        assert [m.payload for m in await b.receive(1)] == [b"all"]


async def test_udp_busy_polls_after_it_sends_and_receives_and_parks_when_idle(
    open_endpoint: Any, mcast_port: int
) -> None:
    udp = {"mcast_port": mcast_port, "ucast_recv_buf_size": 1 << 20, "mcast_recv_buf_size": 1 << 20}
    a = await open_endpoint(UdpTransport, "A", busy_poll=WINDOW, **udp)
    b = await open_endpoint(UdpTransport, "B", **udp)
    for x, y in ((a, b), (b, a)):  # each learns the other's endpoint
        await x.down.send(AddPhysicalAddress(y.address, y.physical))
    await _polls_after_send_and_receive(a, b, loops_back=True)


async def test_tcp_busy_polls_after_it_sends_and_receives_and_parks_when_idle(
    open_endpoint: Any,
) -> None:
    a = await open_endpoint(TcpTransport, "A", bind_port=0, busy_poll=WINDOW)
    b = await open_endpoint(TcpTransport, "B", bind_port=0)
    await a.down.send(AddPhysicalAddress(b.address, b.physical))
    await _polls_after_send_and_receive(a, b, loops_back=False)


async def test_busy_poll_set_at_run_time_turns_polling_on_and_off(
    open_endpoint: Any, mcast_port: int
) -> None:
    buffers = {"ucast_recv_buf_size": 1 << 20, "mcast_recv_buf_size": 1 << 20}
    a = await open_endpoint(UdpTransport, "A", mcast_port=mcast_port, **buffers)
    b = await open_endpoint(UdpTransport, "B", mcast_port=mcast_port, **buffers)
    await a.down.send([Message(None, b"off")])
    assert [m.payload for m in await b.receive(1)] == [b"off"]
    assert [m.payload for m in await a.receive(1)] == [b"off"]
    assert "busy_poll" not in a.transport.stats()
    a.transport.set_property("busy_poll", "50ms", trio.current_time())
    await b.down.send([Message(a.address, b"on")])
    assert [m.payload for m in await a.receive(1)] == [b"on"]
    await wait_until(
        lambda: a.transport.stats()["busy_poll"]["windows"] >= 1, timeout=20, interval=0.01
    )
    await wait_until(
        lambda: not a.transport.stats()["busy_poll"]["spinning"], timeout=20, interval=0.01
    )
    a.transport.set_property("busy_poll", 0, trio.current_time())
    spun = a.transport.stats()["busy_poll"]["windows"]
    await b.down.send([Message(a.address, b"off again")])
    assert [m.payload for m in await a.receive(1)] == [b"off again"]
    await a.down.send([Message(b.address, b"and back")])
    assert [m.payload for m in await b.receive(1)] == [b"and back"]
    polled = a.transport.stats()["busy_poll"]  # kept: it was on once
    assert polled["windows"] == spun and not polled["spinning"]
