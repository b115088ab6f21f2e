"""The ``triogroups`` command.

Subcommands:
  demo      run a local demo cluster and show what it delivered
  stacks    list the stack presets and their layers
  protocol  show a protocol's properties with defaults and docs
  launch    run an application as N supervised member processes
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import trio
from rich.console import Console
from rich.table import Table

from triogroups.config import StackConfig, preset_names
from triogroups.properties import PropertyError
from triogroups.protocol import protocol_class, protocol_names
from triogroups.supervisor._launch import add_launch_parser, run_launch

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="triogroups", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a local demo cluster")
    demo.add_argument("--members", type=int, default=3, help="how many members (default 3)")
    demo.add_argument("--messages", type=int, default=1000, help="multicasts per member")
    demo.add_argument("--loss", type=float, default=0.1, help="simulated loss (default 0.1)")
    demo.add_argument("--seed", type=int, default=1, help="seed of the simulated faults")
    demo.add_argument("--sim", action="store_true", help="one process, simulated network")
    demo.add_argument("--stack", choices=["udp", "tcp"], default="udp", help="real demo's stack")
    sub.add_parser("stacks", help="list stack presets")
    proto = sub.add_parser("protocol", help="show a protocol's properties")
    proto.add_argument("name", nargs="?", help="protocol name, e.g. DISCARD (omit to list)")
    add_launch_parser(sub)
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
    table = Table(title=f"{name} properties")
    for column in ("property", "default", "doc"):
        table.add_column(column)
    for key, (default, doc) in sorted(cls.property_docs().items()):
        table.add_row(key, repr(default), doc)
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = _parser().parse_args(argv)
    console = Console()
    if args.command == "launch":
        return run_launch(args, console)
    try:
        if args.command == "demo" and not args.sim:
            from triogroups.supervisor._demo import run_real_demo

            return trio.run(run_real_demo, console, args)
        if args.command == "demo":
            from triogroups._demo import run_demo

            return trio.run(run_demo, console, args)
        if args.command == "stacks":
            _stacks(console)
        elif args.command == "protocol":
            _protocol(console, args.name)
    except PropertyError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
