"""The process supervisor: launch to the first view of N, SIGKILL to back in the view, RSS.

    python benchmarks/bench_supervisor.py [--kinds udp,tcp] [--sizes 2,4,8] [--repeat 3]

Every member is a process started by `open_process_group` with the shipped ``udp`` or ``tcp``
preset on ports of its own (UDP: a random ``mcast_port``; TCP: a random ``bind_port`` base and
TCPPING listing the N ports from there), running an idle application.

- **launch**: from entering `open_process_group` to `wait_for_view(N)` returning (every member
  installed one view of N). This includes Python start-up and imports of every member, and the
  supervisor's order: the first member alone until it joined (it becomes the coordinator, after
  GMS ``join_timeout`` of discovery finding nobody), then the others at once.
- **restart**: a group of three with fast failure detection (FD_ALL3 0.5 s / 3 s,
  VERIFY_SUSPECT 1 s); member B is SIGKILLed; the time until the restarted B joined (a new
  incarnation), and until every member's view is back to three current incarnations (which
  also waits for failure detection to remove the dead B from the others' views).
- **rss**: resident memory of each idle member once the view formed (``VmRSS``).

Medians of ``--repeat`` runs; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import time
from pathlib import Path

import trio

from triogroups import MemberJoined, StackConfig, open_process_group
from triogroups._ports import free_ports


async def idle(ch: object) -> None:
    await trio.sleep_forever()


def _quiet(name: str, line: str) -> None:
    pass


def _stack(kind: str, members: int, fast_fd: bool = False) -> StackConfig:
    config = StackConfig.preset(kind)
    if kind == "udp":
        config = config.configure("UDP", mcast_port=free_ports())
    else:
        base = free_ports(members + 6)
        config = config.configure("TCP", bind_port=base, port_range=members + 5)
        hosts = [f"127.0.0.1[{base + i}]" for i in range(members)]
        config = config.configure("TCPPING", initial_hosts=hosts, port_range=0)
    if fast_fd:
        config = config.configure("FD_ALL3", interval=0.5, timeout=3.0)
        config = config.configure("VERIFY_SUSPECT", timeout=1.0)
    return config


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def launch_once(kind: str, n: int) -> tuple[float, list[float]]:
    start = time.perf_counter()
    async with open_process_group(idle, n, stack=_stack(kind, n), output=_quiet) as group:
        with trio.fail_after(120):
            await group.wait_for_view(n)
        took = time.perf_counter() - start
        rss = [_rss_mib(m.pid) for m in group.members if m.pid is not None]
    return took, rss


async def restart_once(kind: str) -> tuple[float, float]:
    stack = _stack(kind, 3, fast_fd=True)
    async with open_process_group(idle, 3, stack=stack, output=_quiet) as group:
        with trio.fail_after(120):
            await group.wait_for_view(3)
            events = group.events()
            killed = time.perf_counter()
            group.kill("B", signal.SIGKILL)
            async for event in events:
                if isinstance(event, MemberJoined) and event.name == "B":
                    break
            joined = time.perf_counter() - killed
            await group.wait_for_view(3)
            back = time.perf_counter() - killed
    return joined, back


async def main(args: argparse.Namespace) -> None:
    kinds = args.kinds.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    for kind in kinds:
        for n in sizes:
            runs = [await launch_once(kind, n) for _ in range(args.repeat)]
            took = statistics.median(t for t, _ in runs)
            rss = statistics.median(r for _, rs in runs for r in rs)
            print(
                f"launch {kind} N={n}: first view of N after {took:.2f} s; idle RSS {rss:.1f} MiB"
            )
        restarts = [await restart_once(kind) for _ in range(args.repeat)]
        joined = statistics.median(j for j, _ in restarts)
        back = statistics.median(b for _, b in restarts)
        print(
            f"restart {kind} N=3: SIGKILL to the new B joined {joined:.2f} s, "
            f"to every view back to 3 {back:.2f} s"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="process supervisor: launch, restart, RSS")
    parser.add_argument("--kinds", default="udp,tcp")
    parser.add_argument("--sizes", default="2,4,8")
    parser.add_argument("--repeat", type=int, default=3)
    trio.run(main, parser.parse_args())
