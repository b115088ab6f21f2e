"""What hosting layers as actors costs, per message.

Runs messages down through 8 PASS layers to a transport that reflects every
batch back up, then up through the 8 layers again, three ways in one run:

- the real `Stack`, one message per channel item;
- the real `Stack`, batches of 100 messages per item;
- the same handler calls (``down``/``take_down`` ... ``up``/``take_up``) made
  in a plain Python loop, batches of 100: the floor.

Reports messages per second and each stack run's cost per message as a ratio
to the plain loop. Usage: ``python benchmarks/bench_stack.py [--messages N]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import trio

from triogroups import Message, Stack, StackConfig
from triogroups.events import Item
from triogroups.runtime import tune_gc
from triogroups.transports.base import Transport, UpChannel

LAYERS = 8


class _Reflector(Transport):
    """A transport that sends every batch straight back up (no I/O).

    Like a real transport's bundler it takes everything queued per wake-up.
    """

    name = "BENCH_REFLECTOR"

    async def serve(
        self,
        down: trio.MemoryReceiveChannel[Item],
        up: UpChannel,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        async for item in down:
            batch = list(item) if isinstance(item, list) else []
            while True:
                try:
                    more = down.receive_nowait()
                except trio.WouldBlock:
                    break
                if isinstance(more, list):
                    batch.extend(more)
            await up.send(batch)


def _config() -> StackConfig:
    return StackConfig.of("BENCH_REFLECTOR", *["PASS"] * LAYERS)


async def _through_stack(total: int, batch: int) -> float:
    stack = Stack(_config(), "bench", "A", channel_size=16)
    payload = b"x" * 100
    async with trio.open_nursery() as nursery:
        await nursery.start(stack.run)

        async def produce() -> None:
            for _ in range(total // batch):
                await stack.send([Message(None, payload) for _ in range(batch)])

        start = time.perf_counter()
        nursery.start_soon(produce)
        received = 0
        while received < total:
            item = await stack.receive()
            if type(item) is list:
                received += len(item)
        elapsed = time.perf_counter() - start
        nursery.cancel_scope.cancel()
    return elapsed


def _plain_loop(total: int, batch: int) -> float:
    protos = _config().build()[1:]
    from triogroups import Address

    me = Address.random("A")
    for p in protos:
        p.start(me, "bench", 0.0)
    payload = b"x" * 100
    start = time.perf_counter()
    received = 0
    for _ in range(total // batch):
        items: list[Any] = [[Message(None, payload) for _ in range(batch)]]
        for p in reversed(protos):
            for item in items:
                p.down(item, 0.0)
            items = p.take_down()
        for p in protos:
            for item in items:
                p.up(item, 0.0)
            items = p.take_up()
        received += sum(len(i) for i in items)
    elapsed = time.perf_counter() - start
    assert received == total
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5, help="best of N runs per mode")
    args = parser.parse_args()
    n = args.messages
    plain = batched = single = float("inf")
    rows: list[tuple[str, float]] = []
    for gc_label in ("default gc", "tune_gc()"):
        if gc_label == "tune_gc()":
            tune_gc()
        plain = batched = single = float("inf")
        for _ in range(args.repeat):  # interleaved, so machine noise hits every mode alike
            plain = min(plain, _plain_loop(n, 100))
            batched = min(batched, trio.run(_through_stack, n, 100))
            single = min(single, trio.run(_through_stack, n // 10, 1) * 10)
        rows += [
            (f"plain loop, batches of 100 ({gc_label})", plain),
            (f"stack, batches of 100 ({gc_label})", batched),
            (f"stack, 1 message per item ({gc_label})", single),
        ]
    print(
        f"{LAYERS}-layer PASS stack, down and back up, {n} messages of 100 B, "
        f"best of {args.repeat}; ratio to the plain loop under the same gc settings"
    )
    print(f"{'mode':<46}{'msgs/s':>12}{'us/msg':>9}{'x plain':>9}")
    for i, (label, secs) in enumerate(rows):
        base = rows[i - i % 3][1]
        print(f"{label:<46}{n / secs:>12,.0f}{secs / n * 1e6:>9.2f}{secs / base:>9.2f}")


if __name__ == "__main__":
    main()
