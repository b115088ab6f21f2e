"""CPU per message of each reliability protocol alone, sans-IO, beside a PASS layer.

    python benchmarks/bench_protocols.py [--batches 1500] [--size 1000] [--instructions]

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

``--instructions`` counts instructions instead of timing, with valgrind's
callgrind (it must be installed): each case runs in a child process under
valgrind once per phase (set-up only, then down, then down and codec, then
all three), and each phase's count is the difference to the one before it,
per message (``--batches`` defaults to 100 there; about 3 minutes on 2
cores). Instruction counts do not move with other load on the machine, so
they show what a change to the hot path saves where timings on a shared
2-core machine swing by 30%.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _callgrind import instructions, require_valgrind

from triogroups import Address, Message, View, ViewId
from triogroups.extend import WireCodec
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
    factory: Callable[[], Protocol],
    dest: Address | None,
    batches: int,
    payload: bytes,
    phases: int = 3,
) -> tuple[float, float, float]:
    """Seconds spent in down, in up and in the codec over ``batches`` batches.

    ``phases`` < 3 stops each batch after down (1) or the codec (2), and 0
    only builds the work: what `--instructions` counts phase by phase.
    """
    codec = WireCodec("bench", max_size=1 << 24)
    sender, receiver = _started(factory(), A), _started(factory(), B)
    work = [[Message(dest, payload) for _ in range(BATCH)] for _ in range(batches)]
    t_down = t_up = t_codec = 0.0
    for batch in work if phases else ():
        start = time.perf_counter()
        sender.down(batch, 0.0)
        out = _emitted(sender.take_down())
        sender.take_up()
        t_down += time.perf_counter() - start
        if phases < 2:
            continue
        start = time.perf_counter()
        msgs = codec.decode(codec.encode(dest, A, out)).messages
        t_codec += time.perf_counter() - start
        if phases < 3:
            continue
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


PHASES = ("setup", "down", "codec", "up")


def _cases(batches: int) -> list[tuple[str, Callable[[], Protocol], Address | None]]:
    capacity = batches * BATCH + 1
    return [
        ("PASS (unicast)", PassThrough, B),
        ("UNICAST3", Unicast3, B),
        ("PASS (multicast)", PassThrough, None),
        ("NAKACK2", Nakack2, None),
        ("MCAST", lambda: Mcast(capacity=capacity), None),
    ]


def _child(case: int, phase: str, batches: int, size: int) -> None:
    """Run ``batches`` batches up to and including ``phase``; what valgrind counts."""
    _, factory, dest = _cases(batches)[case]
    gc.disable()
    _one_run(factory, dest, batches, bytes(size), PHASES.index(phase))


def _instructions(case: int, phase: str, batches: int, size: int) -> int:
    args = ["--child", str(case), phase, "--batches", str(batches), "--size", str(size)]
    return instructions(__file__, args)


def _count_all(batches: int, size: int) -> None:
    require_valgrind()
    messages = batches * BATCH
    print(f"instructions per message, batches of {BATCH}, {size} B payloads, {batches} batches")
    print(f"{'protocol':<18}{'down':>8}{'up':>8}{'codec':>8}{'total':>8}  vs PASS")
    cases = _cases(batches)
    runs = [(case, phase) for case in range(len(cases)) for phase in PHASES]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        found = list(pool.map(lambda run: _instructions(*run, batches, size), runs))
    baseline = 0.0
    for case, (name, _, _) in enumerate(cases):
        counts = found[case * len(PHASES) : (case + 1) * len(PHASES)]
        down, codec, up = ((counts[i + 1] - counts[i]) / messages for i in range(3))
        total = down + up + codec
        if name.startswith("PASS"):
            baseline = total
        ratio = total / baseline
        print(f"{name:<18}{down:>8,.0f}{up:>8,.0f}{codec:>8,.0f}{total:>8,.0f}  {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description="sans-IO CPU per message per protocol")
    parser.add_argument("--batches", type=int, default=None, help="batches of 64 per run")
    parser.add_argument("--size", type=int, default=1000, help="payload bytes")
    parser.add_argument("--instructions", action="store_true", help="count with callgrind")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "PHASE"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        _child(int(opts.child[0]), opts.child[1], opts.batches, opts.size)
        return
    if opts.instructions:
        _count_all(opts.batches or 100, opts.size)
        return
    batches = opts.batches or 1500
    print(f"us per message, batches of {BATCH}, {opts.size} B payloads, best of {REPEAT}")
    print(f"{'protocol':<18}{'down':>7}{'up':>7}{'codec':>7}{'total':>7}")
    for name, factory, dest in _cases(batches):
        down, up, codec = measure(factory, dest, batches, opts.size)
        print(f"{name:<18}{down:>7.2f}{up:>7.2f}{codec:>7.2f}{down + up + codec:>7.2f}")


if __name__ == "__main__":
    main()
