"""The cost of diagnostics: the udp preset's multicast with DIAG off, on, and on while
probed, in one run; and a probe's round trip for 3 and 8 members.

    python benchmarks/bench_diag.py [--members 3] [--seconds 3] [--repeat 3] [--size 1000]
                                    [--rtt-members 3,8] [--probes 20] [--skip-throughput]

Throughput: `bench_channel` runs its udp preset members (each its own
process, ``await ch.send`` as fast as the API lets it, every delivery
counted) three ways, interleaved: ``UDP.enable_diagnostics=false``, ``true``
(the default: the stack host listens for probes on a socket of its own), and
``true`` with a probe of every member once a second during the run (the
driver asks, each member builds and sends its whole report). Each runs on
a diagnostics port of its own. The table shows the lowest member's msgs/s
and the mean CPU per delivered message (steadier than msgs/s on a shared
machine), medians, and their ratio to the run with diagnostics off.

Round trip: N member processes started by the supervisor join one udp
cluster; `probe` (``expect=N``) returns once all N answered: the time from
sending the request to the last answer, median and 90th percentile of
``--probes`` probes, and the size of one answer.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import uuid
from typing import Any

import bench_channel
import trio

from triogroups import Channel, StackConfig, open_process_group, probe
from triogroups._ports import free_ports

MODES = ("off", "on", "probed")


def _throughput_run(mode: str, opts: Any) -> dict[str, float]:
    port = free_ports(9)
    settings = [
        f"UDP.diagnostics_port={port}",
        f"UDP.enable_diagnostics={'false' if mode == 'off' else 'true'}",
    ]
    run_opts = bench_channel.run_options(
        members=opts.members, size=opts.size, seconds=opts.seconds, set=settings
    )
    stop = threading.Event()
    probes: list[int] = []
    prober = threading.Thread(target=_probe_loop, args=(port, opts.members, stop, probes))
    if mode == "probed":
        prober.start()
    try:
        results = bench_channel.run_channel("udp", run_opts)
    finally:
        stop.set()
        if mode == "probed":
            prober.join()
    row = bench_channel.summary(results)
    row["probes"] = sum(probes)
    return row


def _probe_loop(port: int, members: int, stop: threading.Event, answers: list[int]) -> None:
    """Probe every member once a second until ``stop`` (answers counted)."""
    while not stop.wait(1.0):
        got = trio.run(lambda: probe(diagnostics_port=port, tcp=False, expect=members, timeout=0.9))
        answers.append(len(got))


def throughput(opts: Any) -> None:
    rows: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    load = os.getloadavg()
    for _ in range(opts.repeat):  # interleaved: a noisy moment hits every mode
        for mode in MODES:
            rows[mode].append(_throughput_run(mode, opts))
    print(
        f"\nudp preset, {opts.members} members each sending {opts.size} B multicasts for "
        f"{opts.seconds:g} s; medians of {opts.repeat} interleaved runs; load before "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores"
    )
    print(
        f"{'diagnostics':<12} {'msgs/s/member':>13} {'ratio':>6} {'CPU us/msg':>10} "
        f"{'ratio':>6} {'answers':>7}   runs (msgs/s; CPU us/msg)"
    )
    base_rate = statistics.median(r["rate"] for r in rows["off"])
    base_cpu = statistics.median(r["cpu_us"] for r in rows["off"])
    for mode in MODES:
        rate = statistics.median(r["rate"] for r in rows[mode])
        cpu = statistics.median(r["cpu_us"] for r in rows[mode])
        answers = sum(int(r["probes"]) for r in rows[mode])
        print(
            f"{mode:<12} {rate:>13,.0f} {rate / base_rate:>5.2f}x {cpu:>10.2f} "
            f"{cpu / base_cpu:>5.2f}x {answers:>7}   "
            f"{[round(r['rate']) for r in rows[mode]]}; "
            f"{[round(r['cpu_us'], 1) for r in rows[mode]]}"
        )


async def idle(ch: Channel) -> None:
    """The member app of the round-trip runs: stay in the group."""
    await trio.sleep_forever()


def _quiet(name: str, line: str) -> None:
    """Member output stays with the group."""


async def round_trip(n: int, probes: int) -> tuple[list[float], int]:
    port = free_ports(9)
    config = StackConfig.preset("udp").configure(
        "UDP", mcast_port=free_ports(), diagnostics_port=port
    )
    cluster = f"bd-{uuid.uuid4().hex[:8]}"
    names = [f"M{i}" for i in range(n)]
    times: list[float] = []
    size = 0
    async with open_process_group(
        idle, n, stack=config, cluster=cluster, names=names, output=_quiet
    ) as group:
        await group.wait_for_view(n)
        for _ in range(probes + 2):
            start = time.perf_counter()
            answers = await probe(
                cluster=cluster, diagnostics_port=port, tcp=False, expect=n, timeout=10
            )
            elapsed = time.perf_counter() - start
            if len(answers) != n:
                raise RuntimeError(f"{len(answers)} of {n} members answered")
            times.append(elapsed)
            size = len(repr(answers[0]))
            await trio.sleep(0.05)
    return times[2:], size  # the first two warm up the members' codecs


def round_trips(opts: Any) -> None:
    print(f"\nprobe round trip over loopback multicast (udp preset), {opts.probes} probes")
    print(f"{'members':>7} {'median ms':>9} {'p90 ms':>7} {'max ms':>7} {'answer ~B':>9}")
    for n in (int(x) for x in opts.rtt_members.split(",")):
        times, size = trio.run(round_trip, n, opts.probes)
        ms = sorted(t * 1000 for t in times)
        p90 = ms[int(0.9 * (len(ms) - 1))]
        print(f"{n:>7} {statistics.median(ms):>9.1f} {p90:>7.1f} {ms[-1]:>7.1f} {size:>9,}")


def main() -> None:
    parser = argparse.ArgumentParser(description="the cost of diagnostics")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="sending time per run")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs; medians shown")
    parser.add_argument("--size", type=int, default=1000, help="payload bytes (at least 8)")
    parser.add_argument("--rtt-members", default="3,8", help="cluster sizes for round trips")
    parser.add_argument("--probes", type=int, default=20, help="probes per cluster size")
    parser.add_argument("--skip-throughput", action="store_true")
    opts = parser.parse_args()
    if not opts.skip_throughput:
        throughput(opts)
    round_trips(opts)


if __name__ == "__main__":
    main()
