"""The channel's public surface: join, send, receive, views, errors, leave."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from triogroups import (
    Address,
    ChannelClosed,
    Flag,
    JoinFailed,
    MessageTooLarge,
    NotAMember,
    Received,
    SimNetwork,
    StackConfig,
    open_channel,
)
from triogroups._payload import MSGPACK
from triogroups.testing import wait_until


async def take(ch: object, n: int, timeout: float = 30.0) -> list[Received]:
    got = []
    with trio.fail_after(timeout):
        for _ in range(n):
            got.append(await ch.receive())  # type: ignore[attr-defined]
    return got


async def test_open_channel_returns_once_the_view_including_the_member_is_installed(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with open_channel("c", stack, "A", network=net) as a:
        assert a.view.members == (a.address,)
        async with open_channel("c", stack, "B", network=net) as b:
            assert b.view.members == (a.address, b.address)
            await wait_until(lambda: a.view == b.view, timeout=5, interval=0.01)


async def test_multicasts_reach_every_member_and_the_sender_in_send_order(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net) as b,
    ):
        for i in range(30):
            await a.send(i)
            await b.send(f"b{i}")
        for ch in (a, b):
            got = await take(ch, 60)
            assert [m.payload for m in got if m.src == a.address] == list(range(30))
            assert [m.payload for m in got if m.src == b.address] == [f"b{i}" for i in range(30)]
            assert all(m.multicast and not m.oob for m in got)


async def test_unicast_reaches_only_its_destination(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net) as b,
        open_channel("c", stack, "C", network=net) as c,
    ):
        await a.send(b"for b", to=b.address)
        await a.send(b"for all")
        (first, second) = await take(b, 2)
        assert (first.payload, first.multicast, first.src) == (b"for b", False, a.address)
        assert second.payload == b"for all"
        assert [m.payload for m in await take(c, 1)] == [b"for all"]
        with pytest.raises(trio.WouldBlock):
            c.receive_nowait()


@dataclass
class Point:
    x: int
    y: int


async def test_payloads_round_trip_as_bytes_msgpack_and_pickle_when_asked(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with (
        open_channel("c", stack, "A", network=net, allow_pickle=True) as a,
        open_channel("c", stack, "B", network=net, allow_pickle=True) as b,
    ):
        values = [b"\x00raw", {"k": [1, 2.5, None, "s"]}, 7, "text", None]
        for value in values:
            await a.send(value)
        await a.send(Point(1, 2), pickle=True)
        got = await take(b, len(values) + 1)
        assert [m.payload for m in got[:-1]] == values
        assert got[0].raw == b"\x00raw"
        assert got[-1].payload == Point(1, 2)


async def test_bytes_travel_untagged_and_other_values_tagged(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Bytes leave as the very object sent, without TAGGED, so a receiver hands them over
    without a copy; a value leaves encoded behind its tag, with TAGGED. Bytes that start
    like a pickle's tag are still bytes to a receiver that refuses pickles."""
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net) as b,
    ):
        data = b"\x02not a pickle"
        msg = a._app_message(data, None, False, False)
        assert msg.payload is data and not msg.flags & Flag.TAGGED
        encoded = a._app_message({"k": 1}, None, False, True)
        assert encoded.flags & Flag.TAGGED and encoded.flags & Flag.OOB
        assert encoded.payload[:1] == bytes((MSGPACK,))
        await a.send(data)
        await a.send(bytearray(b"\x01also bytes"))
        got = await take(b, 2)
        assert [m.payload for m in got] == [data, b"\x01also bytes"]
        assert [m.raw for m in got] == [data, b"\x01also bytes"]
        assert "pickle_refused" not in b.stats()["dropped"]


