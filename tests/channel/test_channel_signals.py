"""Issue 12 item 7: SIGTERM and Ctrl-C make `open_channel` leave the group, quietly.

The rules (see `triogroups._channel._signals`): only in the main thread, only
signals the application does not handle itself, ``handle_signals=False``
turns it off; a signal cancels the body, the member leaves, and
`open_channel` raises `SignalExit` (status 128 + signal). Between real
processes: tests/examples/test_examples_real.py and
tests/real/test_membership_real.py.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

from triogroups import (
    Channel,
    Interrupted,
    SignalExit,
    SimNetwork,
    StackConfig,
    open_channel,
)


def _own_handler(signum: int, frame: object) -> None:
    raise AssertionError("the application's own handler must not run in these tests")


@pytest.fixture(autouse=True)
def _python_default_handlers() -> Iterator[None]:
    """Each test starts from Python's own SIGTERM and SIGINT handlers, as a fresh process
    does, and gives back what it found: a test worker that ran the Spark tests before has
    pyspark's SIGINT handler installed (SparkContext sets one), which a channel rightly
    leaves alone as the application's own."""
    found = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for signum, handler in found.items():
            signal.signal(signum, handler)


async def test_open_channel_takes_unhandled_sigterm_and_sigint_and_gives_them_back(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """While the channel is open, SIGTERM (SIG_DFL) and SIGINT (Trio's KeyboardInterrupt
    handler) go to the channel; on exit the handlers are what they were."""
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    assert before[signal.SIGTERM] == signal.SIG_DFL
    async with open_channel("c", stack, "A", network=net):
        for signum, handler in before.items():
            assert signal.getsignal(signum) != handler, signal.Signals(signum).name
    assert {s: signal.getsignal(s) for s in before} == before


async def test_channels_closing_out_of_order_give_the_original_handlers_back(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Channels in sibling tasks may close in any order: while one is open the signals
    stay the channels', and once the last closes the original handlers are back."""
    before = signal.getsignal(signal.SIGTERM)
    first_closed = trio.Event()
    during: list[object] = []

    async def first() -> None:
        async with open_channel("c", stack, "A", network=net):
            await trio.sleep(1)
        first_closed.set()

    async def second() -> None:
        async with open_channel("c", stack, "B", network=net):
            await first_closed.wait()
            during.append(signal.getsignal(signal.SIGTERM))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        nursery.start_soon(second)
    assert during and during[0] != before
    assert signal.getsignal(signal.SIGTERM) == before


async def test_open_channel_leaves_an_applications_own_signal_handlers_alone(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """An application that handles SIGTERM and SIGINT itself keeps its handlers."""
    previous = {s: signal.signal(s, _own_handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        async with open_channel("c", stack, "A", network=net):
            for signum in previous:
                assert signal.getsignal(signum) is _own_handler
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


async def test_open_channel_with_handle_signals_false_installs_nothing(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    async with open_channel("c", stack, "A", network=net, handle_signals=False):
        assert signal.getsignal(signal.SIGTERM) == before


def test_open_channel_outside_the_main_thread_installs_nothing(
    stack: StackConfig,
) -> None:
    """Python delivers signals to the main thread only: a channel in another thread
    joins and leaves as usual and does not touch the handlers."""
    seen: list[object] = []

    async def member() -> None:
        from triogroups import open_sim_network

        async with (
            open_sim_network(seed=7) as network,
            open_channel("c", stack, "A", network=network) as ch,
        ):
            seen.append(signal.getsignal(signal.SIGTERM))
            seen.append(len(ch.view))

    thread = threading.Thread(target=trio.run, args=(member,))
    thread.start()
    thread.join(60)
    assert seen == [signal.SIG_DFL, 1]


async def _view_of(ch: Channel, size: int) -> None:
    with trio.fail_after(30):
        async for view in ch.views():
            if len(view) == size:
                return


@pytest.mark.parametrize(
    ("signum", "raised"), [(signal.SIGTERM, SignalExit), (signal.SIGINT, Interrupted)]
)
async def test_signal_makes_the_member_leave_and_open_channel_raise_signal_exit(
    autojump_clock: Any,
    net: SimNetwork,
    stack: StackConfig,
    signum: signal.Signals,
    raised: Callable[..., SignalExit],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three members on the simulated network; C (the only one handling signals) gets the
    signal: its body is cancelled, it leaves, A and B install the view of two at once (the
    stack has no failure detection), and `open_channel` raises `SignalExit` with status
    128 + signal (for SIGINT an `Interrupted`, also a KeyboardInterrupt)."""
    caplog.set_level(logging.INFO, logger="triogroups.channel")
    async with (
        open_channel("c", stack, "A", network=net, handle_signals=False) as a,
        open_channel("c", stack, "B", network=net, handle_signals=False) as b,
    ):
        left = trio.Event()
        unhandled = signal.getsignal(signum)
        with pytest.raises(SignalExit) as caught:
            async with open_channel("c", stack, "C", network=net) as c:
                await _view_of(c, 3)
                assert signal.getsignal(signum) != unhandled  # else the signal would hit pytest
                os.kill(os.getpid(), signum)
                try:
                    await trio.sleep_forever()
                finally:
                    left.set()
        assert left.is_set()
        assert isinstance(caught.value, raised)
        assert caught.value.code == 128 + signum
        assert caught.value.signum == signum
        assert f"C@c: {signum.name} received; leaving" in caplog.messages
        await _view_of(a, 2)
        await _view_of(b, 2)
        gms = a.stack.protocol("GMS").stats()
        assert gms["leaves"] == 1
        assert gms.get("suspects", 0) == 0


async def test_a_signal_makes_every_open_channel_of_the_process_leave(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """B and C in one process (nested), A elsewhere (no signals): SIGTERM makes both B
    and C leave, A installs the view of itself, and one SignalExit comes out."""
    async with open_channel("c", stack, "A", network=net, handle_signals=False) as a:
        unhandled = signal.getsignal(signal.SIGTERM)
        with pytest.raises(SignalExit) as caught:
            async with (
                open_channel("c", stack, "B", network=net) as b,
                open_channel("c", stack, "C", network=net),
            ):
                await _view_of(b, 3)
                assert signal.getsignal(signal.SIGTERM) != unhandled
                os.kill(os.getpid(), signal.SIGTERM)
                await trio.sleep_forever()
        assert caught.value.code == 128 + signal.SIGTERM
        await _view_of(a, 1)
        assert a.stack.protocol("GMS").stats()["leaves"] == 2


async def test_a_signal_makes_channels_in_sibling_tasks_each_leave(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """B and C open in two sibling tasks: SIGTERM cancels each one's block and each leaves
    with its own stack: neither raises its SignalExit (which cancels the sibling task and
    its stack) before both have left."""
    async with open_channel("c", stack, "A", network=net, handle_signals=False) as a:
        unhandled = signal.getsignal(signal.SIGTERM)
        ready = trio.Semaphore(0)

        async def member(name: str) -> None:
            async with open_channel("c", stack, name, network=net):
                ready.release()
                await trio.sleep_forever()

        with pytest.raises(BaseExceptionGroup) as caught:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(member, "B")
                nursery.start_soon(member, "C")
                for _ in range(2):
                    await ready.acquire()
                await _view_of(a, 3)
                assert signal.getsignal(signal.SIGTERM) != unhandled
                os.kill(os.getpid(), signal.SIGTERM)
        # once both have left, the first SignalExit may cancel the other task's last wait
        assert {type(e) for e in caught.value.exceptions} == {SignalExit}
        await _view_of(a, 1)
        assert a.stack.protocol("GMS").stats()["leaves"] == 2
        assert signal.getsignal(signal.SIGTERM) == unhandled


async def test_a_second_signal_stops_waiting_for_the_leave(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """C is cut off, so its leave would wait the whole leave timeout (60 s, GMS's and the
    channel's) for an answer; a second SIGTERM (Ctrl-C pressed again) ends the wait."""
    slow = stack.configure("GMS", leave_timeout=60)
    async with (
        open_channel("c", slow, "A", network=net, handle_signals=False) as a,
        trio.open_nursery() as nursery,
    ):
        unhandled = signal.getsignal(signal.SIGTERM)

        async def again() -> None:
            await trio.sleep(1)  # C is waiting for its leave by now
            assert signal.getsignal(signal.SIGTERM) != unhandled
            os.kill(os.getpid(), signal.SIGTERM)

        with pytest.raises(SignalExit):
            async with open_channel("c", slow, "C", network=net, close_timeout=60) as c:
                await _view_of(c, 2)
                net.partition([a.address], [c.address])
                start = trio.current_time()
                assert signal.getsignal(signal.SIGTERM) != unhandled
                os.kill(os.getpid(), signal.SIGTERM)
                nursery.start_soon(again)
                await trio.sleep_forever()
        assert 1 <= trio.current_time() - start < 60
