"""Spark-sized groups on paper: N members of the ``spark`` preset on the simulated network.

    python benchmarks/bench_group_scale.py [--sizes 8,16,64,256] [--steady 20]
        [--crash-sizes 8,16,64,256] [--seed 1] [--delay 0.001]

What changes when a barrier stage has 64 or 256 executors, measured on virtual time in one
process (`triogroups.testing.open_cluster`), so no machine needs that many slots. Every
member runs the shipped ``spark`` preset with TCP swapped for the simulated network's
lossless endpoint (multicast as TCP sends it: one copy to each member of the view), and
the stack is what a Spark task builds from its ``allGather`` (the task's own `_stack_for`:
TCPPING lists all N endpoints, GMS takes all N as pending joins). All N members connect
at the same virtual instant, as the tasks of a stage do once the ``allGather`` returns.
Each datagram takes ``--delay`` seconds.

Per N the table shows:

- **formation**: virtual time from the connects to the view of all N installed at every
  member, and the datagrams and bytes on the network until then, with the largest VIEW,
  JOIN_RSP and STABLE digest seen (their size grows with N);
- **steady state**, after the formation has settled (a warm-up of ``--warmup`` virtual
  seconds) and with no application traffic: datagrams per member per virtual second, split
  by what they carry (FD_ALL3 heartbeats, STABLE, MERGE3 INFO with the TCPPING discovery
  that precedes each INFO over TCP, and the rest: mostly NAKACK2's HIGHEST_SEQNO, which
  the coordinator repeats after the view until a STABLE round shows everyone has it), and
  the bytes per member per second;
- **CPU**: process CPU seconds per virtual second during the steady window. The machine
  this runs on is shared, so read it as an order of magnitude;
- **crash** (for ``--crash-sizes``): one participant is killed (as SIGKILL) at a random
  phase of the heartbeat; the virtual time until every survivor installed the view
  without it (the spark preset's FD_ALL3 ``timeout`` 30 s +- ``interval`` 2 s, then
  VERIFY_SUSPECT's 1 s and the view installation).

A datagram is classified by the first of its headers in the order GMS, STABLE, MERGE3,
TCPPING, FD_ALL3, VERIFY_SUSPECT, UNICAST3, NAKACK2, FRAG; a bundle holding several
messages is split by encoding each message alone. Everything follows ``--seed``: the same
seed gives the same figures except CPU. This is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio
from trio.testing import MockClock

from triogroups import Channel
from triogroups.address import Address
from triogroups.config import StackConfig
from triogroups.protocols import ids
from triogroups.protocols.gms._header import TYPE_NAMES as GMS_TYPES
from triogroups.supervisor.spark import SparkTask
from triogroups.supervisor.spark._task import TaskSpec, _stack_for
from triogroups.testing import SimCluster, SimMember, open_cluster
from triogroups.wire import WireCodec

BASE_PORT = 7800
#: Header ids in the order a datagram is classified by, with a name for each.
_ORDER = (
    (ids.GMS, "GMS"),
    (ids.STABLE, "STABLE"),
    (ids.MERGE3, "MERGE3"),
    (ids.TCPPING, "TCPPING"),
    (ids.FD_ALL3, "FD_ALL3"),
    (ids.VERIFY_SUSPECT, "VERIFY_SUSPECT"),
    (ids.UNICAST3, "UNICAST3"),
    (ids.NAKACK2, "NAKACK2"),
    (ids.FRAG, "FRAG"),
)
_STABLE_TYPES = {1: "STABLE_GOSSIP", 2: "STABILITY", 3: "GOSSIP_NOW"}
#: The groups the steady-state rates are shown in.
_STEADY_GROUPS = {
    "FD_ALL3": "heartbeat",
    "STABLE": "STABLE",
    "MERGE3": "MERGE3 INFO",
    "TCPPING": "discovery",
}


def large_group_stack() -> StackConfig:
    """The spark preset with the settings docs/how-to/spark-cluster.md suggests for groups
    of 64 and more (``--tuned``): slower heartbeats and MERGE3 rounds."""
    return (
        StackConfig.preset("spark")
        .configure("FD_ALL3", interval="5s", timeout="60s")
        .configure("MERGE3", min_interval="20s", max_interval="60s")
    )


async def _nothing(ch: Channel, task: SparkTask) -> None:
    """The member function of the spec; only its stack is used here."""


def spark_stack(n: int, tuned: bool = False) -> StackConfig:
    """The spark preset (or ``large_group_stack``) as a task of a stage of ``n`` configures
    it (`_stack_for`: TCPPING lists every endpoint ``allGather`` returned, GMS takes them all
    as pending joins), with TCP taking the first free port of the ``n`` on the simulated
    host, since every member here shares one config."""
    stack = large_group_stack() if tuned else StackConfig.preset("spark")
    spec = TaskSpec(_nothing, stack, "scale", "127.0.0.1", 60.0, False)
    peers = [["127.0.0.1", BASE_PORT + i, "token"] for i in range(n)]
    config = _stack_for(spec, "127.0.0.1", BASE_PORT, peers)
    return config.configure("TCP", bind_port=BASE_PORT, port_range=n)


@dataclass
class Meter:
    """Counts what crosses the network: datagrams and bytes per message kind."""

    codec: WireCodec
    datagrams: Counter[str] = field(default_factory=Counter)
    nbytes: Counter[str] = field(default_factory=Counter)
    largest: Counter[str] = field(default_factory=Counter)

    def reset(self) -> None:
        """Start counting afresh; the largest message of each kind is kept for the run."""
        self.datagrams.clear()
        self.nbytes.clear()

    def record(self, src: Address, dest: Address | None, data: bytes) -> None:
        bundle = self.codec.decode(data)
        if len(bundle.messages) == 1:
            sizes = [len(data)]
        else:
            sizes = [len(self.codec.encode(dest, src, [m])) for m in bundle.messages]
        share = 1 / len(bundle.messages)
        for message, size in zip(bundle.messages, sizes, strict=True):
            kind = _kind(message.headers)
            self.datagrams[kind] += share  # type: ignore[assignment]
            self.nbytes[kind] += size * len(data) // sum(sizes)
            self.largest[kind] = max(self.largest[kind], size)

    def total(self, counter: Counter[str], prefix: str = "") -> float:
        return sum(v for k, v in counter.items() if k.startswith(prefix))


def _kind(headers: dict[int, Any]) -> str:
    for pid, name in _ORDER:
        header = headers.get(pid)
        if header is None:
            continue
        if pid == ids.GMS:
            return f"GMS {GMS_TYPES.get(header.type, header.type)}"
        if pid == ids.STABLE:
            return f"STABLE {_STABLE_TYPES.get(header.type, header.type)}"
        return name
    return "other"


def _metered(cluster: SimCluster, meter: Meter) -> None:
    """Record every datagram the network schedules (`SimNetwork.transmit` is the one
    place both multicast fan-out and discovery's sends to hosts go through)."""
    net = cluster.network
    transmit: Callable[[Address, Address | None, bytes], None] = net.transmit

    def counting(src: Address, dest: Address | None, data: bytes) -> None:
        meter.record(src, dest, data)
        transmit(src, dest, data)

    net.transmit = counting  # type: ignore[method-assign]


async def _all_hold(members: list[SimMember], size: int, step: float = 0.001) -> None:
    """Wait until every one of ``members`` holds one and the same view of ``size``."""
    while True:
        views = {m.view for m in members}
        if len(views) == 1:
            (view,) = views
            if view is not None and len(view) == size:
                return
        await trio.sleep(step)


@dataclass
class Result:
    n: int
    formed: float = 0.0
    form_views: int = 0
    form_datagrams: float = 0
    form_bytes: float = 0
    view_bytes: int = 0
    join_rsp_bytes: int = 0
    digest_bytes: int = 0
    info_bytes: int = 0
    steady: dict[str, float] = field(default_factory=dict)
    steady_bytes: float = 0.0
    cpu_per_virtual: float = 0.0
    crash: float | None = None
    crash_datagrams: float = 0
    refused_joins: int = 0


async def measure(n: int, args: argparse.Namespace, crash: bool) -> Result:
    """One group of ``n``: formation, steady state, and optionally a crash."""
    result = Result(n)
    stack = spark_stack(n, args.tuned)
    meter = Meter(WireCodec("scale"))
    async with open_cluster(
        0,
        stack,
        seed=args.seed,
        cluster="scale",
        view=False,
        min_delay=args.delay,
        max_delay=args.delay,
    ) as cluster:
        for i in range(n):
            await cluster.add_member(f"p{i}")
        _metered(cluster, meter)
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for member in cluster.members:
                nursery.start_soon(member.connect)
        with trio.fail_after(args.formation_timeout):
            await _all_hold(cluster.members, n)
        result.formed = trio.current_time() - start
        view = cluster.members[0].view
        assert view is not None
        result.form_views = view.view_id.id
        result.form_datagrams = meter.total(meter.datagrams)
        result.form_bytes = meter.total(meter.nbytes)
        result.view_bytes = meter.largest["GMS VIEW"]
        result.join_rsp_bytes = meter.largest["GMS JOIN_RSP"]
        result.refused_joins = sum(
            m.protocol("GMS").counters["join_requests_dropped_pending"] for m in cluster.members
        )

        await trio.sleep(args.warmup)
        meter.reset()
        cpu = time.process_time()
        await trio.sleep(args.steady)
        result.cpu_per_virtual = (time.process_time() - cpu) / args.steady
        per = n * args.steady
        for kind, count in meter.datagrams.items():
            group = _STEADY_GROUPS.get(kind.split()[0], "other (NAKACK2 HIGHEST_SEQNO, acks)")
            result.steady[group] = result.steady.get(group, 0.0) + count / per
        result.steady_bytes = meter.total(meter.nbytes) / per
        result.digest_bytes = max((v for k, v in meter.largest.items() if "STAB" in k), default=0)
        result.info_bytes = meter.largest["MERGE3"]

        if crash:
            victim = cluster.members[-1]
            await trio.sleep(random.Random(args.seed).uniform(0, 2.0))
            meter.reset()
            victim.kill()
            killed = trio.current_time()
            survivors = [m for m in cluster.members if m is not victim]
            with trio.fail_after(args.crash_timeout):
                await _all_hold(survivors, n - 1, step=0.01)
            result.crash = trio.current_time() - killed
            result.crash_datagrams = meter.total(meter.datagrams)
    return result


def _fmt_bytes(b: float) -> str:
    for unit, scale in (("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            return f"{b / scale:.1f} {unit}"
    return f"{b:.0f} B"


def print_table(results: list[Result], args: argparse.Namespace) -> None:
    """The table the docs quote."""
    cols = [str(r.n) for r in results]

    def row(label: str, values: list[str]) -> None:
        print(f"| {label:<44} | " + " | ".join(f"{v:>9}" for v in values) + " |")

    print(
        f"\n{'spark preset tuned for large groups' if args.tuned else 'spark preset'} on the "
        f"simulated network, seed {args.seed}, {args.delay * 1e3:g} ms "
        f"per datagram, steady window {args.steady:g} s after {args.warmup:g} s warm-up\n"
    )
    row("members N", cols)
    print("|" + "-" * 46 + "|" + "|".join("-" * 11 for _ in cols) + "|")
    row("formation: virtual s to view of N at all", [f"{r.formed:.3f}" for r in results])
    row("formation: view id of the full view", [str(r.form_views) for r in results])
    row("formation: datagrams", [f"{r.form_datagrams:.0f}" for r in results])
    row("formation: bytes", [_fmt_bytes(r.form_bytes) for r in results])
    row("formation: JOIN_REQs dropped (max_pending_joins)", [str(r.refused_joins) for r in results])
    row("VIEW message, bytes", [str(r.view_bytes) for r in results])
    row("JOIN_RSP (view + digest), bytes", [str(r.join_rsp_bytes) for r in results])
    row("STABLE digest message, bytes", [str(r.digest_bytes) for r in results])
    row("MERGE3 INFO (carries the view), bytes", [str(r.info_bytes) for r in results])
    groups = [
        "heartbeat",
        "STABLE",
        "MERGE3 INFO",
        "discovery",
        "other (NAKACK2 HIGHEST_SEQNO, acks)",
    ]
    for group in groups:
        row(
            f"steady/member/s: {group} datagrams",
            [f"{r.steady.get(group, 0):.2f}" for r in results],
        )
    row("steady/member/s: all datagrams", [f"{sum(r.steady.values()):.1f}" for r in results])
    row(
        "steady/s, whole network: datagrams",
        [f"{sum(r.steady.values()) * r.n:.0f}" for r in results],
    )
    row("steady/member/s: bytes", [_fmt_bytes(r.steady_bytes) for r in results])
    row("steady/s, whole network: bytes", [_fmt_bytes(r.steady_bytes * r.n) for r in results])
    row("CPU s per virtual s (loaded host: rough)", [f"{r.cpu_per_virtual:.2f}" for r in results])
    row(
        "crash: virtual s to view of N-1 at all",
        ["-" if r.crash is None else f"{r.crash:.2f}" for r in results],
    )
    row(
        "crash: datagrams until then",
        ["-" if r.crash is None else f"{r.crash_datagrams:.0f}" for r in results],
    )


def _sizes(text: str) -> list[int]:
    """Group sizes like ``8,16,64`` (an empty list for ``--crash-sizes ""``: no crash run)."""
    try:
        sizes = [int(s) for s in text.split(",") if s]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes like 8,16,64, got {text!r}") from None
    if sizes and min(sizes) < 2:
        raise argparse.ArgumentTypeError(f"sizes must be >= 2, got {text!r}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=_sizes, default=[8, 16, 64, 256])
    parser.add_argument(
        "--crash-sizes",
        type=_sizes,
        default=None,
        help="sizes that also get the crash run (default: --sizes)",
    )
    parser.add_argument("--steady", type=float, default=20.0, help="virtual s measured")
    parser.add_argument("--warmup", type=float, default=5.0, help="virtual s before it")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--tuned", action="store_true", help="the large-group settings (large_group_stack)"
    )
    parser.add_argument("--delay", type=float, default=0.001, help="s per datagram")
    parser.add_argument("--formation-timeout", type=float, default=300.0)
    parser.add_argument("--crash-timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    if not args.sizes:
        parser.error("--sizes needs at least one size")
    # one "suspects" warning per survivor is expected in the crash run: not news here
    logging.getLogger("triogroups").setLevel(logging.ERROR)
    crash_sizes = set(args.sizes if args.crash_sizes is None else args.crash_sizes)
    results = []
    for n in args.sizes:
        wall, cpu = time.monotonic(), time.process_time()
        result = trio.run(measure, n, args, n in crash_sizes, clock=MockClock(autojump_threshold=0))
        print(
            f"N={n}: formed in {result.formed:.3f} virtual s; "
            f"{time.process_time() - cpu:.0f} s CPU, {time.monotonic() - wall:.0f} s wall",
            file=sys.stderr,
            flush=True,
        )
        results.append(result)
    print_table(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
