"""Request/response through the public API beside a plain Trio UDP ping-pong, in one run.

    python benchmarks/bench_rpc.py [--presets udp] [--seconds 3] [--repeat 3]
        [--size 1000] [--callers 100] [--pin none|same|split] [--busy-poll 200us]

Two member processes open a channel with a shipped preset on loopback (own
ports and cluster name per run, as in `bench_channel`). One member calls
``echo`` on the other with ``ch.rpc.call_one("echo", payload, to=peer)``, a
``--size`` byte payload that comes back as the result:

- one caller, each call waiting for its answer before the next: round-trip
  p10, p50, p99 and mean;
- ``--callers`` tasks calling concurrently: calls per second and p50 / p99.

Each phase is timed after a short warm-up. ``CPU us`` is the calling
process's user + system time (getrusage) over the phase per call: steadier
than the round trip on a shared machine (the other side does the same work
mirrored). In the same run, interleaved,
two processes with plain Trio UDP sockets send the same payload back and
forth one at a time (the floor a request/response over loopback pays for
Python, Trio and the kernel); the table gives the RPC's p50 as a multiple
of that ping-pong's p50. Medians over ``--repeat`` runs.

``--pin same`` runs every process of the run on CPU 0, ``--pin split`` the
calling and pinging sides on CPU 0 and the answering sides on CPU 1
(`os.sched_setaffinity`): a diagnosis of where the processes run. On these
2-core microVMs a round trip is fastest and steadiest when both sides share
a core (one side runs while the other waits). On two cores each side's
vCPU goes idle while the other works, and an idle vCPU halts at once (the
guest's haltpoll driver polls for 0 ns): the wake-up costs tens of
microseconds and the woken side's code runs slower (more CPU per call). The
ping-pong pays the wake-ups too, fewer microseconds but a larger share of
its round trip (its sides hardly work). Unpinned runs land in either mode,
which is why the p10 is shown beside the p50.

``--busy-poll 200us`` adds, interleaved in the same run, each preset with its
transport's ``busy_poll`` set to that window and a ping-pong whose two sides
busy-poll the same way (`BusyPoller`, what the transports use): each side
keeps its event loop polling instead of sleeping while it waits, which
removes the wake-ups from the round trip and costs a busy CPU per waiting
side (the ``CPU us`` column shows it). Ratios stay against the plain
ping-pong, the issue's yardstick; the busy-polling ping-pong is the floor of
that mode.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio.socket
from _procs import Group, command, emit
from bench_channel import preset_config

from triogroups import Address, Channel, open_channel
from triogroups._ports import free_ports
from triogroups.properties import Duration
from triogroups.runtime import tune_gc
from triogroups.transports._busy_poll import BusyPoller

WARMUP = 0.3  # seconds of calls before each timed phase


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def timed(call: Callable[[], Awaitable[None]], tasks: int, seconds: float) -> dict[str, Any]:
    """``tasks`` tasks each awaiting ``call()`` in a loop for ``seconds`` after a warm-up:
    calls per second and the round trip's p50 / p99 / mean in microseconds."""
    rtts: list[float] = []

    async def loop(until: float, record: bool) -> None:
        while time.perf_counter() < until:
            start = time.perf_counter()
            await call()
            if record:
                rtts.append((time.perf_counter() - start) * 1e6)

    for record, length in ((False, WARMUP), (True, seconds)):
        began = time.perf_counter()
        cpu = _cpu_seconds()
        async with trio.open_nursery() as nursery:
            for _ in range(tasks):
                nursery.start_soon(loop, began + length, record)
        elapsed = time.perf_counter() - began
        cpu = _cpu_seconds() - cpu
    rtts.sort()
    return {
        "calls_per_s": len(rtts) / elapsed,
        "cpu_us": cpu * 1e6 / len(rtts) if rtts else math.nan,
        "p10": _percentile(rtts, 0.10),
        "p50": _percentile(rtts, 0.50),
        "p99": _percentile(rtts, 0.99),
        "mean": statistics.mean(rtts) if rtts else math.nan,
    }


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- member processes ----------------------------------------------------------------------


