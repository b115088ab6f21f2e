"""Multicast through the public API, as a user runs it, beside the Stack API and the transport.

    python benchmarks/bench_channel.py [--presets udp,tcp,udp-mcast,udp-total,tcp-total]
        [--members 3]
        [--seconds 3] [--repeat 3] [--size 1000] [--no-baselines] [--rate 0]
        [--set PROTOCOL.property=value ...] [--sample 0] [--young-threshold 0] [--verbose]
        [--messages 0] [--instructions]

Every member is its own OS process with ``open_channel`` and a shipped
preset, all of it (discovery, failure detection, GMS, flow control,
fragmentation), on loopback: UDP presets on a random ``mcast_port``, TCP on
a random ``bind_port`` base with TCPPING listing the members' ports, each
run in a cluster of its own name, so runs do not meet each other or tests.
Once all members share one view, the driver says start and each member

- sends ``--size`` byte multicasts with ``await ch.send(payload)`` from one
  task, one message per call, as fast as the API lets it, for ``--seconds``
  (on a preset with SEQUENCER, ``udp-total`` and ``tcp-total``, with
  ``total_order=True``, as an application that needs the order says so)
  (with ``--rate R``: R messages per second, to see flow control where the
  receivers keep up);
- counts with ``async for msg in ch`` every message delivered to it, its own
  included, and checks each sender's sequence number (the payload's first 8
  bytes): a gap is a *missing* message, a repeat a *doubled* one.

When the sending is over, the driver tells every member how many each sent;
a member reports once it delivered all of them (or after 60 s). Per member:

- msgs/s: messages delivered over the time from start to its last delivery;
  the table shows the lowest member's (what every member got at least);
- CPU per delivered message: the member's user + system time (getrusage)
  from start to its last delivery over its count, its sending included;
  steadier than msgs/s on a shared machine;
- peak RSS (``ru_maxrss``), the largest member's;
- time blocked in flow control: MFC's and UFC's ``time_blocked`` (MCAST's
  for ``udp-mcast``) over the sending time, the most blocked member's;
- GC: the share of that CPU time spent in CPython's cyclic collector (timed by
  a ``gc.callbacks`` hook), the largest member's; every member process calls
  `triogroups.runtime.tune_gc` first, as the members of ``triogroups launch`` do
  (``--young-threshold N`` passes it another threshold);
- behind: the share of all messages sent that a member had still to deliver
  when the sending ended, the largest (a few percent: the receivers kept up;
  flow control should block the senders only when they did not).

In the same run, interleaved, `bench_multicast` runs its stripped stacks
through `Stack.send` (batches of 64): the internal Stack-API rate of the
reliable stack of the same transport (``udp-nakack2``, ``tcp-nakack2``,
``udp-mcast``) and the transport alone (``udp``/``tcp`` with a PASS layer).
The table shows the channel's rate as a ratio of each. Medians over
``--repeat`` runs, the runs' values beside them.

Total order against per-sender FIFO: a ``*-total`` preset is its FIFO preset
(``udp``, ``tcp``) with SEQUENCER added, and every multicast on it is totally
ordered, so the FIFO side of the comparison is that preset, run in the same
rounds (``--presets udp,udp-total``). Below the table, per pair: the total
preset's msgs/s per member and CPU per delivered message as ratios of the
FIFO preset's, each round's ratio beside the median, and the CPU per message
of the coordinator (which multicasts every member's messages) and of the
busiest other member, beside the FIFO preset's.

The rate ratio moves with the machine's load (the total preset's coordinator handles
every message twice, so the busier the cores the further it falls behind); CPU per
message moves less, instructions not at all. ``--instructions`` (valgrind must be
installed) adds ``--repeat`` rounds, interleaved, that count with callgrind the
instructions per delivered message of each preset: all members in one process (one
import, one interpreter under valgrind), each sending ``--messages`` (500 if 0) and,
in a second run beside it, twice as many; the difference over the extra deliveries
leaves out start-up, joining and leaving (`_callgrind.instructions_per`). Every ratio
of a pair is written as the share of FIFO's work the total preset does, so higher is
better and the goal of issue 42 (0.5x) reads the same on each: msgs/s total/FIFO, CPU
and instructions per message FIFO/total. ``--messages N`` makes every timed run send
``N`` messages per member instead of for ``--seconds``.

``--set MFC.min_threshold=0.75`` (repeatable; the value is JSON) changes a
preset's property for an experiment. ``--sample S`` records every member's
RSS, deliveries and CPU time every S seconds and prints them for the last
run (with a long ``--seconds``: does memory stay flat?). ``--verbose``
prints every member's result, with its flow-control and retransmission
counters and the messages per datagram (frame) its transport sent and
received. With ``BENCH_PROFILE=<dir>`` every member runs under cProfile and
writes ``<dir>/channel-<preset>-<name>.prof``.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import math
import os
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import bench_multicast
import trio
from _callgrind import instructions_per, require_valgrind
from _members import peak_rss_kb, rss_kb
from _procs import Group, command, emit

from triogroups import StackConfig, open_channel
from triogroups._ports import free_ports
from triogroups.runtime import tune_gc

PRESETS = ("udp", "tcp", "udp-mcast", "udp-total", "tcp-total")
#: Per preset: bench_multicast's reliable stack of the same transport, and the transport alone.
BASELINES = {
    "udp": ("udp-nakack2", "udp"),
    "tcp": ("tcp-nakack2", "tcp"),
    "udp-mcast": ("udp-mcast", "udp"),
    "udp-total": ("udp-nakack2", "udp"),
    "tcp-total": ("tcp-nakack2", "tcp"),
}
#: A total-order preset and the per-sender FIFO preset it adds SEQUENCER to.
FIFO_OF = {"udp-total": "udp", "tcp-total": "tcp"}
FLOW_CONTROL = ("MFC", "UFC", "MCAST")  # layers whose stats carry time_blocked
DELIVERY_WAIT = 60.0  # a member reports after this long even if messages are missing


def preset_config(
    preset: str, members: int, port: int, settings: list[str] | None = None
) -> StackConfig:
    """``preset`` on this run's own ports (a multicast port, or a TCP port range), with
    ``settings`` (``PROTOCOL.property=value``) applied where the protocol is in it."""
    config = StackConfig.preset(preset)
    if preset.startswith("udp"):
        config = config.configure("UDP", mcast_port=port)
    else:
        hosts = [f"127.0.0.1[{port + i}]" for i in range(members)]
        config = config.configure("TCP", bind_port=port, port_range=members + 10)
        config = config.configure("TCPPING", initial_hosts=hosts, port_range=0)
    names = {layer.name for layer in config.layers}
    for setting in settings or []:
        target, value = setting.split("=", 1)
        protocol, prop = target.split(".", 1)
        if protocol in names:
            config = config.configure(protocol, **{prop: json.loads(value)})
    return config


def cpu_seconds() -> float:
    """User plus system CPU time of this process."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


