"""``triogroups spark``: run a member function as a group in one barrier stage.

The master is ``--master``, else the one ``spark-submit``, ``PYSPARK_SUBMIT_ARGS``,
``SPARK_MASTER`` or ``spark-defaults.conf`` gives, else ``local[N]`` for N members
(`session_master`). Checks before starting anything: the app
loads and is an async function, the stack resolves, pyspark and Java are there, a master
whose string says its slots (``local[K]``, ``local-cluster``) has the N (each a one-line
error and exit status 2, no traceback, no JVM left behind); on a cluster manager the stage
waits up to ``--formation-timeout`` for executors with N slots to register. Then one
`run_group` on a session made by `spark_session` and each member's result printed by
partition. Exit status 0 when every member returned, 1 when one failed (its
traceback is printed).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.markup import escape

from triogroups.supervisor._app import AppError, load_app, resolve_stack
from triogroups.supervisor.spark._driver import is_async, run_group
from triogroups.supervisor.spark._setup import (
    SparkGroupError,
    SparkUnavailable,
    find_java,
    master_slots,
    require_pyspark,
    session_master,
    spark_session,
)
from triogroups.supervisor.spark._task import SparkTask

__all__ = ["add_spark_parser", "run_spark"]

_EXAMPLE = """example:
  triogroups spark examples/spark_hello.py:member -n 4 --master local[4]

APP is module:function or path/to/file.py:function, an async function taking the member's
connected channel, its SparkTask (partition, members, generation) and then the ARGS strings:
async def member(ch, task, *args). Its return value is printed per partition. The options may
come before or after APP.
"""


def _add_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """The options; without ``defaults`` an option not given leaves the namespace alone."""

    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument("-n", type=int, default=default(2), help="how many members (default 2)")
    parser.add_argument(
        "--master",
        default=default(None),
        help="Spark master (default: spark-submit's, SPARK_MASTER or spark-defaults.conf's, "
        "else local[N])",
    )
    parser.add_argument(
        "--stack", default=default("spark"), help="preset name or TOML file (default spark)"
    )
    parser.add_argument(
        "--formation-timeout",
        type=float,
        default=default(60.0),
        help="seconds to form the group (default 60)",
    )


def add_spark_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    spark = sub.add_parser(
        "spark",
        help="run an application as a group in a Spark barrier stage",
        description="Run APP as N members of one group, one per task of a Spark barrier stage.",
        epilog=_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_options(spark, defaults=True)
    spark.add_argument("app", help="module:function or path/to/file.py:function")
    spark.add_argument("args", nargs=argparse.REMAINDER, help="strings passed to the app")


def _options_after_app(args: argparse.Namespace) -> None:
    """Take the options written after APP out of its ARGS (``spark APP -n 4 x``)."""
    late = argparse.ArgumentParser(prog="triogroups spark", add_help=False)
    _add_options(late, defaults=False)
    _, args.args = late.parse_known_args(args.args, namespace=args)


def run_spark(args: argparse.Namespace, console: Console) -> int:
    """Run the ``spark`` subcommand; returns the exit status."""
    errors = Console(stderr=True)
    _options_after_app(args)
    try:
        if args.n < 1:
            raise AppError(f"-n must be >= 1, got {args.n}")
        app = load_app(args.app)
        if not is_async(app):
            raise AppError(
                f"app {args.app!r} must be an async function: async def {args.app.rsplit(':')[-1]}"
                f"(ch, task, *args)"
            )
        stack = resolve_stack(args.stack)
        master = session_master(args.master, None, f"local[{args.n}]")
        slots = None if master is None else master_slots(master)
        if slots is not None and args.n > slots:
            raise AppError(
                f"-n {args.n} needs {args.n} task slots at once, master {master} has {slots}"
            )
        require_pyspark()
        find_java()
    except (AppError, SparkUnavailable) as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    extra = tuple(args.args)

    async def member(ch: Any, task: SparkTask) -> Any:
        return await app(ch, task, *extra)

    member.__module__ = app.__module__  # a file app travels by value, with its module
    from pyspark.sql import SparkSession

    ours = SparkSession.getActiveSession() is None  # stop only the session started here
    session = spark_session(master, "triogroups spark")
    try:
        results = run_group(
            session, args.n, member, stack=stack, formation_timeout=args.formation_timeout
        )
    except SparkGroupError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2 if exc.member is None else 1
    finally:
        if ours:
            session.stop()
    for partition, result in enumerate(results):
        console.print(f"p{partition}: {result!r}", highlight=False, markup=False, soft_wrap=True)
    return 0