async def test_pickled_payload_refused_by_a_receiver_is_reported_to_the_sender(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 12 item 12: a receiver without allow_pickle drops the pickle (counted) and tells
    the sender, which logs a warning naming it and refuses further pickles while it is in the
    view, instead of sending what is dropped without a word."""
    async with (
        open_channel("c", stack, "A", network=net, allow_pickle=True) as a,
        open_channel("c", stack, "B", network=net) as b,
    ):
        await a.send(Point(1, 2), pickle=True)
        await a.send("after")
        (got,) = await take(b, 1)
        assert got.payload == "after"
        assert b.stats()["dropped"]["pickle_refused"] == 1
        await wait_until(
            lambda: a.stats().get("pickle_refused_by_receivers"), timeout=10, interval=0.01
        )
        assert f"{b.address} refuses pickled payloads" in caplog.text
        with pytest.raises(ValueError, match=f"allow_pickle is off at {b.address}"):
            await a.send(Point(3, 4), pickle=True)
        with pytest.raises(ValueError, match=f"allow_pickle is off at {b.address}"):
            a.send_nowait(Point(3, 4), to=b.address, pickle=True)
        await a.send(Point(5, 6), to=a.address, pickle=True)


async def test_send_with_pickle_needs_allow_pickle_on_the_sending_channel(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Issue 12 item 12: pickle is a group-wide choice; a channel that would refuse pickles
    does not send them either (nothing is sent)."""
    async with open_channel("c", stack, "A", network=net) as a:
        with pytest.raises(ValueError, match="pickle=True needs allow_pickle=True"):
            await a.send(Point(1, 2), pickle=True)
        with pytest.raises(ValueError, match="pickle=True needs allow_pickle=True"):
            await a.rpc.call("m", Point(1, 2), pickle=True)
        assert a.stats().get("sent", 0) == 0


async def test_send_to_a_name_instead_of_an_address_raises_type_error(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """Issue 12 item 12: ``to="B"`` is a type error that says so, not NotAMember."""
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net),
    ):
        with pytest.raises(
            TypeError,
            match=r"^to must be an Address from the view \(ch.view.members\), got str 'B'$",
        ):
            await a.send(b"x", to="B")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="to must be an Address"):
            a.send_nowait(b"x", to="B")  # type: ignore[arg-type]


