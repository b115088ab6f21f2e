"""Group RPC with every response mode: each member keeps a counter, any member calls them all.

Run members in several terminals on this host; the last one runs the demo::

    python examples/counter_rpc.py --name A
    python examples/counter_rpc.py --name B
    python examples/counter_rpc.py --name C --members 3 --demo

The demo calls ``incr`` on every member (mode "all"), reads one counter (the
first to answer), a majority of them, increments without waiting ("none"),
shows a timeout, and shows a remote exception coming back with its type and
the remote traceback. Members without ``--demo`` serve until Ctrl-D.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import trio

from triogroups import Channel, open_channel


class Counter:
    """One member's counter and the RPC methods it offers."""

    def __init__(self) -> None:
        self.value = 0

    def incr(self, n: int) -> int:
        self.value += n
        return self.value

    def get(self) -> int:
        return self.value

    async def slow_get(self, delay: float) -> int:
        await trio.sleep(delay)
        return self.value

    def fail(self) -> None:
        raise ValueError(f"this counter refuses (value {self.value})")

    def handlers(self) -> dict[str, Callable[..., Any]]:
        return {
            "incr": self.incr,
            "get": self.get,
            "slow_get": self.slow_get,
            "fail": self.fail,
        }


async def wait_for_members(ch: Channel, count: int) -> None:
    async for view in ch.views():
        if len(view) >= count:
            return


async def demo(ch: Channel, show: Callable[[str], None]) -> dict[str, Any]:
    """One call in every response mode; returns what each call gave, by mode."""
    names = {member: member.name for member in ch.view.members}
    results: dict[str, Any] = {}

    rsps = await ch.rpc.call("incr", 1)  # mode "all"
    results["all"] = {names[m]: v for m, v in rsps.results().items()}
    show(f"incr(1) on all: {results['all']}")

    rsps = await ch.rpc.call("get", mode="first")
    first = rsps.first()
    assert first is not None
    results["first"] = (names[first.member], first.value)
    show(f"get() first answer: {results['first'][0]} says {first.value}")

    rsps = await ch.rpc.call("get", mode="majority")
    results["majority"] = sorted(names[m] for m in rsps.received)
    show(f"get() from a majority: {len(rsps.received)} of {len(rsps)} answered")

    await ch.rpc.call("incr", 10, mode="none")
    rsps = await ch.rpc.call("get")  # my requests run in the order I sent them
    results["none"] = {names[m]: v for m, v in rsps.results().items()}
    show(f"incr(10) sent without waiting; a get() after it reads {results['none']}")

    rsps = await ch.rpc.call("slow_get", 5.0, timeout=1.0, oob=True)
    results["timeout"] = rsps.timed_out
    show(f"slow_get(5) with a 1 s timeout: timed out = {rsps.timed_out}")

    other = next((m for m in ch.view.members if m != ch.address), ch.address)
    try:
        await ch.rpc.call_one("fail", to=other)
    except ValueError as exc:
        results["error"] = (type(exc).__name__, str(exc))
        remote = getattr(exc.__cause__, "traceback", "")
        show(f"fail() on {other.name} raised {type(exc).__name__}: {exc}")
        show("remote traceback:\n" + remote)
    return results


async def run(cluster: str, stack: str, name: str, members: int, run_demo: bool) -> None:
    counter = Counter()
    async with open_channel(cluster, stack, name, handlers=counter.handlers()) as ch:
        print(f"* {name} serves a counter in {cluster}", flush=True)
        with trio.fail_after(60):
            await wait_for_members(ch, members)
        if run_demo:
            await demo(ch, lambda text: print(text, flush=True))
            return
        await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="this member's name")
    parser.add_argument("--stack", default="udp", help="preset name or TOML file (default: udp)")
    parser.add_argument("--cluster", default="counters", help="group name (default: counters)")
    parser.add_argument("--members", type=int, default=1, help="wait for this many members")
    parser.add_argument("--demo", action="store_true", help="run the demo calls, then leave")
    args = parser.parse_args(argv)
    trio.run(run, args.cluster, args.stack, args.name, args.members, args.demo)


if __name__ == "__main__":
    main()