FC_COUNTERS = ("blockings", "credit_requests_sent", "replenishments_received")
XMIT_COUNTERS = ("xmit_reqs_sent", "xmit_seqnos_requested", "xmit_rsps_received")
BUNDLE_COUNTERS = ("avg_bundle_msgs_sent", "avg_bundle_msgs_received")


def flow_blocked(stats: dict[str, Any]) -> dict[str, float]:
    """``time_blocked`` of each flow-control layer in a `Stack.stats` snapshot."""
    return {
        layer["protocol"]: float(layer["stats"]["time_blocked"])
        for layer in stats["layers"]
        if layer["protocol"] in FLOW_CONTROL and "time_blocked" in layer["stats"]
    }


def flow_counters(stats: dict[str, Any]) -> dict[str, dict[str, int]]:
    """How often flow control blocked, asked for and got credits; how much was retransmitted;
    how many messages the transport's datagrams (or TCP frames) carried on average."""
    wanted = (*FC_COUNTERS, *XMIT_COUNTERS, *BUNDLE_COUNTERS)
    found = {
        layer["protocol"]: {k: layer["stats"][k] for k in wanted if k in layer["stats"]}
        for layer in stats["layers"]
    }
    return {name: counters for name, counters in found.items() if counters}


# --- the member process --------------------------------------------------------------------


