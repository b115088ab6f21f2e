"""Group RPC: response modes, timeouts, failed members, remote exceptions."""

from __future__ import annotations

import sys
import types
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from triogroups import (
    Address,
    Channel,
    ChannelClosed,
    MemberGone,
    NotAMember,
    RemoteError,
    RpcTimeout,
    SimNetwork,
    StackConfig,
    UnknownMethod,
    open_channel,
)
from triogroups.testing import wait_until


@asynccontextmanager
async def members(
    net: SimNetwork, stack: StackConfig, names: str, **options: Any
) -> AsyncIterator[list[Channel]]:
    async with AsyncExitStack() as stack_of:
        chans = [
            await stack_of.enter_async_context(open_channel("c", stack, n, network=net, **options))
            for n in names
        ]
        await wait_until(
            lambda: all(len(ch.view) == len(names) for ch in chans), timeout=10, interval=0.01
        )
        yield chans


def answer_with_name(ch: Channel) -> None:
    ch.rpc.register("name", lambda: ch.name)


async def test_call_all_returns_every_members_value(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "ABC") as chans:
        for ch in chans:
            ch.rpc.register("add", lambda x, y, ch=ch: f"{ch.name}:{x + y}")
        a = chans[0]
        rsps = await a.rpc.call("add", 2, 3)
        assert not rsps.timed_out
        assert {m.name: v for m, v in rsps.results().items()} == {
            "A": "A:5",
            "B": "B:5",
            "C": "C:5",
        }
        assert list(rsps) == [ch.address for ch in chans]
        assert rsps.suspected == [] and rsps.errors() == {}


async def test_call_first_returns_after_the_first_answer(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "ABC") as chans:
        for delay, ch in zip((5.0, 0.5, 3.0), chans, strict=True):

            async def slow(delay: float = delay, ch: Channel = ch) -> str:
                await trio.sleep(delay)
                return ch.name

            ch.rpc.register("slow", slow)
        start = trio.current_time()
        rsps = await chans[0].rpc.call("slow", mode="first", oob=True)
        assert trio.current_time() - start < 1.0
        first = rsps.first()
        assert first is not None and first.value == "B"
        assert rsps.received == [chans[1].address]
        assert not rsps[chans[0].address].received


async def test_call_majority_waits_for_more_than_half(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "ABC") as chans:
        for delay, ch in zip((1.0, 2.0, 60.0), chans, strict=True):

            async def slow(delay: float = delay) -> float:
                await trio.sleep(delay)
                return delay

            ch.rpc.register("slow", slow)
        start = trio.current_time()
        rsps = await chans[0].rpc.call("slow", mode="majority", oob=True, timeout=30)
        assert 2.0 <= trio.current_time() - start < 3.0
        assert sorted(rsps.results().values()) == [1.0, 2.0]
        assert not rsps.timed_out


