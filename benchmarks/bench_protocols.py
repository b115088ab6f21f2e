"""CPU per message of each reliability protocol alone, sans-IO, beside a PASS layer.

    python benchmarks/bench_protocols.py [--batches 1500] [--size 1000]

Where the per-message cost of a reliable stack goes, without processes,
sockets or Trio: for PASS (the baseline: a layer that only hands batches on),
UNICAST3, NAKACK2 and MCAST, two protocol objects of a two-member view. The
sender's ``down`` numbers batches of 64 messages of ``--size`` bytes (to the
other member for UNICAST3, to the group for the others); what it emits is
encoded and decoded with the wire codec, and the receiver's ``up`` takes
those batches in order. The table shows microseconds per message for
``down``, ``up`` and the codec (encode and decode of the messages the
sender emitted, headers included), best of 7 runs with the collector off.
Nothing is acknowledged, so windows only grow (MCAST's capacity is set above
what is sent): this measures the per-message path, not purging.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

from triogroups import Address, Message, View, ViewId, WireCodec
from triogroups.protocol import Protocol
from triogroups.protocols.mcast import Mcast
from triogroups.protocols.nakack2 import Nakack2
from triogroups.protocols.passthrough import PassThrough
from triogroups.protocols.unicast3 import Unicast3

BATCH = 64
REPEAT = 7
A, B = Address(1, "A"), Address(2, "B")
VIEW = View(ViewId(1, A), [A, B])


def _started(proto: Protocol, me: Address) -> Protocol:
    proto.start(me, "bench", 0.0)
    proto.view_changed(VIEW, 0.0)
    proto.take_down()
    proto.take_up()
    return proto


def _emitted(items: list[Any]) -> list[Message]:
    return [m for item in items if type(item) is list for m in item]


def _one_run(
    factory: Callable[[], Protocol], dest: Address | None, batches: int, payload: bytes
) -> tuple[float, float, float]:
    """Seconds spent in down, in up and in the codec over ``batches`` batches."""
    codec = WireCodec("bench", max_size=1 << 24)
    sender, receiver = _started(factory(), A), _started(factory(), B)
    work = [[Message(dest, payload) for _ in range(BATCH)] for _ in range(batches)]
    t_down = t_up = t_codec = 0.0
    for batch in work:
        start = time.perf_counter()
        sender.down(batch, 0.0)
        out = _emitted(sender.take_down())
        sender.take_up()
        t_down += time.perf_counter() - start
        start = time.perf_counter()
        msgs = codec.decode(codec.encode(dest, A, out)).messages
        t_codec += time.perf_counter() - start
        start = time.perf_counter()
        receiver.up(msgs, 0.0)
        receiver.take_up()
        receiver.take_down()
        t_up += time.perf_counter() - start
    return t_down, t_up, t_codec


def measure(
    factory: Callable[[], Protocol], dest: Address | None, batches: int, size: int
) -> tuple[float, float, float]:
    """Best-of-``REPEAT`` microseconds per message: down, up, codec."""
    payload = bytes(size)
    messages = batches * BATCH
    best = [float("inf")] * 3
    for _ in range(REPEAT):
        gc.collect()
        gc.disable()
        try:
            times = _one_run(factory, dest, batches, payload)
        finally:
            gc.enable()
        best = [min(b, t / messages * 1e6) for b, t in zip(best, times, strict=True)]
    return best[0], best[1], best[2]


def main() -> None:
    parser = argparse.ArgumentParser(description="sans-IO CPU per message per protocol")
    parser.add_argument("--batches", type=int, default=1500, help="batches of 64 per run")
    parser.add_argument("--size", type=int, default=1000, help="payload bytes")
    opts = parser.parse_args()
    capacity = opts.batches * BATCH + 1
    cases: list[tuple[str, Callable[[], Protocol], Address | None]] = [
        ("PASS (unicast)", PassThrough, B),
        ("UNICAST3", Unicast3, B),
        ("PASS (multicast)", PassThrough, None),
        ("NAKACK2", Nakack2, None),
        ("MCAST", lambda: Mcast(capacity=capacity), None),
    ]
    print(f"us per message, batches of {BATCH}, {opts.size} B payloads, best of {REPEAT}")
    print(f"{'protocol':<18}{'down':>7}{'up':>7}{'codec':>7}{'total':>7}")
    for name, factory, dest in cases:
        down, up, codec = measure(factory, dest, opts.batches, opts.size)
        print(f"{name:<18}{down:>7.2f}{up:>7.2f}{codec:>7.2f}{down + up + codec:>7.2f}")


if __name__ == "__main__":
    main()
