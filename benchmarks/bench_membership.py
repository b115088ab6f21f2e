"""Membership and group RPC over real processes: forming views, detecting a crash, RPC rate.

    python benchmarks/bench_membership.py [--parts formation,join,fd,rpc] [--kinds udp,tcp]
        [--sizes 2,4,8] [--repeat 3] [--fd-members 4] [--fd-victim participant|coord]
        [--fd-repeat 3] [--fd-default-repeat 1]
        [--rpc-seconds 3] [--rpc-callers 1,8] [--tcp-hosts listed|range]

Every member is its own OS process running the shipped ``udp`` or ``tcp``
preset on loopback (UDP: a random ``mcast_port``, TTL 0; TCP: a random
``bind_port`` base and ``TCPPING`` listing the N ports from there, or with
``--tcp-hosts range`` listing the base port with ``port_range`` N-1 as the
preset does), in a cluster of its own name, so parallel runs on the host do
not meet. (A TCPPING find ends once every *listed* host answered, so with
``range`` a find ends at the first answer and members starting together
often form several views that only MERGE3 joins later.)

- **formation**: N member processes are launched at once. Each imports
  triogroups, builds its stack config, says it is ready and waits; when all
  are ready the driver says go to all of them. *Start-up* is launch to the
  last one ready (Python and imports), *formation* is go to the moment the
  last member installed the same view of N members (the time each member
  reports from `Channel.views`). Both are shown, and their sum.
- **join**: N member processes are launched; once all are ready, N-1 are
  told go and form a view, then the last one: the time from its go to the
  view of all N. Discovery ends as soon as the coordinator answers
  (``break_on_coord_rsp``), so this is a round trip and a view change, where
  *formation* waits out the first find (``join_timeout``) because nobody
  coordinates yet.
- **fd**: a group of ``--fd-members`` is formed, one participant (the last
  member of the view; with ``--fd-victim coord`` the coordinator, so the next
  member takes over) is killed with SIGKILL, and the time until every survivor
  has installed a view without it is measured, with the preset's FD_ALL3 /
  VERIFY_SUSPECT settings and with fast ones (`FAST_FD`). The kill comes once
  the new view's grace is over (a view change gives every member a full
  FD_ALL3 bitmap), at a random phase of the heartbeat. FD_ALL3 suspects a
  member silent for ``timeout`` at its next check (at most ``interval``
  later), and the last sign of life came at most ``interval`` before the kill,
  so the suspicion comes ``timeout`` +- ``interval`` after the kill;
  VERIFY_SUSPECT then waits its ``timeout``. That window is shown beside the
  measurement. With the default settings a run takes about 100 s (the grace,
  then the detection), so it is repeated only ``--fd-default-repeat`` times,
  the transports side by side.
- **rpc**: a group of three; one member calls ``echo(i)`` on the whole group
  with response mode ``all`` for ``--rpc-seconds`` (after a short warm-up),
  from one task calling sequentially and from several tasks calling
  concurrently (``--rpc-callers``). Calls per second and the p50 / p99 call
  latency are shown.

Repeats are interleaved across transports and sizes, so a noisy moment does
not hit one column only; tables show the median and the range (min-max).
This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import trio
from _procs import DIE_WITH_PARENT

from triogroups import Channel, StackConfig, open_channel
from triogroups._ports import free_ports
from triogroups.protocols.fd_all3 import FdAll3
from triogroups.protocols.verify_suspect import VerifySuspect

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST_FD = {"interval": 0.5, "timeout": 2.0, "verify_timeout": 0.5}
WAIT = 120.0  # longest the driver waits for any one step before giving up on a run
RPC_WARMUP = 0.5


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


# --- the member process --------------------------------------------------------------


def _config(spec: dict[str, Any]) -> StackConfig:
    """The preset of ``spec["kind"]`` on the run's ports, with the run's FD settings."""
    config = StackConfig.preset(spec["kind"])
    if spec["kind"] == "udp":
        config = config.configure("UDP", mcast_port=spec["port"])
    else:
        base, n = spec["port"], spec["members"]
        config = config.configure("TCP", bind_port=base, port_range=n + 10)
        if spec["tcp_hosts"] == "listed":
            hosts, extra = [f"127.0.0.1[{base + i}]" for i in range(n)], 0
        else:
            hosts, extra = [f"127.0.0.1[{base}]"], n - 1
        config = config.configure("TCPPING", initial_hosts=hosts, port_range=extra)
    fd = spec.get("fd")
    if fd:
        config = config.configure("FD_ALL3", interval=fd["interval"], timeout=fd["timeout"])
        config = config.configure("VERIFY_SUSPECT", timeout=fd["verify_timeout"])
    return config


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def _rpc_load(channel: Channel, seconds: float, callers: int) -> dict[str, Any]:
    """``callers`` tasks calling ``echo`` on the group with mode all, for ``seconds``."""
    latencies: list[float] = []
    failed = 0
    members = len(channel.view)

    async def caller(deadline: float, record: bool) -> None:
        nonlocal failed
        i = 0
        while time.perf_counter() < deadline:
            i += 1
            start = time.perf_counter()
            rsps = await channel.rpc.call("echo", i, mode="all", timeout=10)
            took = time.perf_counter() - start
            if record:
                latencies.append(took)
                if len(rsps.received) != members or rsps.timed_out:
                    failed += 1

    for record, length in ((False, RPC_WARMUP), (True, seconds)):
        began = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(callers):
                nursery.start_soon(caller, began + length, record)
        elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "calls": len(latencies),
        "seconds": elapsed,
        "failed": failed,
        "p50": _percentile(latencies, 0.50),
        "p99": _percentile(latencies, 0.99),
    }


async def _member(spec: dict[str, Any]) -> None:
    """One member: ready, wait for go, join, report every view, run rpc loads when told.

    It ends when its stdin closes; the driver usually kills it before that.
    """
    config = _config(spec)
    _emit(ready=time.time())
    await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    async with open_channel(
        spec["cluster"], config, spec["name"], handlers={"echo": lambda x: x}
    ) as channel:

        async def report_views() -> None:
            async for view in channel.views():
                names = [m.name for m in view.members]
                _emit(view=str(view.view_id), members=names, t=time.time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(report_views)
            while True:
                line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                words = line.split()
                if not words:
                    break
                if words[0] == "rpc":
                    _emit(rpc=await _rpc_load(channel, float(words[1]), int(words[2])))
            nursery.cancel_scope.cancel()


# --- the driver ------------------------------------------------------------------------


@dataclass
class _Member:
    name: str
    proc: subprocess.Popen[str]
    ready: float = 0.0
    reports: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()


class _Group:
    """N member processes and the JSON lines they send, gathered by one thread each."""

    tcp_hosts = "listed"

    def __init__(self, kind: str, n: int, fd: dict[str, float] | None) -> None:
        port = free_ports(n + 11)
        spec = {
            "kind": kind,
            "members": n,
            "port": port,
            "fd": fd,
            "tcp_hosts": self.tcp_hosts,
            "cluster": f"bm-{uuid.uuid4().hex[:10]}",
        }
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
        self.inbox: queue.Queue[tuple[_Member, dict[str, Any]]] = queue.Queue()
        self.launched = time.time()
        self.members: list[_Member] = []
        for i in range(n):
            member_spec = json.dumps({**spec, "name": f"m{i}"})
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "_member", member_spec],
                preexec_fn=DIE_WITH_PARENT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            self.members.append(_Member(f"m{i}", proc))
        for member in self.members:
            threading.Thread(target=self._read, args=(member,), daemon=True).start()
            threading.Thread(target=self._drain_stderr, args=(member,), daemon=True).start()

    def _read(self, member: _Member) -> None:
        assert member.proc.stdout is not None
        for line in member.proc.stdout:
            with contextlib.suppress(ValueError):
                self.inbox.put((member, json.loads(line)))

    def _drain_stderr(self, member: _Member) -> None:
        assert member.proc.stderr is not None
        for line in member.proc.stderr:
            member.stderr.append(line)

    def wait_for(self, done: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
        """Take reports until ``done()``; RuntimeError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not done():
            remaining = deadline - time.monotonic()
            try:
                member, report = self.inbox.get(timeout=max(remaining, 0.0))
            except queue.Empty:
                raise RuntimeError(f"no {what} within {timeout}s{self._diagnosis()}") from None
            if "ready" in report:
                member.ready = report["ready"]
            else:
                member.reports.append(report)

    def _diagnosis(self) -> str:
        lines = []
        for m in self.members:
            last = m.reports[-1] if m.reports else None
            lines.append(f"\n  {m.name} (exit {m.proc.poll()}): last report {last}")
            lines.extend(f"\n    {line.rstrip()}" for line in m.stderr[-5:])
        return "".join(lines)

    def start(self) -> tuple[float, float]:
        """Wait until all are ready, say go, wait for one view of all; (start-up, formation)."""
        self.wait_for(lambda: all(m.ready for m in self.members), "ready members")
        ready = max(m.ready for m in self.members)
        go = time.time()
        for member in self.members:
            member.tell("go")
        formed = self.wait_for_view(self.members)
        return ready - self.launched, formed - go

    def join_last(self) -> float:
        """All but the last form a view; then the last is told go: seconds to one view of all."""
        self.wait_for(lambda: all(m.ready for m in self.members), "ready members")
        *first, last = self.members
        for member in first:
            member.tell("go")
        self.wait_for_view(first)
        go = time.time()
        last.tell("go")
        return self.wait_for_view(self.members) - go

    def wait_for_view(self, members: list[_Member], timeout: float = WAIT) -> float:
        """When the last of ``members`` installed the same view of exactly them."""
        names = sorted(m.name for m in members)

        def agreed() -> bool:
            lasts = [_last_view(m) for m in members]
            return all(v is not None and sorted(v["members"]) == names for v in lasts) and (
                len({v["view"] for v in lasts if v is not None}) == 1
            )

        self.wait_for(agreed, f"common view of {len(names)}", timeout)
        return max(float(v["t"]) for m in members if (v := _last_view(m)) is not None)

    def close(self) -> None:
        for member in self.members:
            if member.proc.poll() is None:
                member.proc.kill()
        for member in self.members:
            member.proc.wait()