class _GcClock:
    """Seconds the cyclic collector has run in this process since `install`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def install(self) -> None:
        gc.callbacks.append(self._tick)

    def _tick(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


_GC = _GcClock()


class _Counter:
    """Counts deliveries per sender and checks each sender's sequence numbers."""

    def __init__(self) -> None:
        self.next: dict[str, int] = {}
        self.count = 0
        self.missing = 0
        self.doubled = 0
        self.last = 0.0
        self.last_cpu = 0.0
        self.last_gc = 0.0
        self.target = math.inf
        self.done = trio.Event()

    def deliver(self, src: str, seq: int) -> None:
        expected = self.next.get(src, 0)
        if seq == expected:
            self.next[src] = seq + 1
        elif seq < expected:
            self.doubled += 1
        else:
            self.missing += seq - expected
            self.next[src] = seq + 1
        self.count += 1
        if self.count >= self.target:
            self.finish()

    def finish(self) -> None:
        self.last = time.perf_counter()
        self.last_cpu = cpu_seconds()
        self.last_gc = _GC.seconds
        self.done.set()

    def expect(self, sent: dict[str, int]) -> None:
        """The driver's totals: how many each sender sent."""
        self.target = sum(sent.values())
        if self.count >= self.target:
            self.finish()

    def shortfall(self, sent: dict[str, int]) -> int:
        """Messages never delivered: those behind each sender's last delivered one too."""
        return self.missing + sum(max(0, n - self.next.get(src, 0)) for src, n in sent.items())


async def _member(spec: dict[str, Any]) -> None:
    config = preset_config(spec["preset"], spec["members"], spec["port"], spec["set"])
    size = int(spec["size"])
    total_order = "SEQUENCER" in config.names()
    emit(ready=True)
    await command()
    async with open_channel(spec["cluster"], config, spec["name"], handle_signals=False) as ch:
        async for view in ch.views():
            if len(view) == spec["members"]:
                break
        emit(joined=str(ch.address))
        await command()  # start
        counter = _Counter()
        samples: list[tuple[int, int, float]] = []
        start, start_cpu, start_gc = time.perf_counter(), cpu_seconds(), _GC.seconds

        async def count() -> None:
            async for msg in ch:
                counter.deliver(str(msg.src), int.from_bytes(msg.raw[:8], "big"))

        async def sample(interval: float) -> None:
            while True:
                samples.append((rss_kb(), counter.count, cpu_seconds() - start_cpu))
                await trio.sleep(interval)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(count)
            if spec["sample"]:
                nursery.start_soon(sample, float(spec["sample"]))
            filler = bytes(size - 8)
            sent = 0
            rate = float(spec["rate"])
            deadline = start + float(spec["seconds"])
            quota = int(spec["messages"]) or math.inf  # a count instead of a time
            if quota < math.inf:
                deadline = math.inf
            while (now := time.perf_counter()) < deadline and sent < quota:
                if rate and sent >= (now - start) * rate:  # paced: wait for the next tick
                    await trio.sleep(0.005)
                    continue
                await ch.send(sent.to_bytes(8, "big") + filler, total_order=total_order)
                sent += 1
            send_seconds = time.perf_counter() - start
            delivered_then = counter.count
            emit(sent=sent, address=str(ch.address))
            totals: dict[str, int] = (await command())["totals"]
            counter.expect(totals)
            with trio.move_on_after(DELIVERY_WAIT):
                await counter.done.wait()
            if not counter.done.is_set():
                counter.finish()
            stats = ch.stack.stats()  # every send went: nothing is still blocked
            emit(
                result=True,
                count=counter.count,
                seconds=counter.last - start,
                cpu_seconds=counter.last_cpu - start_cpu,
                gc_seconds=counter.last_gc - start_gc,
                send_seconds=send_seconds,
                delivered_then=delivered_then,
                missing=counter.shortfall(totals),
                coord=ch.view.coord == ch.address,
                doubled=counter.doubled,
                blocked=flow_blocked(stats),
                flow=flow_counters(stats),
                peak_rss_kb=peak_rss_kb(),
                rss_kb=samples,
            )
            await command(last=True)  # stdin closes: the run is over
            nursery.cancel_scope.cancel()


def member_main(spec: dict[str, Any]) -> None:
    if spec["young"]:
        tune_gc(spec["young"])
    else:
        tune_gc()
    _GC.install()
    folder = os.environ.get("BENCH_PROFILE")
    if not folder:
        trio.run(_member, spec)
        return
    profile = cProfile.Profile()
    profile.runcall(trio.run, _member, spec)
    profile.dump_stats(os.path.join(folder, f"channel-{spec['preset']}-{spec['name']}.prof"))


# --- the driver ----------------------------------------------------------------------------


