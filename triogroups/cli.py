"""The ``triogroups`` command.

Subcommands:
  demo      run a local demo cluster and show what it delivered
  stacks    list the stack presets and their layers
  protocol  show a protocol's properties with defaults and docs
  launch    run an application as N supervised member processes
  probe     ask live members for their view, stack and stats (diagnostics)
  inspect   watch live clusters: views, counters, warnings (the TUI)
  spark     run an application as a group in a Spark barrier stage
  chaos     member processes under seeded faults, checked afterwards
  campaign  many seeded simulated runs under faults, each checked
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import uuid
from collections.abc import Sequence
from functools import partial

from rich.console import Console
from rich.table import Table
from rich.text import Text

from triogroups import __version__, _compiled
from triogroups._cli_exit import EXIT_STATUS, Stopped, fail, run_stoppable, stopped
from triogroups.chaos import add_chaos_parser, run_chaos
from triogroups.chaos._campaign import add_campaign_parser, run_campaign
from triogroups.config import StackConfig, preset_names
from triogroups.inspector._cli import add_probe_parser, run_probe
from triogroups.inspector._inspect import add_inspect_parser, run_inspect
from triogroups.properties import PropertyError, property_rows
from triogroups.protocol import protocol_class, protocol_names
from triogroups.supervisor._launch import add_launch_parser, run_launch, split_app_args
from triogroups.supervisor.spark._cli import add_spark_parser, run_spark
from triogroups.wire import LOOP

__all__ = ["main"]


_DESCRIPTION = "triogroups: reliable group communication for Python, on Trio."
_EPILOG = """examples:
  triogroups demo --members 5 --loss 0.2   a lossy group that still delivers everything
  triogroups demo --sim --seed 7           the same in one process, replayable by its seed
  triogroups launch -n 3 examples/greeter.py:member   an application as supervised processes
  triogroups stacks                        the stack presets and their layers
  triogroups protocol UNICAST3             a protocol's properties, defaults and rules

{exit_status}"""
_DEMO_DESCRIPTION = """\
Member processes started by the supervisor multicast over real UDP (or TCP) on loopback
while DISCARD drops a share of what arrives and one member is SIGKILLed and restarted;
every member must deliver every message sent while it was in the view. With --sim the
members run in one process on the simulated network on a virtual clock, so a seed replays
its run exactly."""
_DEMO_EPILOG = """examples:
  triogroups demo                          3 member processes over UDP, 10% loss, B restarted
  triogroups demo --cluster demo           the same on a cluster name of your choice; in another
                                           terminal: triogroups probe --cluster demo
  triogroups demo --stack tcp              over TCP (no DISCARD layer, so no --loss)
  triogroups demo --sim --seed 7           one process, simulated network, replayable by its seed

The real demo prints its cluster name first (a fresh one unless --cluster names it): probe or
inspect it there while it runs.