def _last_view(member: _Member) -> dict[str, Any] | None:
    views = [r for r in member.reports if "view" in r]
    return views[-1] if views else None


def _fd_settings(kind: str, fast: bool) -> dict[str, float]:
    """The fast settings, or what the preset's FD_ALL3 and VERIFY_SUSPECT run with."""
    if fast:
        return dict(FAST_FD)
    layers = {layer.name: layer.properties for layer in StackConfig.preset(kind).layers}
    fd = FdAll3(**layers["FD_ALL3"])
    verify = VerifySuspect(**layers["VERIFY_SUSPECT"])
    return {"interval": fd.interval, "timeout": fd.timeout, "verify_timeout": verify.timeout}


def measure_formation(kind: str, n: int) -> tuple[float, float]:
    group = _Group(kind, n, None)
    try:
        return group.start()
    finally:
        group.close()


def measure_join(kind: str, n: int) -> float:
    group = _Group(kind, n, None)
    try:
        return group.join_last()
    finally:
        group.close()


def measure_fd(kind: str, n: int, fd: dict[str, float], fast: bool, victim: str) -> float:
    """Seconds from the SIGKILL of a participant to the last survivor's view without it.

    The kill waits until the view's grace has passed (a new view starts every
    member with a full FD_ALL3 bitmap, good for ``timeout`` + ``interval``)
    and comes at a random phase of the heartbeat interval, as a crash would.
    """
    group = _Group(kind, n, fd if fast else None)
    try:
        group.start()
        last = _last_view(group.members[0])
        assert last is not None
        name = last["members"][0 if victim == "coord" else -1]
        killed_member = next(m for m in group.members if m.name == name)
        survivors = [m for m in group.members if m is not killed_member]
        time.sleep(fd["timeout"] + fd["interval"] * random.uniform(1.0, 2.0))
        killed = time.time()
        os.kill(killed_member.proc.pid, signal.SIGKILL)
        bound = fd["timeout"] + fd["interval"] + fd["verify_timeout"]
        return group.wait_for_view(survivors, timeout=bound + 60) - killed
    finally:
        group.close()


