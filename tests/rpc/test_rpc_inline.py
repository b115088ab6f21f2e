"""A request that reaches an idle dispatcher runs in the stack's task, not the dispatcher's.

The channel's reader, run at the top of the stack inside the chain of handlers that
carried the request up from the transport, keeps a batch that starts with an RPC
request while the dispatcher is idle; once that chain has returned
(`triogroups._layer.after_chain`) it runs the synchronous handlers in the same task
and sends the answers down inline: one task switch less per call on the answering
member. Whatever needs an await (an async handler, a handler that returns an
awaitable, answers the stack cannot take now) goes to the dispatcher, in order.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from tests._task_steps import counting_steps
from triogroups import Channel, Message, SimNetwork, StackConfig, open_channel
from triogroups._payload import encode_payload
from triogroups._rpc import RPC_REQ, RpcHeader
from triogroups.protocols import ids
from triogroups.testing import wait_until


def _requests(dest: Channel, methods: list[str]) -> list[Message]:
    """Requests to ``dest`` (answers wanted), as one batch from the top of a stack."""
    return [
        Message(
            dest.address, encode_payload([i]), headers={ids.RPC: RpcHeader(RPC_REQ, 900 + i, m)}
        )
        for i, m in enumerate(methods)
    ]


async def _joined(*channels: Channel) -> None:
    await wait_until(
        lambda: all(len(ch.view) >= len(channels) for ch in channels), timeout=10, interval=0.01
    )
    await trio.testing.wait_all_tasks_blocked()


async def _executed(ch: Channel, n: int) -> None:
    await wait_until(
        lambda: ch.rpc.stats().get("requests_executed", 0) >= n, timeout=10, interval=0.01
    )
    await trio.testing.wait_all_tasks_blocked()


async def test_call_one_to_an_idle_member_is_answered_without_its_dispatcher_task(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Twenty calls, one at a time: B's dispatcher task never runs, every request ran
    inline and every answer came back."""
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net, handlers={"echo": lambda x: x}) as b,
    ):
        await _joined(a, b)
        dispatcher = b._rpc_server.holder
        assert dispatcher is not None
        with counting_steps(dispatcher) as steps:
            for i in range(20):
                assert await a.rpc.call_one("echo", i, to=b.address) == i
        assert steps.steps == 0
        assert b.rpc.stats()["requests_run_inline"] == 20


async def test_an_async_handler_runs_in_the_dispatcher_and_later_requests_wait_for_it(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """sync, async (waiting), sync in one batch: the first runs inline, the second in
    the dispatcher, and the third only after the second has finished."""
    release = trio.Event()
    order: list[str] = []

    async def slow(x: int) -> int:
        order.append("slow")
        await release.wait()
        order.append("slow done")
        return x

    def quick(x: int) -> int:
        order.append(f"quick {x}")
        return x

    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net, handlers={"quick": quick, "slow": slow}) as b,
    ):
        await _joined(a, b)
        await a.stack.send(_requests(b, ["quick", "slow", "quick"]))
        await _executed(b, 2)
        assert order == ["quick 0", "slow"]
        release.set()
        await _executed(b, 3)
        assert order == ["quick 0", "slow", "slow done", "quick 2"]
        assert b.rpc.stats()["requests_run_inline"] == 1
        assert b.rpc.stats()["responses_sent"] == 3


async def test_a_sync_handler_returning_an_awaitable_is_finished_by_the_dispatcher_in_order(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """A plain function that returns a coroutine, then a sync request, in one batch:
    the dispatcher awaits the coroutine and answers with its value, and the request
    after it runs only then; a call to it returns the awaited value."""
    release = trio.Event()
    order: list[str] = []

    async def later(x: int) -> int:
        await release.wait()
        order.append(f"awaited {x}")
        return x * 10

    def quick(x: int) -> int:
        order.append(f"quick {x}")
        return x

    handlers = {"lazy": lambda x: later(x), "quick": quick}
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net, handlers=handlers) as b,
    ):
        await _joined(a, b)
        await a.stack.send(_requests(b, ["lazy", "quick"]))
        await _executed(b, 1)
        assert order == []
        release.set()
        await _executed(b, 2)
        assert order == ["awaited 0", "quick 1"]
        assert b.rpc.stats()["responses_sent"] == 2
        assert await a.rpc.call_one("lazy", 4, to=b.address) == 40


async def test_answers_the_stack_cannot_take_at_once_are_sent_by_the_dispatcher(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """While another send holds B's send lock, the answer of a request run inline
    cannot go down at once: it is handed to the dispatcher, which sends it as soon as
    the lock is free, and the call returns its value."""
    release = trio.Event()
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net, handlers={"echo": lambda x: x}) as b,
    ):
        await _joined(a, b)
        results: list[int] = []

        async def hold() -> None:
            async with b._send_lock:
                await release.wait()

        async def call() -> None:
            results.append(await a.rpc.call_one("echo", 7, to=b.address, timeout=5))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(call)
            await _executed(b, 1)
            assert b.rpc.stats()["requests_run_inline"] == 1
            assert results == []
            release.set()
        assert results == [7]
        assert b.rpc.stats().get("reply_batches", 0) == 1