async def _rpc_member(spec: dict[str, Any]) -> None:
    window = spec.get("busy_poll", 0.0)
    settings = [f"UDP.busy_poll={window}", f"TCP.busy_poll={window}"] if window else []
    config = preset_config(spec["preset"], 2, spec["port"], settings)
    emit(ready=True)
    await command()
    handlers = {"echo": lambda payload: payload}
    async with open_channel(
        spec["cluster"], config, spec["name"], handlers=handlers, handle_signals=False
    ) as ch:
        async for view in ch.views():
            if len(view) == 2:
                break
        emit(joined=True)
        await command()  # start
        if spec["role"] == "caller":
            emit(result=True, **await _call_phases(ch, spec))
        else:
            emit(result=True)
        await command(last=True)  # stdin closes: the run is over


async def _call_phases(ch: Channel, spec: dict[str, Any]) -> dict[str, Any]:
    peer: Address = next(m for m in ch.view.members if m != ch.address)
    payload = bytes(int(spec["size"]))

    async def call() -> None:
        result = await ch.rpc.call_one("echo", payload, to=peer)
        assert len(result) == len(payload)

    seconds = float(spec["seconds"])
    return {
        "one": await timed(call, 1, seconds),
        "many": await timed(call, int(spec["callers"]), seconds),
    }


def _poller(spec: dict[str, Any], nursery: trio.Nursery) -> BusyPoller | None:
    """A ping-pong side's busy poller, running, when the run busy-polls."""
    window = spec.get("busy_poll", 0.0)
    if not window:
        return None
    poller = BusyPoller(window)
    nursery.start_soon(poller.run)
    return poller


async def _pong(spec: dict[str, Any]) -> None:
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    await sock.bind(("127.0.0.1", 0))
    emit(port=sock.getsockname()[1])
    async with trio.open_nursery() as nursery:
        poller = _poller(spec, nursery)

        async def serve() -> None:
            while True:
                data, peer = await sock.recvfrom(65536)
                await sock.sendto(data, peer)
                if poller is not None:
                    poller.arm()

        nursery.start_soon(serve)
        await command(last=True)  # stdin closes: the run is over
        nursery.cancel_scope.cancel()


async def _ping(spec: dict[str, Any]) -> None:
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    await sock.bind(("127.0.0.1", 0))
    emit(ready=True)
    port = int((await command())["port"])
    await sock.connect(("127.0.0.1", port))
    payload = bytes(int(spec["size"]))
    async with trio.open_nursery() as nursery:
        poller = _poller(spec, nursery)

        async def call() -> None:
            await sock.send(payload)
            if poller is not None:
                poller.arm()
            await sock.recv(65536)

        emit(result=True, one=await timed(call, 1, float(spec["seconds"])))
        nursery.cancel_scope.cancel()
    await command(last=True)


ROLES: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
    "caller": _rpc_member,
    "callee": _rpc_member,
    "ping": _ping,
    "pong": _pong,
}


#: ``--pin``: the CPUs of the calling side (caller, ping) and of the answering side.
PINS = {"none": None, "same": ({0}, {0}), "split": ({0}, {1})}


def member_main(spec: dict[str, Any]) -> None:
    pin = PINS[spec.get("pin", "none")]
    if pin is not None:
        os.sched_setaffinity(0, pin[0] if spec["role"] in ("caller", "ping") else pin[1])
    tune_gc()
    trio.run(ROLES[spec["role"]], spec)


# --- the driver ----------------------------------------------------------------------------


def run_rpc(preset: str, opts: Any, busy_poll: float = 0.0) -> dict[str, Any]:
    """One run of ``preset`` (its transport busy-polling for ``busy_poll`` s if not 0):
    the caller's phases."""
    common = {
        "busy_poll": busy_poll,
        "preset": preset,
        "port": free_ports(13),
        "cluster": f"br-{uuid.uuid4().hex[:12]}",
        "size": opts.size,
        "seconds": opts.seconds,
        "callers": opts.callers,
        "pin": opts.pin,
    }
    specs = [{**common, "name": "caller", "role": "caller"}, {**common, "name": "callee"}]
    specs[1]["role"] = "callee"
    with Group(__file__, specs) as group:
        group.expect("ready")
        group.tell(go=True)
        group.expect("joined")
        group.tell(start=True)
        return group.expect("result", timeout=2 * opts.seconds + 120)[0]


