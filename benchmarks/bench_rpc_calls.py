"""What one RPC round trip costs in Python work, with both members in one process.

    python benchmarks/bench_rpc_calls.py [--calls 4000] [--preset udp] [--profile | --instructions]

For diagnosis, not a headline figure (`bench_rpc.py` runs real member processes):
two channels with a shipped preset on loopback in one Trio run, one calling
``echo`` on the other with ``rpc.call_one`` and a 1 KB payload. With no other
process to wait for, the CPU time per round trip is the Python work of both
members (both stacks down and up, the RPC layer, the channel, the codec and the
socket calls), free of the wake-up latency that dominates the two-process
figure. ``--profile`` runs the timed calls under cProfile and prints the
Python function calls per round trip (an exact count, steady on a noisy
machine) and the functions that took the most time. ``--instructions`` counts
the machine instructions of a round trip with valgrind's callgrind instead of
timing it (valgrind must be installed): the script runs twice under valgrind,
with ``--calls`` and with twice as many, and the difference over ``--calls``
leaves out start-up, joining and the warm-up. The count moves by 1-3% between
runs whatever else the machine does (three runs: 1.009M, 1.024M and 1.036M per
round trip with the `udp` preset; the protocols' timers fire by wall time, and
a run under valgrind is ~50 times slower), steadier than a timing here for
changes of a few percent or more; it takes about half a minute for 500 calls.
It counts the compiled core (where the install has it) and the pure Python
(``TRIOGROUPS_PURE_PYTHON=1``) in the same run, and their ratio.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
import uuid

import trio
from _callgrind import instructions_by_form, print_header, print_row, require_valgrind
from bench_channel import preset_config

from triogroups import open_channel
from triogroups._ports import free_ports
from triogroups.runtime import tune_gc

WARMUP_CALLS = 500


async def measure(calls: int, preset: str, profile: bool) -> None:
    """Time ``calls`` round trips after a warm-up and print the figures."""
    config = preset_config(preset, 2, free_ports(12))
    cluster = f"rc-{uuid.uuid4().hex[:12]}"
    handlers = {"echo": lambda payload: payload}
    async with (
        open_channel(cluster, config, "a", handlers=handlers, handle_signals=False) as a,
        open_channel(cluster, config, "b", handlers=handlers, handle_signals=False) as b,
    ):
        while len(a.view) < 2 or len(b.view) < 2:
            await trio.sleep(0.05)
        payload = bytes(1000)
        for _ in range(WARMUP_CALLS):
            await a.rpc.call_one("echo", payload, to=b.address)
        profiler = cProfile.Profile() if profile else None
        began, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        for _ in range(calls):
            await a.rpc.call_one("echo", payload, to=b.address)
        if profiler is not None:
            profiler.disable()
        wall = (time.perf_counter() - began) / calls * 1e6
        cpu_us = (time.process_time() - cpu) / calls * 1e6
    print(f"{preset}: {calls} round trips, {wall:.0f} us wall and {cpu_us:.0f} us CPU each")
    if profiler is not None:
        stats = pstats.Stats(profiler)
        total = sum(row[1] for row in stats.stats.values())  # type: ignore[attr-defined]
        print(f"Python function calls per round trip: {total / calls:.0f} (profiled)")
        stats.sort_stats("tottime").print_stats(25)


def count_instructions(calls: int, preset: str) -> None:
    """Print the instructions per round trip of each form of the compiled core, one run
    after the other (see `instructions_by_form`)."""
    require_valgrind()
    per = instructions_by_form(__file__, lambda n: ["--calls", str(n), "--preset", preset], calls)
    print_header(f"instructions per round trip ({calls} calls)", "preset", 10)
    print_row(preset, per, ",.0f", 10)


def main() -> None:
    parser = argparse.ArgumentParser(description="Python work per RPC round trip, one process")
    parser.add_argument("--calls", type=int, default=4000, help="timed round trips")
    parser.add_argument("--preset", default="udp", help="a shipped preset (udp, tcp, ...)")
    parser.add_argument("--profile", action="store_true", help="under cProfile: call counts")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions with callgrind"
    )
    opts = parser.parse_args()
    if opts.calls < 1:
        parser.error("--calls must be at least 1")
    if opts.profile and opts.instructions:
        parser.error("--profile and --instructions measure different things: choose one")
    if opts.instructions:
        count_instructions(opts.calls, opts.preset)
        return
    tune_gc()
    trio.run(measure, opts.calls, opts.preset, opts.profile)


if __name__ == "__main__":
    main()