def measure_rpc(kind: str, seconds: float, callers: int) -> dict[str, Any]:
    group = _Group(kind, 3, None)
    try:
        group.start()
        caller = group.members[0]
        caller.tell(f"rpc {seconds} {callers}")
        results = caller.reports
        group.wait_for(lambda: any("rpc" in r for r in results), "rpc result", seconds + WAIT)
        return next(r["rpc"] for r in results if "rpc" in r)
    finally:
        group.close()


# --- tables ------------------------------------------------------------------------------


def _spread(values: list[float], unit: str = "s", digits: int = 2) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:.{digits}f}{unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def run_formation(kinds: list[str], sizes: list[int], repeat: int) -> None:
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(repeat):
        for n in sizes:
            for kind in kinds:
                runs = results.setdefault((kind, n), [])
                try:
                    startup, formation = measure_formation(kind, n)
                except RuntimeError as exc:  # recorded as a run without a result
                    print(f"  formation {kind} N={n}: FAILED: {exc}")
                    continue
                runs.append((startup, formation))
                print(f"  formation {kind} N={n}: start-up {startup:.2f}s, view {formation:.2f}s")
    print(f"\nView formation: median (min-max) of the runs that formed one view, of {repeat}")
    print(
        f"{'':<5}{'N':>3}{'runs':>5}  {'start-up':<22}{'go -> one view':<22}"
        f"{'launch -> one view':<22}"
    )
    for (kind, n), runs in sorted(results.items()):
        startups = [s for s, _ in runs]
        forms = [f for _, f in runs]
        totals = [s + f for s, f in runs]
        print(
            f"{kind.upper():<5}{n:>3}{len(runs):>5}  {_spread(startups):<22}{_spread(forms):<22}"
            f"{_spread(totals):<22}"
        )


def run_join(kinds: list[str], sizes: list[int], repeat: int) -> None:
    results: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeat):
        for n in sizes:
            for kind in kinds:
                runs = results.setdefault((kind, n), [])
                try:
                    took = measure_join(kind, n)
                except RuntimeError as exc:  # recorded as a run without a result
                    print(f"  join {kind} N={n}: FAILED: {exc}")
                    continue
                runs.append(took)
                print(f"  join {kind} N={n}: view {took:.3f}s")
    print(f"\nOne member joining a formed group of N-1: median (min-max) of {repeat}")
    print(f"{'':<5}{'N':>3}{'runs':>5}  {'go -> view of N':<24}")
    for (kind, n), runs in sorted(results.items()):
        print(f"{kind.upper():<5}{n:>3}{len(runs):>5}  {_spread(runs, 's', 3):<24}")


