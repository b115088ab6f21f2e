"""``triogroups launch``: run an application as N supervised member processes.

The command is a thin shell over `open_process_group`: it checks its input before starting
anything (a bad app, file, stack or count is one line on stderr and exit status 2, with no
process started), prints every member's output in one stream prefixed with its name and
coloured per member, adds one line per membership event, and turns SIGINT and SIGTERM into a
graceful stop. Exit status: 0 when the members ended cleanly or were stopped; 1 when the group
gave up past its restart intensity or a member ended with an error and was not restarted.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

import trio
from rich.console import Console
from rich.text import Text

from triogroups.actors import Restart
from triogroups.supervisor._app import AppError, load_app, resolve_stack
from triogroups.supervisor._events import (
    GroupEvent,
    MemberExited,
    MemberJoined,
    MemberRestarted,
    MemberView,
    ProcessGroupFailed,
)
from triogroups.supervisor._group import ProcessGroup, open_process_group
from triogroups.supervisor._logs import LOG_FORMATS, LOG_LEVELS, json_line
from triogroups.supervisor._members import default_name

__all__ = ["add_launch_parser", "run_launch"]

_RESTART = {
    "always": Restart.PERMANENT,
    "on-failure": Restart.TRANSIENT,
    "never": Restart.TEMPORARY,
}
_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")
_EXAMPLE = """example:
  triogroups launch -n 3 examples/greeter.py:member --stack udp --restart on-failure

APP is module:function or path/to/file.py:function, an async function taking the member's
connected channel and then the ARGS strings: async def member(ch, *args). Options go before APP.
"""


def add_launch_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    launch = sub.add_parser(
        "launch",
        help="run an application as N supervised member processes",
        description="Run APP as N member processes in one group, restarting them by policy.",
        epilog=_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    launch.add_argument("-n", type=int, default=3, help="how many members (default 3)")
    launch.add_argument("--stack", default="udp", help="preset name or TOML file (default udp)")
    launch.add_argument("--cluster", default=None, help="cluster name (default: a fresh one)")
    launch.add_argument(
        "--restart",
        choices=sorted(_RESTART),
        default="on-failure",
        help="when a member that ended starts again (default on-failure)",
    )
    launch.add_argument(
        "--max-restarts", type=int, default=3, help="restarts allowed within the window"
    )
    launch.add_argument(
        "--restart-window", type=float, default=5.0, help="the window, in seconds (default 5)"
    )
    launch.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text: name | line, coloured; json: one JSON object per line (default text)",
    )
    launch.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="WARNING",
        help="the members' log records from this level up (default WARNING; INFO adds views)",
    )
    launch.add_argument("app", metavar="APP", help="module:function or file.py:function")
    launch.add_argument("args", metavar="ARGS", nargs=argparse.REMAINDER, help="the app's args")


def _check(args: argparse.Namespace) -> None:
    if args.n < 1:
        raise AppError(f"-n must be >= 1, got {args.n}")
    if args.max_restarts < 0:
        raise AppError(f"--max-restarts must be >= 0, got {args.max_restarts}")
    if not args.restart_window > 0:
        raise AppError(f"--restart-window must be > 0, got {args.restart_window}")
    resolve_stack(args.stack)
    load_app(args.app)


def run_launch(args: argparse.Namespace, console: Console) -> int:
    """Check the input, then run the group until it ends or a signal stops it."""
    try:
        _check(args)
    except AppError as exc:
        print(f"triogroups launch: error: {exc}", file=sys.stderr)
        return 2
    return trio.run(_launch, args, console)


class _Printer:
    """One stream for everyone. Text: ``name | line``, a colour per member, and event lines.
    JSON: one object per line (member, level, logger, message, time; ``event`` on the
    supervisor's own lines), for tools."""

    def __init__(self, console: Console, names: list[str], log_format: str) -> None:
        self.console = console
        self.json = log_format == "json"
        self.width = max(len(name) for name in [*names, "launch"])
        self.colours: dict[str, str] = {}

    def line(self, name: str, text: str) -> None:
        if self.json:
            print(json_line(name, text), flush=True)
            return
        colour = self.colours.setdefault(name, _COLOURS[len(self.colours) % len(_COLOURS)])
        self.console.print(
            Text.assemble((f"{name:>{self.width}} | ", colour), text), soft_wrap=True
        )

    def note(self, text: str, member: str = "", event: str = "") -> None:
        if self.json:
            record = {
                "member": member,
                "level": "INFO",
                "logger": "triogroups.launch",
                "message": text,
                "time": time.time(),
                "event": event,
            }
            print(json.dumps(record), flush=True)
            return
        line = Text.assemble((f"{'launch':>{self.width}} | ", "bold"), (text, "dim"))
        self.console.print(line, soft_wrap=True)

    def event(self, event: GroupEvent) -> None:
        if isinstance(event, MemberJoined):
            text = f"{event.name} joined as {event.address} (pid {event.pid})"
            self.note(text, event.name, "joined")
        elif isinstance(event, MemberView):
            names = ", ".join(str(m) for m in event.members)
            self.note(
                f"{event.name} installed view {event.view_id.id} [{names}]", event.name, "view"
            )
        elif isinstance(event, MemberExited):
            how = "stopped" if event.expected else "ended"
            text = f"{event.name} {how}: {event.reason} (pid {event.pid})"
            self.note(text, event.name, "exited")
        elif isinstance(event, MemberRestarted):
            text = f"{event.name} restarted (incarnation {event.incarnation})"
            self.note(text, event.name, "restarted")


async def _stop_on_signal(stop: trio.CancelScope, own: trio.CancelScope, printer: _Printer) -> None:
    """Every SIGINT or SIGTERM until ``own`` is cancelled cancels ``stop`` (a graceful stop)."""
    with own, trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            printer.note(f"{signal.Signals(signum).name}: the members leave the group")
            stop.cancel()


async def _follow(events: trio.MemoryReceiveChannel[GroupEvent], printer: _Printer) -> None:
    async for event in events:
        printer.event(event)


async def _launch(args: argparse.Namespace, console: Console) -> int:
    printer = _Printer(console, [default_name(i) for i in range(args.n)], args.log_format)
    stack: str | Path = args.stack
    group: ProcessGroup | None = None
    failure: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            stop, signals = trio.CancelScope(), trio.CancelScope()
            nursery.start_soon(_stop_on_signal, stop, signals, printer)
            with stop:
                async with open_process_group(
                    args.app,
                    args.n,
                    stack=stack,
                    cluster=args.cluster,
                    args=args.args,
                    restart=_RESTART[args.restart],
                    max_restarts=args.max_restarts,
                    within=args.restart_window,
                    output=printer.line,
                    log_format=args.log_format,
                    log_level=args.log_level,
                ) as group:
                    for event in group.history:
                        printer.event(event)
                    nursery.start_soon(_follow, group.events(), printer)
                    await group.wait()
            signals.cancel()
    except* ProcessGroupFailed as failed:
        failure = failed.exceptions[0]
    if failure is not None:
        print(f"triogroups launch: error: {failure}", file=sys.stderr)
        return 1
    crashed = [] if group is None else [m.name for m in group.members if _crashed(group, m.name)]
    for name in crashed:
        printer.note(f"{name} ended with an error and was not restarted")
    return 1 if crashed else 0


def _crashed(group: ProcessGroup, name: str) -> bool:
    """Whether member ``name``'s last exit was its own error (not a stop that was asked for)."""
    exits = [e for e in group.history if isinstance(e, MemberExited) and e.name == name]
    return bool(exits) and not exits[-1].expected and exits[-1].returncode != 0
