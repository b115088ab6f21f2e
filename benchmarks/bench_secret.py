"""Multicast throughput with and without shared-secret mode, in one run (issue 18).

    python benchmarks/bench_secret.py [--seconds 3] [--repeat 3] [--members 3]
                                      [--size 1000] [--stacks udp-nakack2,tcp-nakack2]

The runs of `bench_multicast` (three member processes, each multicasting
batches of 64 messages of 1 KB and counting every delivery), each stack once
plain and once sealed (the transport's ``secret_file`` set, so every
datagram or frame is AES-GCM encrypted and authenticated), interleaved and
repeated; medians are shown. The ratio is sealed over plain msgs/s per
member (target: at least 0.70); CPU per delivered message is the steadier
figure on a busy machine.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from typing import Any

from bench_multicast import _cpu_per_message, _summary, run


def main() -> None:
    parser = argparse.ArgumentParser(description="multicast throughput, plain vs sealed")
    parser.add_argument("--seconds", type=float, default=3.0, help="sending time per run")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs; medians shown")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--size", type=int, default=1000, help="payload bytes")
    parser.add_argument("--stacks", default="udp-nakack2,tcp-nakack2")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        key_file = os.path.join(tmp, "cluster.key")
        with open(key_file, "wb") as f:
            f.write(os.urandom(32))
        modes: dict[str, dict[str, Any]] = {"plain": {}, "sealed": {"secret_file": key_file}}
        rates: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        for _ in range(opts.repeat):
            for stack in opts.stacks.split(","):
                for mode, props in modes.items():
                    results = run(stack, opts, transport_props=props)
                    rates.setdefault((stack, mode), []).append(_summary(results)[0])
                    cpus.setdefault((stack, mode), []).append(_cpu_per_message(results))
    print(
        f"\n{opts.members} members each multicasting {opts.size} B messages; "
        f"medians of {opts.repeat} interleaved runs"
    )
    print(f"{'stack':<14} {'mode':<7} {'msgs/s/member':>13} {'ratio':>6} {'CPU us/msg':>10}   runs")
    for stack in opts.stacks.split(","):
        plain = statistics.median(rates[(stack, "plain")])
        for mode in modes:
            rate = statistics.median(rates[(stack, mode)])
            print(
                f"{stack:<14} {mode:<7} {rate:>13,.0f} {rate / plain:>5.2f}x "
                f"{statistics.median(cpus[(stack, mode)]):>10.2f}   "
                f"{[round(r) for r in rates[(stack, mode)]]}"
            )


if __name__ == "__main__":
    main()