def run_channel(preset: str, opts: Any) -> list[dict[str, Any]]:
    """One run of ``preset``: every member's result."""
    port = free_ports(opts.members + 11)
    cluster = f"bc-{uuid.uuid4().hex[:12]}"
    specs = [
        {
            "preset": preset,
            "members": opts.members,
            "port": port,
            "cluster": cluster,
            "name": f"M{i}",
            "size": opts.size,
            "seconds": opts.seconds,
            "sample": opts.sample,
            "rate": opts.rate,
            "set": opts.set,
            "young": opts.young_threshold,
            "messages": opts.messages,
        }
        for i in range(opts.members)
    ]
    with Group(__file__, specs) as group:
        group.expect("ready")
        group.tell(go=True)
        group.expect("joined")
        group.tell(start=True)
        sent = group.expect("sent", timeout=opts.seconds + 120)
        group.tell(totals={r["address"]: r["sent"] for r in sent})
        results = group.expect("result", timeout=DELIVERY_WAIT + 60)
    for result, report in zip(results, sent, strict=True):
        result["sent"] = report["sent"]
    return results


def summary(results: list[dict[str, Any]]) -> dict[str, float]:
    """The lowest member's rate, mean CPU per message, largest peak RSS, most blocked share,
    the largest share of all sent messages a member had still to deliver when sending ended."""
    rates = [r["count"] / max(r["seconds"], 1e-9) for r in results]
    total = max(sum(r["sent"] for r in results), 1)
    cpu = [(r["cpu_seconds"] / max(r["count"], 1) * 1e6, r["coord"]) for r in results]
    return {
        "cpu_coord": max((c for c, coord in cpu if coord), default=math.nan),
        "cpu_other": max((c for c, coord in cpu if not coord), default=math.nan),
        "behind": max(1 - r["delivered_then"] / total for r in results),
        "rate": min(rates),
        "cpu_us": statistics.mean(r["cpu_seconds"] / max(r["count"], 1) * 1e6 for r in results),
        "peak_mib": max(r["peak_rss_kb"] for r in results) / 1024,
        "blocked": max(sum(r["blocked"].values()) / r["send_seconds"] for r in results),
        "gc": max(r["gc_seconds"] / max(r["cpu_seconds"], 1e-9) for r in results),
        "lost": sum(r["missing"] + r["doubled"] for r in results),
    }


async def together(preset: str, members: int, messages: int, size: int) -> None:
    """``members`` channels of ``preset`` in this one process, each sending ``messages``
    multicasts with ``await ch.send`` (in total order on a SEQUENCER preset) and counting
    every delivery until it has all ``members * messages``: the work `count_instructions`
    counts, every member's in one callgrind run."""
    config = preset_config(preset, members, free_ports(members + 11))
    cluster = f"bc-{uuid.uuid4().hex[:12]}"
    total_order = "SEQUENCER" in config.names()
    payload = bytes(size)

    start, over, done = trio.Event(), trio.Event(), []
    left = [trio.Event() for _ in range(members)]

    async def member(i: int, joined: trio.Event) -> None:
        name = f"M{i}"
        async with open_channel(cluster, config, name, handle_signals=False) as ch:
            async for view in ch.views():
                if len(view) == members:
                    break
            joined.set()
            await start.wait()

            async def send() -> None:
                for _ in range(messages):
                    await ch.send(payload, total_order=total_order)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send)
                count = 0
                async for _ in ch:
                    count += 1
                    if count == members * messages:
                        break
            done.append(count)
            if len(done) == members:
                over.set()
            await over.wait()  # none leaves while another may still need a retransmission
            if i + 1 < members:
                await left[i + 1].wait()  # one at a time, the coordinator (M0) last
        left[i].set()

    async with trio.open_nursery() as nursery:
        joins = [trio.Event() for _ in range(members)]
        for i, joined in enumerate(joins):
            nursery.start_soon(member, i, joined)
        for joined in joins:
            await joined.wait()
        start.set()


def count_instructions(presets: list[str], opts: Any) -> dict[str, list[float]]:
    """Instructions per delivered message, ``opts.repeat`` rounds of every preset in turn:
    `together` under callgrind with ``--messages`` (500 if 0) per member and with twice as
    many, the difference over the extra deliveries (`instructions_per`): start-up, joining
    and leaving left out. All members run in one process, so this is the mean over members
    of each one's instructions per message it delivered, its sending and forwarding included."""
    require_valgrind()
    messages = opts.messages or 500
    found: dict[str, list[float]] = {p: [] for p in presets}
    for _ in range(opts.repeat):
        for preset in presets:

            def args(n: int, preset: str = preset) -> list[str]:
                return ["_together", preset, str(opts.members), str(n), str(opts.size)]

            per = instructions_per(__file__, args, messages) / (opts.members * opts.members)
            found[preset].append(per)
            print(f"  callgrind {preset}: {per:,.0f} per delivery", file=sys.stderr, flush=True)
    return found


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def _ratio(a: float, b: float) -> str:
    return f"{a / b:>6.2f}x" if b and not math.isnan(b) else f"{'-':>7}"