def run_pingpong(opts: Any, busy_poll: float = 0.0) -> dict[str, Any]:
    """One plain Trio UDP ping-pong run (both sides busy-polling for ``busy_poll`` s if
    not 0): the pinging side's round trips."""
    spec = {"size": opts.size, "seconds": opts.seconds, "pin": opts.pin, "busy_poll": busy_poll}
    with Group(__file__, [{**spec, "role": "pong", "name": "pong"}]) as pong:
        (port,) = pong.expect("port")
        with Group(__file__, [{**spec, "role": "ping", "name": "ping"}]) as ping:
            ping.expect("ready")
            ping.tell(port=port["port"])
            result: dict[str, Any] = ping.expect("result", timeout=opts.seconds + 60)[0]["one"]
            return result


def main() -> None:
    parser = argparse.ArgumentParser(description="rpc.call_one round trips beside a ping-pong")
    parser.add_argument("--presets", default="udp")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per phase")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs; medians shown")
    parser.add_argument("--size", type=int, default=1000, help="payload bytes")
    parser.add_argument("--callers", type=int, default=100, help="concurrent callers")
    parser.add_argument(
        "--pin", choices=sorted(PINS), default="none", help="CPU affinity (a diagnosis)"
    )
    parser.add_argument(
        "--busy-poll",
        default="",
        metavar="DURATION",
        help="also run every preset and the ping-pong busy-polling this long ('200us')",
    )
    opts = parser.parse_args()
    busy_poll = 0.0
    if opts.busy_poll:
        try:
            busy_poll = Duration(0.0, doc="").convert(opts.busy_poll)
        except ValueError:
            parser.error(f"--busy-poll must be a duration like '200us', got {opts.busy_poll!r}")
        if not 0 < busy_poll <= 0.1:
            parser.error(f"--busy-poll must be in (0, 100ms], got {opts.busy_poll!r}")
    if opts.pin == "split" and not {0, 1} <= os.sched_getaffinity(0):
        parser.error("--pin split needs CPUs 0 and 1")
    if opts.pin == "same" and 0 not in os.sched_getaffinity(0):
        parser.error("--pin same needs CPU 0")
    presets = opts.presets.split(",")
    windows = [0.0, busy_poll] if busy_poll else [0.0]
    load = os.getloadavg()
    pings: dict[float, list[dict[str, float]]] = {w: [] for w in windows}
    ones: dict[tuple[str, float], list[dict[str, float]]] = {}
    manys: dict[tuple[str, float], list[dict[str, float]]] = {}
    for _ in range(opts.repeat):
        for window in windows:
            pings[window].append(run_pingpong(opts, window))
            for preset in presets:
                result = run_rpc(preset, opts, window)
                ones.setdefault((preset, window), []).append(result["one"])
                manys.setdefault((preset, window), []).append(result["many"])

    base = statistics.median(r["p50"] for r in pings[0.0])
    print(
        f"\n{opts.size} B request, same back; {opts.seconds:g} s per phase; medians of "
        f"{opts.repeat} interleaved runs; load before {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f} on {os.cpu_count()} cores"
        + ("" if opts.pin == "none" else f"; pinned: {opts.pin}")
    )
    print(
        f"{'':<26} {'p10 us':>8} {'p50 us':>8} {'p99 us':>8} {'mean us':>8} {'vs ping-pong':>12} "
        f"{'calls/s':>9} {'CPU us':>7}   runs (p50 us)"
    )
    for window in windows:
        label = "Trio UDP ping-pong" + (", busy" if window else "")
        _row(label, pings[window], base)
        for preset in presets:
            name = preset + (" busy" if window else "")
            _row(f"{name}: 1 caller", ones[preset, window], base)
            _row(f"{name}: {opts.callers} callers", manys[preset, window], base)
    if busy_poll:
        print(
            f"busy: the transports' busy_poll (and the ping-pong's poller) at "
            f"{Duration(0.0, doc='').show(busy_poll)}; ratios against the plain ping-pong"
        )


def _row(label: str, rows: list[dict[str, float]], base: float) -> None:
    """One line of the table: ``rows``' medians, the p50 as a multiple of ``base``."""

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    print(
        f"{label:<26} {med('p10'):>8.0f} {med('p50'):>8.0f} {med('p99'):>8.0f} "
        f"{med('mean'):>8.0f} {med('p50') / base:>11.2f}x "
        f"{med('calls_per_s'):>9,.0f} {med('cpu_us'):>7.0f}   "
        f"{[round(r['p50']) for r in rows]}"
    )


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "_member":
        member_main(json.loads(sys.argv[2]))
    else:
        main()
