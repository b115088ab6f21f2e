"""Answers to requests delivered together leave together, and never wait for a slow one.

The channel's dispatcher holds back the answers of synchronous handlers while it runs a
run of requests from one delivered batch and sends them down the stack as one batch (one
bundle per caller instead of one per answer); it sends what it holds before it awaits
anything else, and before an async handler's result is awaited.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from triogroups import Channel, Message, SimNetwork, StackConfig, open_channel
from triogroups._payload import encode_payload
from triogroups._rpc import RPC_REQ, RpcHeader
from triogroups.protocols import ids
from triogroups.testing import wait_until


def _requests(methods: list[str]) -> list[Message]:
    """Group requests (answers wanted), as one batch from the top of the caller's stack."""
    return [
        Message(None, encode_payload([i]), headers={ids.RPC: RpcHeader(RPC_REQ, 1000 + i, m)})
        for i, m in enumerate(methods)
    ]


def _top(ch: Channel) -> dict[str, int]:
    return ch.stack.stats()["layers"][-1]["host"]  # type: ignore[no-any-return]


async def test_answers_to_requests_delivered_in_one_batch_go_down_as_one_batch(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Ten requests that reach B in one batch: B's ten answers cross B's stack as one
    batch, not ten."""
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net, handlers={"f": lambda x: x}) as b,
    ):
        await wait_until(lambda: len(b.view) >= 2, timeout=10, interval=0.01)
        await trio.testing.wait_all_tasks_blocked()
        before, sent = _top(b), b.rpc.stats().get("responses_sent", 0)
        await a.stack.send(_requests(["f"] * 10))
        await wait_until(
            lambda: b.rpc.stats().get("responses_sent", 0) >= sent + 10, timeout=10, interval=0.01
        )
        await trio.testing.wait_all_tasks_blocked()
        after = _top(b)
        assert after["msgs_down"] - before["msgs_down"] == 10
        assert after["batches_down"] - before["batches_down"] == 1


async def test_an_async_handler_does_not_hold_back_the_answers_given_before_it(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """A sync request and then an async one that waits, in one batch: the sync answer
    leaves while the async handler still waits."""
    release = trio.Event()

    async def slow(x: int) -> int:
        await release.wait()
        return x

    handlers = {"quick": lambda x: x, "slow": slow}
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net, handlers=handlers) as b,
    ):
        await wait_until(lambda: len(b.view) >= 2, timeout=10, interval=0.01)
        await trio.testing.wait_all_tasks_blocked()
        before = _top(b)
        await a.stack.send(_requests(["quick", "slow"]))
        await wait_until(
            lambda: b.rpc.stats().get("requests_executed", 0) >= 2, timeout=10, interval=0.01
        )
        await trio.testing.wait_all_tasks_blocked()
        assert not release.is_set()
        assert _top(b)["msgs_down"] - before["msgs_down"] == 1  # the quick answer left
        release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert _top(b)["msgs_down"] - before["msgs_down"] == 2
