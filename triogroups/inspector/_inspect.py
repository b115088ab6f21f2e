"""``triogroups inspect``: the live inspector on the members that answer probes.

Each round is one `probe` (the answers that arrive within ``--timeout``),
folded into the display by `run_tui`. With a terminal on stdin, keys move the
selection and q or Ctrl-C quit, the terminal restored; without one there are
no keys and it runs until interrupted (SIGINT), which ends it with status 0
(output that is not a terminal gets the last frame then).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio
from rich.console import Console

from triogroups._cli_exit import fail
from triogroups.inspector._cli import _secret as read_secret
from triogroups.inspector._keys import raw_keys
from triogroups.inspector._probe import probe
from triogroups.inspector._tui import Source, run_tui
from triogroups.transports.base import SECRET_ENV

__all__ = [
    "add_inspect_arguments",
    "add_inspect_parser",
    "check_args",
    "probe_source",
    "run_inspect",
    "watch",
]


def add_inspect_parser(sub: Any) -> None:
    """Add the ``inspect`` subcommand to the ``triogroups`` subparsers ``sub``."""
    inspect = sub.add_parser(
        "inspect",
        help="watch live clusters: views, counters, windows, warnings",
        description="A live view of every member that answers probes: the clusters and their "
        "views side by side (a split in red), per member and protocol the counters with rates "
        "per second, window fill and flow-control credits as bars, a throughput sparkline, "
        "retransmission and suspicion warnings; a member that left is shown as left, a "
        "restarted one as NAME#2. Keys: up/down (j/k) member, left/right (h/l, Tab) protocol, "
        "/ filter, s sort, ? help, q or Ctrl-C quit.",
    )
    inspect.add_argument("--cluster", help="only this cluster (needed with a shared secret)")
    inspect.add_argument(
        "--secret-file", help=f"the cluster's shared secret (default: ${SECRET_ENV} if set)"
    )
    add_inspect_arguments(inspect)


def add_inspect_arguments(inspect: argparse.ArgumentParser) -> None:
    """The options of every inspector view: how often, how long, where to probe."""
    inspect.add_argument(
        "--interval", type=float, default=1.0, help="seconds between refreshes (default 1)"
    )
    inspect.add_argument(
        "--timeout",
        type=float,
        default=0.5,
        help="seconds each probe waits for answers (default 0.5)",
    )
    inspect.add_argument("--bind", default="127.0.0.1", help="interface (default 127.0.0.1)")
    inspect.add_argument("--addr", default="224.0.75.75", help="diagnostics multicast group")
    inspect.add_argument(
        "--port", type=int, default=7500, help="the members' diagnostics_port (default 7500)"
    )
    inspect.add_argument(
        "--port-range", type=int, default=50, help="TCP ports tried above --port (default 50)"
    )
    inspect.add_argument(
        "--silent-after",
        type=float,
        default=2.5,
        help="seconds without an answer before a member is shown silent (default 2.5)",
    )
    inspect.add_argument(
        "--forget-after",
        type=float,
        default=10.0,
        help="seconds without an answer before a member is removed (default 10)",
    )


def check_args(args: argparse.Namespace) -> str | None:
    """What is wrong with the inspector's options, or None."""
    for name in ("interval", "timeout", "silent_after", "forget_after"):
        value = getattr(args, name)
        if value <= 0:
            return f"--{name.replace('_', '-')} must be > 0, got {value}"
    if not 0 < args.port < 65536:
        return f"--port must be a port (1-65535), got {args.port}"
    if args.port_range < 0:
        return f"--port-range must be >= 0, got {args.port_range}"
    return None


def probe_source(
    args: argparse.Namespace, cluster: str | None, secret: bytes | None = None
) -> Source:
    """One `probe` per round, for ``cluster`` (None: every cluster), where ``args`` say."""

    async def source() -> Sequence[Mapping[str, Any]]:
        return await probe(
            cluster=cluster,
            timeout=args.timeout,
            secret=secret,
            bind_addr=args.bind,
            diagnostics_addr=args.addr,
            diagnostics_port=args.port,
            port_range=args.port_range,
        )

    return source


async def watch(
    source: Source,
    console: Console,
    args: argparse.Namespace,
    note: Callable[[], str] | None = None,
) -> None:
    """`run_tui` with keys from stdin when it is a terminal (restored after), else without."""
    options: dict[str, Any] = {
        "interval": args.interval,
        "silent_after": args.silent_after,
        "forget_after": args.forget_after,
        "note": note,
    }
    if not sys.stdin.isatty():
        await run_tui(source, console, screen=console.is_terminal, **options)
        return
    async with raw_keys(sys.stdin.fileno()) as keys:
        await run_tui(source, console, keys=keys, **options)


def run_inspect(args: argparse.Namespace, console: Console) -> int:
    """Run the inspector until q, Ctrl-C or SIGINT; returns the exit status."""
    problem = check_args(args)
    try:
        secret = read_secret(args)
    except ValueError as exc:
        problem = problem or str(exc)
    if problem is not None:
        return fail("inspect", problem)
    with contextlib.suppress(KeyboardInterrupt):  # SIGINT without a terminal: a normal end
        trio.run(watch, probe_source(args, args.cluster, secret), console, args)
    return 0
