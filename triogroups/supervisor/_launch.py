"""``triogroups launch``: run an application as N supervised member processes.

The command is a thin shell over `open_process_group`: it checks its input before starting
anything (a bad app, file, option, stack or count, or a stack this host cannot run, is one
line on stderr and exit status 2, with no process started; options may come before or after
APP, and the application's own arguments after ``--``), prints every member's output in one
stream prefixed with its name and coloured per member, adds one line per membership event, and
turns SIGINT and SIGTERM into a graceful stop. Exit status: 0 when the members ended cleanly
or were stopped; 1 when the group gave up past its restart intensity, a member could not start
(`StartupError`: a restart would meet it again), or a member ended with an error and was not
restarted.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import trio
from rich.console import Console
from rich.text import Text

from triogroups._layer import StartupError
from triogroups.actors import Restart
from triogroups.supervisor._app import AppError, load_app, resolve_stack, stack_label
from triogroups.supervisor._events import (
    GroupEvent,
    MemberExited,
    MemberJoined,
    MemberRestarted,
    MemberView,
    ProcessGroupFailed,
)
from triogroups.supervisor._group import ProcessGroup, open_process_group
from triogroups.supervisor._host import check_host
from triogroups.supervisor._intensity import MAX_RESTARTS, RESTART_WINDOW
from triogroups.supervisor._logs import LOG_FORMATS, LOG_LEVELS, json_line
from triogroups.supervisor._members import default_name

__all__ = ["add_launch_parser", "run_launch", "split_app_args"]

_RESTART = {
    "always": Restart.PERMANENT,
    "on-failure": Restart.TRANSIENT,
    "never": Restart.TEMPORARY,
}
_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")
_EXAMPLE = """example:
  triogroups launch -n 3 examples/greeter.py:member --stack udp --restart on-failure

APP is module:function or path/to/file.py:function, an async function taking the member's
connected channel and then the ARGS strings: async def member(ch, *args). The options may come
before or after APP; the application's own arguments that start with - go after --
(launch -n 3 app.py:member -- --verbose).

