"""Lock and counter round trips beside a plain group RPC round trip, in one run.

    python benchmarks/bench_locks.py [--ops 1000] [--preset udp] [--members 3] [--callers 8]

``--members`` channels with a shipped preset on loopback, in one process and one Trio
run (as `bench_rpc_calls`: the figures are the Python work of every member plus the
loopback, without the wake-up latency of separate processes), each running the lock
and the counter service (`open_lock_service`, `open_counter_service`, one backup).
The first member is the coordinator; the second asks, one operation at a time:

- ``rpc``: ``rpc.call_one("echo")`` to the coordinator, the baseline: one round trip;
- ``lock``: ``async with locks.lock("x")``, acquire and release: two round trips to
  the coordinator, each answered after its copy reached the backup;
- ``counter``: ``counter.add_and_get(1)``: one round trip plus the copy to the backup.

Then ``--callers`` tasks on every member but the coordinator increment one counter at
once: increments per second of the group. Each phase is timed after a warm-up; CPU
is this process's user + system time per operation.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import trio
from bench_channel import cpu_seconds, preset_config

from triogroups import Channel, open_channel, open_counter_service, open_lock_service
from triogroups._ports import free_ports
from triogroups.runtime import tune_gc

WARMUP = 100


async def timed(ops: int, one: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Mean wall and CPU microseconds of ``one()`` over ``ops`` calls after a warm-up."""
    for _ in range(WARMUP):
        await one()
    began, cpu = time.perf_counter(), cpu_seconds()
    for _ in range(ops):
        await one()
    return (time.perf_counter() - began) / ops * 1e6, (cpu_seconds() - cpu) / ops * 1e6


async def measure(ops: int, preset: str, members: int, callers: int) -> None:
    config = preset_config(preset, members, free_ports(12))
    cluster = f"bl-{uuid.uuid4().hex[:12]}"
    handlers = {"echo": lambda payload: payload}
    async with AsyncExitStack() as stack:
        chans: list[Channel] = []
        locks, counters = [], []
        for i in range(members):
            ch = await stack.enter_async_context(
                open_channel(cluster, config, f"m{i}", handlers=handlers, handle_signals=False)
            )
            chans.append(ch)
        while any(len(ch.view) < members for ch in chans):
            await trio.sleep(0.05)
        for ch in chans:
            locks.append(await stack.enter_async_context(open_lock_service(ch)))
            counters.append(await stack.enter_async_context(open_counter_service(ch)))
        coord, asker = chans[0], chans[1]
        assert coord.view.coord == coord.address
        payload = bytes(100)
        rows = []

        async def rpc() -> None:
            await asker.rpc.call_one("echo", payload, to=coord.address)

        async def lock() -> None:
            async with locks[1].lock("x"):
                pass

        counter = counters[1].counter("n")

        async def add() -> None:
            await counter.add_and_get(1)

        for label, one in (("rpc round trip", rpc), ("lock+unlock", lock), ("add_and_get", add)):
            wall, cpu = await timed(ops, one)
            rows.append((label, wall, cpu))
        base = rows[0][1]
        print(f"{preset}, {members} members in one process, {ops} operations each:")
        print(f"{'operation':<16}{'us wall':>10}{'us CPU':>10}{'x rpc':>8}{'per s':>10}")
        for label, wall, cpu in rows:
            print(f"{label:<16}{wall:>10.0f}{cpu:>10.0f}{wall / base:>8.2f}{1e6 / wall:>10.0f}")

        shared = [c.counter("shared") for c in counters[1:]]
        each = max(1, ops // (len(shared) * callers))

        async def increments(c: object) -> None:
            for _ in range(each):
                await c.add_and_get(1)  # type: ignore[attr-defined]

        began, cpu0 = time.perf_counter(), cpu_seconds()
        async with trio.open_nursery() as nursery:
            for c in shared:
                for _ in range(callers):
                    nursery.start_soon(increments, c)
        wall = time.perf_counter() - began
        total = each * len(shared) * callers
        final = await counters[0].counter("shared").get()
        print(
            f"{callers} callers on each of {len(shared)} members: {total / wall:.0f} increments/s"
            f" ({(cpu_seconds() - cpu0) / total * 1e6:.0f} us CPU each; final {final} of {total})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="lock and counter round trips beside RPC")
    parser.add_argument("--ops", type=int, default=1000, help="timed operations per phase")
    parser.add_argument("--preset", default="udp", help="a shipped preset (udp, tcp, ...)")
    parser.add_argument("--members", type=int, default=3, help="members (at least 2)")
    parser.add_argument("--callers", type=int, default=8, help="concurrent callers per member")
    opts = parser.parse_args()
    if opts.ops < 1:
        parser.error("--ops must be at least 1")
    if opts.members < 2:
        parser.error("--members must be at least 2")
    if opts.callers < 1:
        parser.error("--callers must be at least 1")
    tune_gc()
    trio.run(measure, opts.ops, opts.preset, opts.members, opts.callers)


if __name__ == "__main__":
    main()
