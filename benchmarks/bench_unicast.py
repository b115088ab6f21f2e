"""UNICAST3 between two member processes, beside the transport alone, in one run.

    python benchmarks/bench_unicast.py [--seconds 2] [--repeat 3] [--size 1000]
                                       [--kinds udp,tcp] [--rtt-seconds 2]

For UDP and TCP, two member processes (see `_members`) each run a `Stack`:

- *transport*: the transport with a PASS layer above it (a stack needs a
  layer above its transport), no reliability and no flow control: what a
  stack costs at all;
- *UNICAST3+UFC*: the transport, UNICAST3 and UFC (the preset order). UFC
  is the flow control that keeps the sender from running ahead of the
  receiver: over UDP, without it, the receiver's socket buffer overflows
  and UNICAST3 retransmits in storms (~20k msgs/s);
- *UNICAST3* (TCP only): UNICAST3 alone, since the TCP transport pushes back
  on its own: what reliability itself costs, without UFC's credit round
  trips.

Both use the same member processes, the same batches (64 messages per
`Stack.send`) and 1 KB payloads. One-way: the sender sends for ``--seconds``,
the receiver counts what is delivered; the rate is messages per second
between its first and its last delivery (over UDP the transport alone may
lose messages; what was lost is not counted: the delivered column says how
much arrived). Round trips: one member sends one message, the other answers
each delivery with one message back, for ``--rtt-seconds``; p50 and p99 in
microseconds (the first 20 round trips are left out: connection set-up).
Runs are interleaved and repeated; the table shows medians and each
stack's ratio to the transport alone. ``busy s/r`` is each side's CPU time
over the wall time of the one-way run (sender while sending, receiver
between its first and last delivery): near 100% on both means the run is
CPU-bound; two sides near 50% on a 2-core machine means they shared one
core with other load. ``CPU us s/r`` is each side's CPU time per message
(sender per message sent, receiver per message delivered): steadier than
msgs/s on a busy machine, and what a stack costs.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from typing import Any

from _members import run_group

from triogroups._ports import free_ports

BATCH = 64  # messages per Stack.send, as bench_transport passes to the transport
IDLE = 1.5  # the receiver stops this long after its last delivery
WARMUP = 20  # round trips left out of the percentiles
BUFFER = 4 << 20  # UDP receive buffers: what the kernel grants here without tuning


def _transport(kind: str) -> tuple[str, dict[str, Any]]:
    if kind == "udp":
        return "UDP", {
            "bind_port": 0,
            "mcast_port": free_ports(),
            "ip_ttl": 0,
            "ucast_recv_buf_size": BUFFER,
            "mcast_recv_buf_size": BUFFER,
        }
    return "TCP", {"bind_port": 0}


STACKS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "transport": [("PASS", {})],
    "UNICAST3": [("UNICAST3", {})],
    "UNICAST3+UFC": [("UNICAST3", {}), ("UFC", {})],
}


def _stacks(kind: str) -> list[str]:
    """UDP needs UFC (alone, UNICAST3 retransmits in storms); TCP also runs without it."""
    if kind == "udp":
        return ["transport", "UNICAST3+UFC"]
    return list(STACKS)


def _specs(kind: str, stack: str, roles: tuple[str, str], opts: Any) -> list[dict[str, Any]]:
    cluster = f"bench-{uuid.uuid4().hex[:12]}"
    layers = [_transport(kind), *STACKS[stack]]
    seconds = opts.rtt_seconds if roles[0] == "ping" else opts.seconds
    return [
        {
            "label": f"{kind}-{stack}",
            "layers": layers,
            "cluster": cluster,
            "name": name,
            "role": role,
            "size": opts.size,
            "batch": BATCH,
            "seconds": seconds,
            "idle": IDLE,
        }
        for name, role in zip(("A", "B"), roles, strict=True)
    ]


def one_way(
    kind: str, stack: str, opts: Any
) -> tuple[float, float, tuple[float, float, float, float]]:
    """Messages per second delivered at the receiver, the fraction of those sent, and
    per side how busy it was (CPU time over wall time) and its CPU microseconds per
    message: (sender busy, receiver busy, sender us, receiver us)."""
    sender, receiver = run_group(_specs(kind, stack, ("send", "recv"), opts))
    seconds = max(receiver["seconds"], 1e-9)
    rate = receiver["count"] / seconds
    cpu = (
        sender["busy"],
        receiver["cpu_seconds"] / seconds,
        sender["cpu_seconds"] / max(sender["sent"], 1) * 1e6,
        receiver["cpu_seconds"] / max(receiver["count"], 1) * 1e6,
    )
    return rate, receiver["count"] / max(sender["sent"], 1), cpu


def round_trips(kind: str, stack: str, opts: Any) -> list[float]:
    """Round-trip times in microseconds, after the warm-up."""
    pinger, _ = run_group(_specs(kind, stack, ("ping", "pong"), opts))
    rtts: list[float] = pinger["rtts_us"][WARMUP:]
    return rtts


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description="UNICAST3 vs transport-only stack, two processes")
    parser.add_argument("--seconds", type=float, default=2.0, help="sending time per one-way run")
    parser.add_argument("--rtt-seconds", type=float, default=2.0, help="ping-pong time per run")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs; medians shown")
    parser.add_argument("--size", type=int, default=1000, help="payload bytes")
    parser.add_argument("--kinds", default="udp,tcp")
    opts = parser.parse_args()
    rows = []
    for kind in opts.kinds.split(","):
        stacks = _stacks(kind)
        rates: dict[str, list[float]] = {s: [] for s in stacks}
        shares: dict[str, list[float]] = {s: [] for s in stacks}
        busy: dict[str, list[tuple[float, float, float, float]]] = {s: [] for s in stacks}
        p50: dict[str, list[float]] = {s: [] for s in stacks}
        p99: dict[str, list[float]] = {s: [] for s in stacks}
        for _ in range(opts.repeat):  # interleaved, so a noisy moment hits every stack
            for stack in stacks:
                rate, share, cpu = one_way(kind, stack, opts)
                rates[stack].append(rate)
                shares[stack].append(share)
                busy[stack].append(cpu)
            for stack in stacks:
                rtts = round_trips(kind, stack, opts)
                p50[stack].append(_percentile(rtts, 0.50))
                p99[stack].append(_percentile(rtts, 0.99))
        base = statistics.median(rates["transport"])
        for stack in stacks:
            rate = statistics.median(rates[stack])
            rows.append(
                (
                    kind.upper(),
                    stack,
                    rate,
                    rate / base,
                    statistics.median(shares[stack]),
                    [statistics.median(b[i] for b in busy[stack]) for i in range(4)],
                    statistics.median(p50[stack]),
                    statistics.median(p99[stack]),
                    [round(r) for r in rates[stack]],
                )
            )
    print(
        f"\n{opts.size} B messages, batches of {BATCH}; medians of {opts.repeat} interleaved runs"
    )
    print(
        f"{'':<4} {'stack':<12} {'msgs/s':>9} {'ratio':>6} {'delivered':>9} {'busy s/r':>9} "
        f"{'CPU us s/r':>11} {'rtt p50 us':>11} {'rtt p99 us':>11}   one-way runs"
    )
    for kind, stack, rate, ratio, share, (s_busy, r_busy, s_us, r_us), r50, r99, runs in rows:
        print(
            f"{kind:<4} {stack:<12} {rate:>9,.0f} {ratio:>5.2f}x {share:>9.1%} "
            f"{s_busy:>4.0%}/{r_busy:<4.0%} {s_us:>5.2f}/{r_us:<5.2f} "
            f"{r50:>11,.0f} {r99:>11,.0f}   {runs}"
        )


if __name__ == "__main__":
    main()