Restarts: a member that crashes is started again (--restart on-failure), at most
--max-restarts times (default 3) within --restart-window seconds (default 30) of running
time: the seconds spent starting members and the backoff before a start do not count, so a
member that crashes as it starts is given up on after 3 restarts however slow a start is
(about 25 s on a busy 2-core machine), and the command exits 1 naming the member, its exit
status and last output. A crash's traceback is shown once; a crash that repeats it shows its
last line.
A member that cannot start (a StartupError, such as a taken port) is not restarted: the
command stops every member and exits 1 with that error's one line. A bad stack (an unknown
protocol or property, a bad value, a broken rule, a bind_addr that is not this host's, a
port range smaller than -n) is refused before anything starts: one line, exit status 2.
"""


def _add_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """The options; without ``defaults`` an option not given leaves the namespace alone (the
    parser of the options written after APP)."""

    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument("-n", type=int, default=default(3), help="how many members (default 3)")
    parser.add_argument(
        "--stack", default=default("udp"), help="preset name or TOML file (default udp)"
    )
    parser.add_argument(
        "--cluster", default=default(None), help="cluster name (default: a fresh one)"
    )
    parser.add_argument(
        "--restart",
        choices=sorted(_RESTART),
        default=default("on-failure"),
        help="when a member that ended starts again (default on-failure)",
    )
    parser.add_argument(
        "--max-restarts",
        type=int,
        default=default(MAX_RESTARTS),
        help=f"restarts allowed within the window (default {MAX_RESTARTS})",
    )
    parser.add_argument(
        "--restart-window",
        type=float,
        default=default(RESTART_WINDOW),
        help=f"the window, in seconds of running time (default {RESTART_WINDOW:g})",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=default("text"),
        help="text: name | line, coloured; json: one JSON object per line (default text)",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=default("WARNING"),
        help="the members' log records from this level up (default WARNING; INFO adds views)",
    )


def add_launch_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    launch = sub.add_parser(
        "launch",
        help="run an application as N supervised member processes",
        description="Run APP as N member processes in one group, restarting them by policy.",
        epilog=_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_options(launch, defaults=True)
    launch.add_argument("app", metavar="APP", nargs="?", help="module:function or file.py:function")
    launch.add_argument("args", metavar="ARGS", nargs=argparse.REMAINDER, help="the app's args")


def split_app_args(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """``triogroups`` arguments cut at the first ``--`` after the ``launch`` command: what comes
    before (parsed as usual) and the application's own arguments after it (None without
    ``--``). argparse drops that ``--``, and without it ``launch`` could not tell an option
    written after APP from an application argument."""
    argv = list(argv)
    command = next((i for i, word in enumerate(argv) if not word.startswith("-")), None)
    if command is None or argv[command] != "launch" or "--" not in argv[command:]:
        return argv, None
    cut = argv.index("--", command)
    return argv[:cut], argv[cut + 1 :]


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def options_after_app(args: argparse.Namespace, app_args: list[str] | None) -> None:
    """Take the options written after APP out of its ARGS (``launch APP -n 4 x``), as
    ``triogroups spark`` does; what follows ``--`` is the application's, untouched. An
    unknown option after APP is refused (AppError): it is a typo or belongs after ``--``."""
    late = argparse.ArgumentParser(prog="triogroups launch", add_help=False, exit_on_error=False)
    _add_options(late, defaults=False)
    try:
        _, rest = late.parse_known_args(args.args, namespace=args)
    except argparse.ArgumentError as exc:
        raise AppError(str(exc)) from None
    for word in rest:
        if word.startswith("-") and not _is_number(word):
            raise AppError(
                f"unknown option {word!r} after APP: launch's options go before or after APP, "
                "the application's own after -- (launch -n 3 APP -- --its-option)"
            )
    if args.app is None:
        if not app_args:
            raise AppError("APP is missing: launch [options] APP [options] [ARGS] [-- ARGS]")
        args.app, app_args = app_args[0], app_args[1:]
    args.args = [*rest, *(app_args or [])]


def _check(args: argparse.Namespace) -> None:
    if args.n < 1:
        raise AppError(f"-n must be >= 1, got {args.n}")
    if args.max_restarts < 0:
        raise AppError(f"--max-restarts must be >= 0, got {args.max_restarts}")
    if not args.restart_window > 0:
        raise AppError(f"--restart-window must be > 0, got {args.restart_window}")
    check_host(resolve_stack(args.stack), args.n, stack_label(args.stack))
    load_app(args.app)


def run_launch(
    args: argparse.Namespace, console: Console, app_args: list[str] | None = None
) -> int:
    """Check the input, then run the group until it ends or a signal stops it. ``app_args``
    are the words after ``--`` (`split_app_args`)."""
    try:
        options_after_app(args, app_args)
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

    def record(self, record: logging.LogRecord) -> None:
        """One of the launcher's own log records: a ``launch |`` line, or in JSON its level
        and logger as they are."""
        if not self.json:
            self.note(f"{record.levelname.lower()}: {record.getMessage()}")
            return
        fields = {
            "member": "",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "time": record.created,
        }
        print(json.dumps(fields), flush=True)

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


class _NoteHandler(logging.Handler):
    """The launcher's own log records (the group's warnings) as ``launch |`` lines."""

    def __init__(self, printer: _Printer) -> None:
        super().__init__(logging.WARNING)
        self.printer = printer

    def emit(self, record: logging.LogRecord) -> None:
        self.printer.record(record)


async def _launch(args: argparse.Namespace, console: Console) -> int:
    printer = _Printer(console, [default_name(i) for i in range(args.n)], args.log_format)
    handler = _NoteHandler(printer)
    logging.getLogger("triogroups").addHandler(handler)
    try:
        return await _run_group(args, printer)
    finally:
        logging.getLogger("triogroups").removeHandler(handler)


async def _run_group(args: argparse.Namespace, printer: _Printer) -> int:
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
                    restart_window=args.restart_window,
                    output=printer.line,
                    log_format=args.log_format,
                    log_level=args.log_level,
                ) as group:
                    for event in group.history:
                        printer.event(event)
                    nursery.start_soon(_follow, group.events(), printer)
                    await group.wait()
            signals.cancel()
    except* (ProcessGroupFailed, StartupError) as failed:
        failure = failed.exceptions[0]
    if failure is not None:
        print(f"triogroups launch: error: {failure}", file=sys.stderr)
        return 1
    crashed = [] if group is None else [_crashed(group, m.name) for m in group.members]
    for end in filter(None, crashed):
        why = f": {end.output[-1]}" if end.output else ""
        print(
            f"triogroups launch: error: member {end.name!r} {end.reason} and was not restarted "
            f"(--restart {args.restart}){why}",
            file=sys.stderr,
        )
    return 1 if any(crashed) else 0


def _crashed(group: ProcessGroup, name: str) -> MemberExited | None:
    """Member ``name``'s last exit if it was its own error (not a stop that was asked for)."""
    exits = [e for e in group.history if isinstance(e, MemberExited) and e.name == name]
    if exits and not exits[-1].expected and exits[-1].returncode != 0:
        return exits[-1]
    return None
