"""Each example's core, run on the simulated network in virtual time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from triogroups import SimNetwork, StackConfig, open_channel, open_replicated_dict
from triogroups.testing import wait_until


async def lines_from(channel: trio.MemoryReceiveChannel[str]) -> AsyncIterator[str]:
    async for line in channel:
        yield line


async def test_chat_shows_the_other_members_lines_and_the_view_changes(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig, example: Any
) -> None:
    chat = example("chat")
    shown: dict[str, list[str]] = {"A": [], "B": []}
    typed = {name: trio.open_memory_channel[str](10) for name in "AB"}
    async with trio.open_nursery() as nursery:

        async def member(name: str) -> None:
            async with open_channel("chat", stack, name, network=net) as ch:
                await chat.chat(ch, lines_from(typed[name][1]), shown[name].append)

        nursery.start_soon(member, "A")
        await wait_until(lambda: shown["A"] == ["* view: A"], timeout=30, interval=0.02)
        nursery.start_soon(member, "B")
        await wait_until(lambda: "* view: A, B" in shown["B"], timeout=30, interval=0.02)
        await typed["A"][0].send("hello from A\n")
        await typed["B"][0].send("  \n")
        await typed["B"][0].send("hi A\n")
        await wait_until(
            lambda: "[A] hello from A" in shown["B"] and "[B] hi A" in shown["A"],
            timeout=30,
            interval=0.02,
        )
        await typed["B"][0].aclose()  # Ctrl-D: B leaves
        await wait_until(lambda: shown["A"][-1] == "* view: A", timeout=30, interval=0.02)
        await typed["A"][0].aclose()
    assert shown["A"] == ["* view: A", "* view: A, B", "[B] hi A", "* view: A"]
    assert shown["B"] == ["* view: A, B", "[A] hello from A"]


async def test_replicated_kv_late_joiner_gets_the_data_and_replicas_converge(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig, example: Any
) -> None:
    """examples/replicated_kv.py's commands on replicas of one `ReplicatedDict`: a late
    joiner gets the data by state transfer while writes go on, and two nodes writing
    the same keys at once end with equal replicas (SEQUENCER's one order)."""
    kv = example("replicated_kv")
    total = stack.insert_above("UNICAST3", "SEQUENCER")

    def replica(name: str) -> Any:
        return open_replicated_dict("kv", total, name, network=net, handle_signals=False)

    async with replica("A") as a, replica("B") as b, trio.open_nursery() as nursery:
        for i in range(20):
            assert await kv.execute(a, f"put a{i} {i}") is None
        await kv.execute(b, "put shared from-B")
        written = trio.Event()

        async def keep_writing() -> None:
            for i in range(40):
                await kv.execute(b, f"put b{i} {i}")
                await trio.sleep(0.05)
            written.set()

        nursery.start_soon(keep_writing)
        await trio.sleep(0.5)
        async with replica("C") as c:
            assert await kv.execute(c, "get a7") == "'7'"  # from the state
            assert c.stats()["states_set"] == 1
            assert not written.is_set()
            await written.wait()
            async with trio.open_nursery() as writers:  # the same keys from two nodes at once
                for store in (a, c):
                    for i in range(10):
                        writers.start_soon(
                            kv.execute, store, f"put x{i % 3} {store.channel.name}{i}"
                        )
            await kv.execute(c, "del shared")
            with trio.fail_after(30):
                while (got := [s.snapshot() for s in (a, b, c)]) != [got[0]] * 3 or "shared" in got[
                    0
                ]:
                    await trio.sleep(0.1)
            assert len(got[0]) == 63 and got[0]["b39"] == "39"
            assert (await kv.execute(c, "dump")).splitlines()[0] == "a0 = '0'"
        assert await kv.execute(a, "get nothing") == "None"
        assert "commands:" in await kv.execute(a, "bogus")


def test_replicated_kv_refuses_a_stack_without_sequencer(example: Any, capsys: Any) -> None:
    kv = example("replicated_kv")
    with pytest.raises(SystemExit) as exit_:
        kv.main(["--name", "A", "--stack", "udp"])
    assert exit_.value.code == 2
    assert "--stack: udp has no SEQUENCER" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        kv.main(["--name", "A", "--stack", "nope"])
    assert "--stack: unknown stack preset 'nope'" in capsys.readouterr().err


async def test_counter_rpc_demo_uses_every_response_mode(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig, example: Any
) -> None:
    rpc = example("counter_rpc")
    counters = {name: rpc.Counter() for name in "ABC"}
    shown: list[str] = []
    async with (
        open_channel("cnt", stack, "A", network=net, handlers=counters["A"].handlers()),
        open_channel("cnt", stack, "B", network=net, handlers=counters["B"].handlers()),
        open_channel("cnt", stack, "C", network=net, handlers=counters["C"].handlers()) as c,
    ):
        await rpc.wait_for_members(c, 3)
        results = await rpc.demo(c, shown.append)
    assert results["all"] == {"A": 1, "B": 1, "C": 1}
    assert results["first"][1] == 1
    assert len(results["majority"]) >= 2
    assert results["none"] == {"A": 11, "B": 11, "C": 11}
    assert results["timeout"] is True
    assert results["error"] == ("ValueError", "this counter refuses (value 11)")
    assert any("remote traceback" in line and "def fail" not in line for line in shown)
    assert any("in fail" in line for line in shown)


async def test_greeter_greets_the_group_and_prints_views_and_greetings(
    autojump_clock: Any,
    net: SimNetwork,
    stack: StackConfig,
    example: Any,
    capsys: Any,
) -> None:
    """examples/greeter.py (the app of ``triogroups launch``): each member multicasts a
    greeting every ``every`` seconds and prints the views and every greeting it delivers."""
    greeter = example("greeter")
    async with trio.open_nursery() as nursery:

        async def member(name: str) -> None:
            async with open_channel("greet", stack, name, network=net) as ch:
                await greeter.member(ch, "0.5")

        shown: list[str] = []

        def showing(line: str) -> Any:
            def check() -> bool:
                shown.extend(capsys.readouterr().out.splitlines())
                return line in shown

            return check

        nursery.start_soon(member, "A")
        await wait_until(showing("view: A"), timeout=30, interval=0.02)
        nursery.start_soon(member, "B")

        def seen() -> bool:
            shown.extend(capsys.readouterr().out.splitlines())
            return "[B] hello from B #2" in shown and "[A] hello from A #4" in shown

        await wait_until(seen, timeout=30, interval=0.02)
        nursery.cancel_scope.cancel()
    assert shown[0] == "view: A" and "view: A, B" in shown
    assert shown.count("[B] hello from B #2") == 2  # delivered to A and to B