async def test_unserialisable_payload_raises_type_error_and_sends_nothing(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with open_channel("c", stack, "A", network=net, allow_pickle=True) as a:
        with pytest.raises(TypeError, match="not msgpack-able"):
            await a.send(Point(1, 2))
        with pytest.raises(TypeError, match="cannot be pickled"):
            await a.send(threading.Lock(), pickle=True)
        assert a.stats().get("sent", 0) == 0


async def test_send_to_an_address_outside_the_view_raises_not_a_member(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with open_channel("c", stack, "A", network=net) as a:
        async with open_channel("c", stack, "B", network=net) as b:
            gone = b.address
            await a.send(b"ok", to=gone)
        await wait_until(lambda: gone not in a.view, timeout=10, interval=0.01)
        with pytest.raises(NotAMember) as info:
            await a.send(b"late", to=gone)
        assert info.value.member == gone
        with pytest.raises(NotAMember):
            a.send_nowait(b"x", to=Address.random("stranger"))


async def test_a_closed_channel_raises_channel_closed_and_iteration_ends(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with open_channel("c", stack, "A", network=net) as a:
        await a.send(b"one")
        async with trio.open_nursery() as nursery:
            seen: list[bytes] = []

            async def read() -> None:
                async for msg in a:
                    seen.append(msg.payload)

            nursery.start_soon(read)
            await wait_until(lambda: seen, timeout=5, interval=0.01)
            await a.aclose()
        assert seen == [b"one"]
    with pytest.raises(ChannelClosed):
        await a.send(b"two")
    with pytest.raises(ChannelClosed):
        await a.receive()


async def test_payload_larger_than_frag_max_message_size_raises_message_too_large(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    small = stack.configure("FRAG", max_message_size=20_000, frag_size=4_000)
    async with (
        open_channel("c", small, "A", network=net) as a,
        open_channel("c", small, "B", network=net) as b,
    ):
        with pytest.raises(MessageTooLarge) as info:
            await a.send(bytes(20_001))
        assert info.value.limit == 20_000
        with pytest.raises(MessageTooLarge):  # a value's encoding tag counts too
            await a.send("x" * 19_997)  # 19_999 bytes of msgpack, 20_000 with the tag
        await a.send(bytes(19_000))
        (got,) = await take(b, 1)
        assert got.payload == bytes(19_000)


async def test_frag_size_check_takes_exactly_max_message_size_and_follows_a_change(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """The channel's size check (read per send, not cached per incarnation) lets an
    encoded payload of exactly FRAG.max_message_size through, refuses one byte more, and
    applies a max_message_size changed at run time to the next send."""
    small = stack.configure("FRAG", max_message_size=20_000, frag_size=4_000)
    async with open_channel("c", small, "A", network=net) as a:
        await a.send(bytes(20_000))  # bytes travel untagged: the payload is all there is
        with pytest.raises(MessageTooLarge):
            await a.send(bytes(20_001))
        assert [len(m.payload) for m in await take(a, 1)] == [20_000]
        await a.stack.set_property("FRAG", "max_message_size", 10_000)
        with pytest.raises(MessageTooLarge) as info:
            await a.send(bytes(19_999))
        assert info.value.limit == 10_000
        await a.send(bytes(10_000))
        assert [len(m.payload) for m in await take(a, 1)] == [10_000]


async def test_without_frag_a_payload_must_fit_one_transport_bundle(
    autojump_clock: Any, net: SimNetwork
) -> None:
    stack = StackConfig.of(("SIM", {"max_bundle_size": 8_000}), "PING", "GMS")
    async with open_channel("c", stack, "A", network=net) as a:
        with pytest.raises(MessageTooLarge, match="put FRAG in the stack"):
            await a.send(bytes(7_000))
        await a.send(bytes(6_000))
        assert len((await take(a, 1))[0].payload) == 6_000


async def test_views_yields_the_current_view_then_every_change(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with open_channel("c", stack, "A", network=net) as a:
        views = a.views()
        async with open_channel("c", stack, "B", network=net) as b:
            joined = b.address
        seen = []
        with trio.fail_after(10):
            async for view in views:
                seen.append(view.members)
                if len(seen) == 3:
                    break
        assert seen == [(a.address,), (a.address, joined), (a.address,)]
    with trio.fail_after(1):
        assert [v async for v in a.views()] == []


async def test_leaving_on_exit_removes_the_member_without_failure_detection(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """No FD layer in the stack: only a graceful leave can shrink the view."""
    async with open_channel("c", stack, "A", network=net) as a:
        async with open_channel("c", stack, "B", network=net):
            pass
        await wait_until(lambda: len(a.view) == 1, timeout=3, interval=0.01)
        assert a.stats().get("leave_timeouts", 0) == 0


async def test_open_channel_raises_join_failed_when_no_view_comes_in_time(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    slow = stack.configure("GMS", join_timeout=5.0)  # discovery alone takes 5 s
    with pytest.raises(JoinFailed, match="within 1"):
        async with open_channel("c", slow, "A", network=net, connect_timeout=1):
            pass


async def test_open_channel_refuses_a_stack_without_gms(
    autojump_clock: Any, net: SimNetwork
) -> None:
    with pytest.raises(ValueError, match="needs GMS"):
        async with open_channel("c", StackConfig.of("SIM", "PING"), "A", network=net):
            pass


async def test_send_total_order_delivers_one_order_at_every_member_on_udp_total(
    autojump_clock: Any, net: SimNetwork
) -> None:
    """Two members multicast with ``total_order=True`` (one at a time and in batches) on
    the ``udp-total`` preset: both receive the same sequence."""
    async with (
        open_channel("c", "udp-total", "A", network=net) as a,
        open_channel("c", "udp-total", "B", network=net) as b,
    ):
        with trio.fail_after(30):
            while len(a.view.members) < 2 or a.view != b.view:
                await trio.sleep(0.01)
        async with trio.open_nursery() as nursery:
            for ch in (a, b):
                for i in range(20):
                    nursery.start_soon(ch.send, f"{ch.name}{i}", None)
            nursery.start_soon(lambda: a.send_many(["m1", "m2"], total_order=True))
            nursery.start_soon(lambda: b.send(b"raw", total_order=True))
        got_a, got_b = await take(a, 43), await take(b, 43)
        assert [(m.src, m.payload) for m in got_a] == [(m.src, m.payload) for m in got_b]


async def test_send_total_order_refused_where_it_cannot_hold(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    """A stack without SEQUENCER orders per sender only: RuntimeError naming what is
    needed; a unicast or OOB message cannot be in the order: ValueError. Nothing is sent."""
    async with open_channel("c", stack, "A", network=net) as a:
        with pytest.raises(RuntimeError, match="total_order=True needs SEQUENCER"):
            await a.send(b"x", total_order=True)
        with pytest.raises(RuntimeError, match="needs SEQUENCER"):
            a.send_nowait(b"x", total_order=True)
        with pytest.raises(ValueError, match="not with to= or oob=True"):
            await a.send(b"x", a.address, total_order=True)
        with pytest.raises(ValueError, match="not with to= or oob=True"):
            await a.send_many([b"x"], oob=True, total_order=True)
        assert a.stats()["seqno"] == 0