def _fd_attempt(kind: str, n: int, fd: dict[str, float], fast: bool, victim: str) -> float | None:
    try:
        return measure_fd(kind, n, fd, fast, victim)
    except RuntimeError as exc:  # recorded as a run without a result
        print(f"  fd {kind} {'fast' if fast else 'default'}: FAILED: {exc}")
        return None


def run_fd(kinds: list[str], n: int, victim: str, repeat: int, default_repeat: int) -> None:
    results: dict[tuple[str, str], list[float]] = {}
    settings = {(kind, fast): _fd_settings(kind, fast) for kind in kinds for fast in (True, False)}
    for i in range(max(repeat, default_repeat)):
        for fast in (True, False):
            todo = kinds if i < (repeat if fast else default_repeat) else []
            # the default runs mostly wait out the timeout: the transports wait side by side
            with ThreadPoolExecutor(max_workers=1 if fast else len(kinds) or 1) as pool:
                fds = [settings[kind, fast] for kind in todo]
                more = [n] * len(todo), fds, [fast] * len(todo), [victim] * len(todo)
                tooks = pool.map(_fd_attempt, todo, *more)
                for kind, took in zip(todo, tooks, strict=True):
                    label = "fast" if fast else "default"
                    results.setdefault((kind, label), [])
                    if took is not None:
                        results[kind, label].append(took)
                        print(f"  fd {kind} {label}: new view {took:.2f}s after SIGKILL")
    print(f"\nFailure detection, group of {n}, SIGKILL of the {victim}: median (min-max)")
    print(f"{'':<5}{'settings':<40}{'runs':>5}  {'kill -> view':<24}{'expected':<20}")
    for (kind, label), runs in sorted(results.items()):
        fd = settings[kind, label == "fast"]
        desc = (
            f"{label}: FD_ALL3 {fd['interval']:g}/{fd['timeout']:g}s, "
            f"VERIFY {fd['verify_timeout']:g}s"
        )
        low = fd["timeout"] - fd["interval"] + fd["verify_timeout"]
        high = fd["timeout"] + fd["interval"] + fd["verify_timeout"]
        print(f"{kind.upper():<5}{desc:<40}{len(runs):>5}  {_spread(runs):<24}{low:g}-{high:g}s")