async def test_call_none_returns_at_once_and_still_runs_everywhere(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    calls: list[str] = []
    async with members(net, stack, "AB") as chans:
        for ch in chans:
            ch.rpc.register("note", lambda ch=ch: calls.append(ch.name))
        rsps = await chans[0].rpc.call("note", mode="none")
        assert len(rsps) == 0 and calls == []
        await wait_until(lambda: len(calls) >= 2, timeout=5, interval=0.01)
        assert sorted(calls) == ["A", "B"]


async def test_call_one_member_and_exclude_self(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "ABC") as chans:
        for ch in chans:
            answer_with_name(ch)
        a, b, c = chans
        assert await a.rpc.call_one("name", to=b.address) == "B"
        assert await a.rpc.call_one("name", to=a.address) == "A"
        rsps = await a.rpc.call("name", to=[c.address, b.address])
        assert list(rsps) == [c.address, b.address]
        others = await a.rpc.call("name", exclude_self=True)
        assert sorted(others.results().values()) == ["B", "C"]
        with pytest.raises(NotAMember):
            await a.rpc.call("name", to=Address.random("x"))


async def test_timeout_leaves_missing_answers_unreceived(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "AB") as chans:
        a, b = chans
        answer_with_name(a)

        async def stuck() -> None:
            await trio.sleep_forever()

        b.rpc.register("name", stuck)
        rsps = await a.rpc.call("name", timeout=2, oob=True)
        assert rsps.timed_out
        assert rsps[a.address].value == "A"
        assert not rsps[b.address].received and not rsps[b.address].suspected
        with pytest.raises(RpcTimeout):
            rsps[b.address].result()
        with pytest.raises(RpcTimeout, match="within 1"):
            await a.rpc.call_one("name", to=b.address, timeout=1, oob=True)


async def test_each_call_times_out_at_its_own_timeout_whatever_calls_wait_before_it(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Calls share one timer (`CallTable.expire_loop`): a call with a short timeout made
    while one with a long timeout waits still ends after its own timeout, and the long one
    after its own, not before."""
    async with members(net, stack, "AB") as chans:
        a, b = chans

        async def stuck() -> None:
            await trio.sleep_forever()

        b.rpc.register("stuck", stuck)
        ended: dict[str, float] = {}

        async def call(label: str, timeout: float) -> None:
            start = trio.current_time()
            rsps = await a.rpc.call("stuck", to=b.address, timeout=timeout, oob=True)
            assert rsps.timed_out
            ended[label] = trio.current_time() - start

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "long", 30.0)
            await trio.sleep(1)
            nursery.start_soon(call, "short", 2.0)
        assert ended["short"] == pytest.approx(2.0, abs=0.1)
        assert ended["long"] == pytest.approx(30.0, abs=0.1)
        assert a.rpc.stats()["calls_timed_out"] == 2


async def test_a_member_that_leaves_during_a_call_counts_as_failed_not_as_a_hang(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "AB") as chans:
        a, b = chans
        answer_with_name(a)
        b.rpc.register("name", trio.sleep_forever)
        async with trio.open_nursery() as nursery:

            async def leave_soon() -> None:
                await trio.sleep(1)
                await b.aclose()

            nursery.start_soon(leave_soon)
            start = trio.current_time()
            rsps = await a.rpc.call("name", timeout=60, oob=True)
        assert trio.current_time() - start < 5
        assert not rsps.timed_out
        assert rsps.suspected == [b.address]
        with pytest.raises(MemberGone, match="left the view"):
            rsps[b.address].result()
        assert rsps[a.address].value == "A"


async def test_a_suspected_member_counts_as_failed_at_once(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """B's process 'dies' (cut off the network); failure detection suspects it."""
    stack = StackConfig.of(
        "SIM",
        "PING",
        ("FD_ALL3", {"interval": 0.5, "timeout": 2.0}),
        ("VERIFY_SUSPECT", {"timeout": 0.5}),
        "NAKACK2",
        "UNICAST3",
        "STABLE",
        "GMS",
    )
    async with members(net, stack, "AB") as chans:
        a, b = chans
        answer_with_name(a)
        b.rpc.register("name", trio.sleep_forever)
        net.partition([a.address], [b.address])
        start = trio.current_time()
        rsps = await a.rpc.call("name", timeout=60, oob=True)
        assert trio.current_time() - start < 10
        assert rsps.suspected == [b.address]
        with pytest.raises(MemberGone, match="was suspected"):
            rsps[b.address].result()
        net.heal()


def failing_handler(value: int) -> None:
    raise ValueError(f"bad input {value}")


async def test_remote_exception_comes_back_with_its_type_message_and_remote_traceback(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "AB") as chans:
        a, b = chans
        b.rpc.register("fail", failing_handler)
        with pytest.raises(ValueError, match="bad input 7") as info:
            await a.rpc.call_one("fail", 7, to=b.address)
        cause = info.value.__cause__
        assert isinstance(cause, RemoteError)
        assert cause.member == b.address
        assert cause.type_name == "ValueError"
        assert "failing_handler" in cause.traceback
        assert any("failing_handler" in note for note in info.value.__notes__)


async def test_remote_exception_of_a_type_unknown_here_is_a_remote_error(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    module = types.ModuleType("only_on_b")
    error = type("PeerOnlyError", (Exception,), {"__module__": "only_on_b"})
    module.PeerOnlyError = error  # type: ignore[attr-defined]

    def raises() -> None:
        raise error("from the peer")

    async with members(net, stack, "AB") as chans:
        a, b = chans
        b.rpc.register("raises", raises)
        assert "only_on_b" not in sys.modules
        rsps = await a.rpc.call("raises", to=b.address)
        exc = rsps[b.address].exception
        assert isinstance(exc, RemoteError)
        assert exc.type_name == "only_on_b.PeerOnlyError"
        assert exc.message == "from the peer"
        assert "raises" in exc.traceback


async def test_an_unknown_method_raises_unknown_method(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "AB") as chans:
        a, b = chans
        with pytest.raises(UnknownMethod, match="no rpc method 'nope'"):
            await a.rpc.call_one("nope", to=b.address)


async def test_async_handlers_may_call_other_members(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "AB") as chans:
        a, b = chans
        answer_with_name(a)

        async def relay() -> str:
            inner = await b.rpc.call_one("name", to=a.address)
            return f"B via {inner}"

        b.rpc.register("relay", relay)
        assert await a.rpc.call_one("relay", to=b.address) == "B via A"


async def test_requests_run_one_at_a_time_in_each_senders_order(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "ABC") as chans:
        logs: dict[str, list[int]] = {ch.name: [] for ch in chans}
        for ch in chans:

            async def record(value: int, log: list[int] = logs[ch.name]) -> None:
                await trio.sleep(0.01 * (value % 3))
                log.append(value)

            ch.rpc.register("record", record)
        for i in range(20):
            await chans[0].rpc.call("record", i, mode="none")
        await wait_until(lambda: all(len(log) >= 20 for log in logs.values()), timeout=30)
        assert all(log == list(range(20)) for log in logs.values())


class Box:
    def __init__(self, content: Any) -> None:
        self.content = content


async def test_pickled_arguments_and_results_travel_when_allowed(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "AB", allow_pickle=True) as chans:
        a, b = chans
        b.rpc.register("unbox", lambda box: Box(box.content * 2))
        result = await a.rpc.call_one("unbox", Box(21), to=b.address, pickle=True)
        assert isinstance(result, Box) and result.content == 42


async def test_pickled_arguments_are_refused_where_pickle_is_not_allowed(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with (
        open_channel("c", stack, "A", network=net, allow_pickle=True) as a,
        open_channel("c", stack, "B", network=net) as b,
    ):
        b.rpc.register("unbox", lambda box: box.content)
        with pytest.raises(TypeError, match="refuses pickled arguments"):
            await a.rpc.call_one("unbox", Box(1), to=b.address, pickle=True)


async def test_calls_fail_with_channel_closed_when_the_channel_closes(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "AB") as chans:
        a, b = chans
        b.rpc.register("stuck", trio.sleep_forever)
        async with trio.open_nursery() as nursery:

            async def close_soon() -> None:
                await trio.sleep(1)
                await a.aclose()

            nursery.start_soon(close_soon)
            with pytest.raises(ChannelClosed):
                await a.rpc.call("stuck", to=b.address, timeout=60, oob=True)
        with pytest.raises(ChannelClosed):
            await a.rpc.call("stuck")


async def test_an_argument_that_cannot_be_sent_is_named_with_its_value(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Issue 12 item 12: the error names the argument and its value, not an internal list."""
    async with members(net, stack, "A") as (a,):
        with pytest.raises(TypeError) as info:
            await a.rpc.call("add", 1, Box(2))
        text = str(info.value)
        assert text.startswith("argument #2 of rpc call 'add' (<")
        assert "Box object at 0x" in text
        assert ") cannot be sent: payload of type Box" in text
        assert "payload of type Box is not msgpack-able" in text
        assert "list" not in text


async def test_a_call_to_a_member_name_instead_of_an_address_says_so(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Issue 12 item 12: ``to="B"`` names the mistake (a str, not an Address)."""
    async with members(net, stack, "AB") as (a, _):
        with pytest.raises(TypeError, match=r"^to must be an Address or Addresses .* got str 'B'$"):
            await a.rpc.call("m", to="B")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"^rpc targets must be Addresses, got str 'B'$"):
            await a.rpc.call("m", to=["B"])  # type: ignore[list-item]


async def test_bad_call_arguments_are_refused(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with members(net, stack, "A") as (a,):
        with pytest.raises(ValueError, match="mode must be one of"):
            await a.rpc.call("x", mode="most")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout must be > 0"):
            await a.rpc.call("x", timeout=0)
        with pytest.raises(TypeError, match="not msgpack-able"):
            await a.rpc.call("x", Box(1))
        with pytest.raises(ValueError, match="non-empty str"):
            a.rpc.register("", print)


async def test_a_burst_of_group_calls_stays_one_batch(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Calls to the group keep the send queue's coalescing, unlike calls to members (which
    run down an idle stack at once): a STABLE max_bytes round then starts after the burst,
    not in its middle (tests/real/test_stable_real.py)."""
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net, handlers={"f": lambda x: x}) as b,
    ):
        await trio.testing.wait_all_tasks_blocked()

        def top() -> dict[str, int]:
            return a.stack.stats()["layers"][-1]["host"]  # type: ignore[no-any-return]

        before = top()
        for i in range(5):
            await a.rpc.call("f", i, mode="none")
        await trio.testing.wait_all_tasks_blocked()
        after = top()
        assert after["batches_down"] - before["batches_down"] == 1
        assert after["msgs_down"] - before["msgs_down"] == 5
        assert await a.rpc.call_one("f", 7, to=b.address) == 7


async def test_callers_woken_by_one_batch_of_answers_send_their_next_requests_as_one_batch(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Ten tasks each make three calls to B in turn. The first requests run down A's idle
    stack one by one (no caller was woken yet); B's answers arrive in one batch, and the
    ten callers they wake send their next requests as one batch (they join one another in
    the send queue instead of each running down the stack alone): 12 batches, not 30."""
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net, handlers={"f": lambda x: x}) as b,
    ):
        await wait_until(lambda: len(b.view) >= 2, timeout=10, interval=0.01)
        await trio.testing.wait_all_tasks_blocked()

        def top() -> dict[str, int]:
            return a.stack.stats()["layers"][-1]["host"]  # type: ignore[no-any-return]

        async def caller(i: int) -> None:
            for _ in range(3):
                assert await a.rpc.call_one("f", i, to=b.address) == i

        before = top()
        async with trio.open_nursery() as nursery:
            for i in range(10):
                nursery.start_soon(caller, i)
        after = top()
        assert after["msgs_down"] - before["msgs_down"] == 30
        assert after["batches_down"] - before["batches_down"] == 12
        await a.rpc.call_one("f", 0, to=b.address)  # a lone caller again: down and up inline
        assert top()["inline"] - after["inline"] == 2
