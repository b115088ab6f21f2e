"""Issue 37: `Channel.aclose` leaves with a flush and says whether it flushed."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from triogroups import ChannelClosed, SimNetwork, StackConfig, open_channel
from triogroups.testing import wait_until


async def _same_view(*channels: Any) -> None:
    await wait_until(
        lambda: all(len(ch.view) == len(channels) for ch in channels), timeout=10, interval=0.01
    )


async def test_channel_close_returns_true_once_the_others_have_what_it_sent(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """B multicasts under loss and closes at once: aclose returns True (the flush ended),
    A has everything, and a send after the close began raises ChannelClosed instead of
    vanishing."""
    async with open_channel("c", stack, "A", network=net) as a:
        async with open_channel("c", stack, "B", network=net) as b:
            await _same_view(a, b)
            net.set_faults(loss=0.2)
            for i in range(30):
                await b.send(i)
            async with trio.open_nursery() as nursery:
                closed: list[bool] = []

                async def close() -> None:
                    closed.append(await b.aclose())

                nursery.start_soon(close)
                await wait_until(lambda: b.closed, interval=0)  # the close began
                with pytest.raises(ChannelClosed):
                    await b.send("late")
            assert closed == [True]
            assert b.stats().get("leaves_unflushed", 0) == 0
        got = []
        with trio.fail_after(30):
            while len(got) < 30:
                got.append((await a.receive()).payload)
        assert got == list(range(30))


async def test_channel_close_returns_false_and_warns_when_its_messages_never_got_through(
    autojump_clock: Any,
    net: SimNetwork,
    stack: StackConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing from B reaches A any more: B's leave cannot flush, so after GMS's
    leave_timeout aclose returns False, logs it at WARNING and counts it."""
    quick = stack.configure("GMS", leave_timeout=1.0)
    async with (
        open_channel("c", quick, "A", network=net) as a,
        open_channel("c", quick, "B", network=net) as b,
    ):
        await _same_view(a, b)
        net.block(b.address, a.address)
        await b.send("lost")
        with caplog.at_level(logging.WARNING):
            assert await b.aclose() is False
        assert b.stats()["leaves_unflushed"] == 1
    assert any("left without knowing" in r.getMessage() for r in caplog.records)
    assert any("did not flush within leave_timeout" in r.getMessage() for r in caplog.records)