def print_pair(
    total: str,
    fifo: str,
    channel: dict[str, list[dict[str, float]]],
    instr: dict[str, list[float]],
) -> None:
    """The lines comparing ``total`` with ``fifo``, round by round (`main`)."""
    rounds = list(zip(channel[total], channel[fifo], strict=True))
    rate = [t["rate"] / f["rate"] for t, f in rounds]
    cpu = [f["cpu_us"] / t["cpu_us"] for t, f in rounds]

    def med(rows: list[dict[str, float]], key: str) -> float:
        return _median([r[key] for r in rows])

    t, f = channel[total], channel[fifo]
    print(
        f"  {total}/{fifo}: msgs/s {_median(rate):.2f}x {[round(r, 2) for r in rate]}; "
        f"CPU per message {_median(cpu):.2f}x {[round(c, 2) for c in cpu]} "
        f"({med(t, 'cpu_us'):.2f} us against {med(f, 'cpu_us'):.2f}; coordinator "
        f"{med(t, 'cpu_coord'):.2f} against {med(f, 'cpu_coord'):.2f}, busiest other member "
        f"{med(t, 'cpu_other'):.2f} against {med(f, 'cpu_other'):.2f})"
    )
    if total not in instr or fifo not in instr:
        return
    ti, fi = instr[total], instr[fifo]
    ratio = [b / a for a, b in zip(ti, fi, strict=True)]
    print(
        f"  {'':<{len(total) + len(fifo) + 1}}  instructions per message "
        f"{_median(ratio):.2f}x {[round(r, 2) for r in ratio]} ({_median(ti):,.0f} "
        f"against {_median(fi):,.0f}, callgrind, all members in one process)"
    )


def command_line() -> argparse.ArgumentParser:
    """The command line; `run_options` takes its defaults."""
    parser = argparse.ArgumentParser(description="multicast through open_channel and presets")
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="sending time per run")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs; medians shown")
    parser.add_argument("--size", type=int, default=1000, help="payload bytes (at least 8)")
    parser.add_argument("--no-baselines", action="store_true", help="skip the Stack-API runs")
    parser.add_argument("--sample", type=float, default=0.0, help="RSS sampling period, s")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="messages/s each member sends (0: all it can)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="PROTOCOL.property=value",
        help="change a property of the preset (value as JSON), e.g. MFC.max_credits=10000000",
    )
    parser.add_argument(
        "--young-threshold",
        type=int,
        default=0,
        help="the members' tune_gc(young_threshold) (0: tune_gc's default)",
    )
    parser.add_argument(
        "--messages",
        type=int,
        default=0,
        help="messages each member sends instead of --seconds (0: for --seconds)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count instructions per delivered message with callgrind: --repeat rounds "
        "of every preset, members sending --messages (500 if 0) and twice as many",
    )
    parser.add_argument("--verbose", action="store_true", help="every member's result")
    return parser


def run_options(**given: Any) -> argparse.Namespace:
    """Options for `run_channel` from another benchmark: the command line's defaults, with
    ``given`` (``members``, ``seconds``, ``set``...) over them, so an option added here
    reaches every caller with its default."""
    opts = command_line().parse_args([])
    for name, value in given.items():
        if not hasattr(opts, name):
            raise TypeError(f"bench_channel has no option {name!r}")
        setattr(opts, name, value)
    return opts