def run_rpc(kinds: list[str], seconds: float, callers: list[int], repeat: int) -> None:
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for _ in range(repeat):
        for kind in kinds:
            for k in callers:
                runs = results.setdefault((kind, k), [])
                try:
                    r = measure_rpc(kind, seconds, k)
                except RuntimeError as exc:  # recorded as a run without a result
                    print(f"  rpc {kind} callers={k}: FAILED: {exc}")
                    continue
                runs.append(r)
                rate = r["calls"] / r["seconds"]
                print(
                    f"  rpc {kind} callers={k}: {rate:,.0f} calls/s, "
                    f"p50 {r['p50'] * 1e3:.2f}ms p99 {r['p99'] * 1e3:.2f}ms, failed {r['failed']}"
                )
    print(f"\nGroup RPC, N=3, mode all, {seconds:g}s per run: median (min-max) of {repeat} runs")
    print(
        f"{'':<5}{'callers':>8}{'runs':>5}  {'calls/s':<24}{'p50':<26}{'p99':<26}"
        f"{'failed calls':>12}"
    )
    for (kind, k), runs in sorted(results.items()):
        rates = [r["calls"] / r["seconds"] for r in runs]
        p50 = [r["p50"] * 1e3 for r in runs]
        p99 = [r["p99"] * 1e3 for r in runs]
        print(
            f"{kind.upper():<5}{k:>8}{len(runs):>5}  {_spread(rates, '', 0):<24}"
            f"{_spread(p50, 'ms'):<26}{_spread(p99, 'ms'):<26}{sum(r['failed'] for r in runs):>12}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="membership and group RPC over processes")
    parser.add_argument("--parts", default="formation,join,fd,rpc")
    parser.add_argument("--kinds", default="udp,tcp")
    parser.add_argument("--sizes", default="2,4,8", help="group sizes for view formation")
    parser.add_argument("--repeat", type=int, default=3, help="runs of formation and rpc")
    parser.add_argument("--fd-members", type=int, default=4)
    parser.add_argument("--fd-victim", choices=["participant", "coord"], default="participant")
    parser.add_argument("--fd-repeat", type=int, default=3, help="runs with fast FD settings")
    parser.add_argument("--fd-default-repeat", type=int, default=1, help="runs, default FD")
    parser.add_argument("--rpc-seconds", type=float, default=3.0)
    parser.add_argument("--rpc-callers", default="1,8", help="concurrent calling tasks")
    parser.add_argument("--tcp-hosts", choices=["listed", "range"], default="listed")
    opts = parser.parse_args()
    _Group.tcp_hosts = opts.tcp_hosts
    parts = opts.parts.split(",")
    kinds = opts.kinds.split(",")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} cores")
    if "formation" in parts:
        run_formation(kinds, [int(s) for s in opts.sizes.split(",")], opts.repeat)
    if "join" in parts:
        run_join(kinds, [int(s) for s in opts.sizes.split(",")], opts.repeat)
    if "fd" in parts:
        run_fd(kinds, opts.fd_members, opts.fd_victim, opts.fd_repeat, opts.fd_default_repeat)
    if "rpc" in parts:
        callers = [int(c) for c in opts.rpc_callers.split(",")]
        run_rpc(kinds, opts.rpc_seconds, callers, opts.repeat)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "_member":
        trio.run(_member, json.loads(sys.argv[2]))
    else:
        main()
