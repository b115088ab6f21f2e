"""``triogroups demo --inspect``: the real demo, watched live in the inspector.

The demo runs as usual (member processes, DISCARD, B SIGKILLed and restarted)
on a cluster name of its own, and the inspector probes only that cluster: the
views shrink and grow, the retransmission warnings and the throughput show
while it runs. Its own output (the progress table, the summary and the
verdict) is kept and printed once the inspector is closed (q or Ctrl-C); the
header says when the demo has finished. Closing before that stops the member
processes gracefully and exits 1: nothing was checked. Without a terminal on
stdin (no keys) the inspector closes by itself when the demo ends.
"""

from __future__ import annotations

import argparse
import io
import sys
import uuid

import trio
from rich.console import Console

from triogroups._cli_exit import Stopped, run_stoppable, stopped
from triogroups._demo._real import run_real_demo
from triogroups.inspector._inspect import add_inspect_arguments, probe_source, watch

__all__ = ["run_demo_inspect"]


def run_demo_inspect(args: argparse.Namespace, console: Console) -> int:
    """Run the real demo under the inspector on ``args.cluster`` (default a fresh name);
    returns the demo's exit status. The arguments were checked by the command."""
    defaults = argparse.ArgumentParser()
    add_inspect_arguments(defaults)
    options = defaults.parse_args([])
    cluster = args.cluster or f"demo-{uuid.uuid4().hex[:8]}"
    output = io.StringIO()
    kept = Console(file=output, width=console.width, highlight=False)
    status: list[int] = []

    def note() -> str:
        if status:
            return f"demo finished (status {status[0]}): q for its summary"
        return f"demo running on cluster {cluster}"

    async def demo(done: trio.CancelScope) -> None:
        status.append(await run_real_demo(kept, args, cluster=cluster))
        if not sys.stdin.isatty():
            done.cancel()  # no keys to wait for: the summary at once

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(demo, nursery.cancel_scope)
            await watch(probe_source(options, cluster), console, options, note)
            nursery.cancel_scope.cancel()

    # Ctrl-C without a terminal, or SIGTERM, cancels the run: closing the demo's process
    # group stops and reaps its members, then one line and 130 or 143, as `demo` says
    result = run_stoppable(main)
    console.print(output.getvalue(), end="", highlight=False, markup=False)
    if isinstance(result, Stopped):
        return stopped("demo", result, "its member processes were stopped; nothing was checked")
    if not status:
        console.print("[yellow]the demo was stopped before it finished: nothing was checked[/]")
        return 1
    return status[0]