def main() -> None:
    parser = command_line()
    opts = parser.parse_args()
    if opts.size < 8:
        parser.error(f"--size must be >= 8, got {opts.size}")
    if opts.young_threshold and opts.young_threshold < 700:
        parser.error(
            f"--young-threshold must be 0 (tune_gc's default) or >= 700, got {opts.young_threshold}"
        )
    presets = opts.presets.split(",")
    for preset in presets:
        if preset not in BASELINES:
            parser.error(f"--presets: unknown preset {preset!r} (known: {', '.join(PRESETS)})")
    stacks: list[str] = []
    if not opts.no_baselines:
        stacks = list(dict.fromkeys(s for p in presets for s in BASELINES[p]))
    load = os.getloadavg()
    channel: dict[str, list[dict[str, float]]] = {p: [] for p in presets}
    internal: dict[str, list[float]] = {s: [] for s in stacks}
    internal_cpu: dict[str, list[float]] = {s: [] for s in stacks}
    curves: dict[str, list[list[list[float]]]] = {}
    stack_opts = SimpleNamespace(size=opts.size, members=opts.members, seconds=opts.seconds)
    for _ in range(opts.repeat):  # interleaved, so a noisy moment hits every column
        for preset in presets:
            results = run_channel(preset, opts)
            if opts.verbose:
                for result in results:
                    print(preset, {k: v for k, v in result.items() if k != "rss_kb"})
            channel[preset].append(summary(results))
            curves[preset] = [r["rss_kb"] for r in results]
        for stack in stacks:
            results = bench_multicast.run(stack, stack_opts)
            internal[stack].append(bench_multicast._summary(results)[0])
            internal_cpu[stack].append(bench_multicast._cpu_per_message(results))
    instr = count_instructions(presets, opts) if opts.instructions else {}
    amount = f"{opts.messages} messages" if opts.messages else f"for {opts.seconds:g} s"
    print(
        f"\n{opts.members} members, each sending {opts.size} B multicasts with await ch.send() "
        f"{amount}; medians of {opts.repeat} interleaved runs; "
        f"load before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores"
    )
    print(
        f"{'preset':<10} {'msgs/s/member':>13} {'vs Stack':>8} {'vs transport':>12} "
        f"{'CPU us/msg':>10} {'GC':>5} {'peak MiB':>8} {'FC blocked':>10} {'behind':>6} "
        f"{'lost':>4}"
        "   runs (msgs/s)"
    )
    for preset in presets:
        rows = channel[preset]

        def med(key: str, rows: list[dict[str, float]] = rows) -> float:
            return _median([r[key] for r in rows])

        rate = med("rate")
        reliable, transport = BASELINES[preset]
        print(
            f"{preset:<10} {rate:>13,.0f} {_ratio(rate, _median(internal.get(reliable, []))):>8} "
            f"{_ratio(rate, _median(internal.get(transport, []))):>12} {med('cpu_us'):>10.2f} "
            f"{med('gc'):>5.1%} {med('peak_mib'):>8.1f} {med('blocked'):>10.1%} "
            f"{med('behind'):>6.0%} {sum(r['lost'] for r in rows):>4.0f}   "
            f"{[round(r['rate']) for r in rows]}"
        )
    pairs = [(t, f) for t, f in FIFO_OF.items() if t in presets and f in presets]
    if pairs:
        print(
            "\nTotal order against per-sender FIFO, same rounds; each ratio is the total"
            " preset's share of FIFO's work done (higher is better): msgs/s total/FIFO, CPU"
            " and instructions per delivered message FIFO/total:"
        )
    for total, fifo in pairs:
        print_pair(total, fifo, channel, instr)
    if stacks:
        print("\nStack API (bench_multicast, batches of 64), same runs:")
        for stack in stacks:
            print(
                f"  {stack:<12} {_median(internal[stack]):>10,.0f} msgs/s/member, "
                f"{_median(internal_cpu[stack]):6.2f} CPU us/msg   "
                f"{[round(r) for r in internal[stack]]}"
            )
    if opts.sample:
        print(f"\nEvery {opts.sample:g} s of the last run, per member: RSS MiB, delivered, CPU s")
        for preset, members in curves.items():
            for i, curve in enumerate(members):
                print(f"  {preset:<10} M{i}: RSS " + " ".join(f"{s[0] / 1024:6.1f}" for s in curve))
                print(f"  {'':<10}     n   " + " ".join(f"{s[1]:6d}" for s in curve))
                print(f"  {'':<10}     CPU " + " ".join(f"{s[2]:6.2f}" for s in curve))


def _entry() -> Callable[[], None]:
    if len(sys.argv) == 6 and sys.argv[1] == "_together":
        preset, members, messages, size = sys.argv[2], *map(int, sys.argv[3:])
        return lambda: (tune_gc(), trio.run(together, preset, members, messages, size))[0]
    if len(sys.argv) > 2 and sys.argv[1] == "_member":
        spec = json.loads(sys.argv[2])
        return lambda: member_main(spec)
    return main


if __name__ == "__main__":
    _entry()()