{exit_status}"""
PIPED_WIDTH = 10_000
"""Console width when stdout is not a terminal (and $COLUMNS is not set): a wide table keeps
every cell whole instead of being cut to rich's 80 columns."""
DEMO_LOSS = 0.1
DEMO_SEED = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="triogroups",
        description=_DESCRIPTION,
        epilog=_EPILOG.format(exit_status=EXIT_STATUS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # The second line says whether this install runs the compiled core, which a user cannot
    # see otherwise without configuring logging (a member logs it at INFO on start).
    version = f"triogroups {__version__}\nwire codec: {_compiled.describe(LOOP)}"
    parser.add_argument("--version", action="version", version=version)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="run a local demo cluster",
        description=_DEMO_DESCRIPTION,
        epilog=_DEMO_EPILOG.format(exit_status=EXIT_STATUS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--members", type=int, default=3, help="how many members (default 3)")
    demo.add_argument(
        "--messages", type=int, default=1000, help="multicasts per member (default 1000)"
    )
    demo.add_argument(
        "--loss",
        type=float,
        default=None,
        help=f"share of arrivals DISCARD drops (default {DEMO_LOSS}; not with --stack tcp)",
    )
    demo.add_argument(
        "--seed",
        type=int,
        default=None,
        help=f"only with --sim: seed of the faults and the scheduling (default {DEMO_SEED})",
    )
    demo.add_argument("--sim", action="store_true", help="one process, simulated network")
    demo.add_argument(
        "--stack", choices=["udp", "tcp"], default=None, help="the real demo's stack (default udp)"
    )
    demo.add_argument(
        "--cluster",
        default=None,
        help="the real demo's cluster name, for probe and inspect (default: a fresh one, printed)",
    )
    demo.add_argument("--inspect", action="store_true", help="watch it live in the inspector")
    sub.add_parser("stacks", help="list stack presets")
    proto = sub.add_parser("protocol", help="show a protocol's properties")
    proto.add_argument("name", nargs="?", help="protocol name, e.g. DISCARD (omit to list)")
    add_launch_parser(sub)
    add_probe_parser(sub)
    add_inspect_parser(sub)
    add_spark_parser(sub)
    add_chaos_parser(sub)
    add_campaign_parser(sub)
    return parser


def _stacks(console: Console) -> None:
    table = Table(title="stack presets (bottom first)")
    table.add_column("preset")
    table.add_column("layers")
    for name in preset_names():
        table.add_row(name, " -> ".join(StackConfig.preset(name).names()))
    console.print(table)


def _protocol(console: Console, name: str | None) -> None:
    if name is None:
        console.print(" ".join(protocol_names()))
        return
    cls = protocol_class(name)
    table = Table(title=f"{name} properties (durations and sizes as a TOML stack writes them)")
    table.add_column("property", no_wrap=True)  # the name to type: never cut short
    for column in ("default", "rule", "doc"):
        table.add_column(column)
    for row in property_rows(cls.declared_properties()):
        table.add_row(*map(Text, row))  # text, not markup: TCPPING's "host[port]" stays whole
    console.print(table, highlight=False)


def _demo_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the demo's options (one that does not apply is refused, not
    ignored), or None; fills in the defaults that depend on the others."""
    real = not args.sim
    if args.sim and args.inspect:
        return "--inspect watches member processes: it needs the real demo, not --sim"
    if args.sim and args.stack is not None:
        return "--stack chooses the real demo's stack: --sim runs on the simulated network"
    if args.sim and args.cluster is not None:
        return "--cluster names the real demo's cluster: --sim has no processes to probe"
    if real and args.seed is not None:
        return "--seed replays a --sim run: the real demo's faults are not seeded"
    if args.stack == "tcp" and args.loss is not None:
        return (
            "--loss does not apply to --stack tcp: the TCP demo has no DISCARD layer "
            "(use the udp stack to watch retransmission heal loss)"
        )
    low_members, low_messages = (2, 3) if real else (1, 0)
    if args.members < low_members:
        return f"--members must be >= {low_members}, got {args.members}"
    if args.messages < low_messages:
        return f"--messages must be >= {low_messages}, got {args.messages}"
    if args.loss is not None and not 0 <= args.loss < 1:
        return f"--loss must be in [0, 1), got {args.loss:g}"
    if args.cluster is not None and not 1 <= len(args.cluster.encode()) <= 255:
        return f"--cluster must be 1..255 bytes of utf-8, got {args.cluster!r}"
    args.stack = args.stack or "udp"
    args.loss = (0.0 if args.stack == "tcp" else DEMO_LOSS) if args.loss is None else args.loss
    args.seed = DEMO_SEED if args.seed is None else args.seed
    if real:
        args.cluster = args.cluster or f"demo-{uuid.uuid4().hex[:8]}"
    return None


def _real_demo(console: Console, args: argparse.Namespace) -> int:
    """The real demo, on the cluster it names first; Ctrl-C or SIGTERM stop its members."""
    from triogroups._demo._real import run_real_demo

    console.print(
        f"cluster {args.cluster} (probe it: triogroups probe --cluster {args.cluster})",
        highlight=False,
        markup=False,  # a name of the user's, printed as given
    )
    status = run_stoppable(partial(run_real_demo, console, args, cluster=args.cluster))
    if isinstance(status, Stopped):
        if not console.is_terminal:
            console.print()  # the last frame of the live table, left unterminated
        return stopped("demo", status, "its member processes were stopped; nothing was checked")
    return status


def _console() -> Console:
    """The console of stdout: as wide as the terminal, or `PIPED_WIDTH` when piped."""
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=PIPED_WIDTH)
    return console


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    argv, app_args = split_app_args(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    try:
        return _run(args, _console(), app_args)
    except KeyboardInterrupt:  # Ctrl-C outside a run that stops cleanly by itself
        return stopped(args.command, Stopped(signal.SIGINT))


def _run(args: argparse.Namespace, console: Console, app_args: list[str] | None) -> int:
    if args.command == "launch":
        return run_launch(args, console, app_args)
    if args.command == "probe":
        return run_probe(args, console)
    if args.command == "inspect":
        return run_inspect(args, console)
    if args.command == "spark":
        return run_spark(args, console)
    if args.command == "chaos":
        return run_chaos(args, console)
    if args.command == "campaign":
        return run_campaign(args, console)
    if args.command == "demo":
        problem = _demo_problem(args)
        if problem is not None:
            return fail("demo", problem)
        if args.inspect:
            from triogroups._demo._inspect import run_demo_inspect

            return run_demo_inspect(args, console)
        if not args.sim:
            return _real_demo(console, args)
        from triogroups._demo._sim import run

        return run(console, args)
    try:
        if args.command == "stacks":
            _stacks(console)
        elif args.command == "protocol":
            _protocol(console, args.name)
    except PropertyError as exc:
        return fail(args.command, str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
