"""``triogroups spark``: run a member function as a group in one barrier stage of a local Spark.

Checks before starting anything: the app loads, the stack resolves, pyspark and Java are
there, the master has the slots (each a one-line error and exit status 2, no traceback, no
JVM left behind). Then one `run_group` on a session made by `spark_session` and each member's
result printed by partition. Exit status 0 when every member returned, 1 when one failed (its
traceback is printed).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.markup import escape

from triogroups.supervisor._app import AppError, load_app, resolve_stack
from triogroups.supervisor.spark._driver import run_group
from triogroups.supervisor.spark._setup import (
    SparkGroupError,
    SparkUnavailable,
    find_java,
    require_pyspark,
    spark_session,
)
from triogroups.supervisor.spark._task import SparkTask

__all__ = ["add_spark_parser", "run_spark"]

_EXAMPLE = """example:
  triogroups spark examples/spark_hello.py:member -n 4 --master local[4]

APP is module:function or path/to/file.py:function, an async function taking the member's
connected channel, its SparkTask (partition, members, generation) and then the ARGS strings:
async def member(ch, task, *args). Its return value is printed per partition.
"""


def add_spark_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    spark = sub.add_parser(
        "spark",
        help="run an application as a group in a Spark barrier stage",
        description="Run APP as N members of one group, one per task of a Spark barrier stage.",
        epilog=_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    spark.add_argument("-n", type=int, default=2, help="how many members (default 2)")
    spark.add_argument("--master", default=None, help="Spark master (default local[N])")
    spark.add_argument("--stack", default="spark", help="preset name or TOML file (default spark)")
    spark.add_argument(
        "--formation-timeout", type=float, default=60.0, help="seconds to form the group"
    )
    spark.add_argument("app", help="module:function or path/to/file.py:function")
    spark.add_argument("args", nargs=argparse.REMAINDER, help="strings passed to the app")


def run_spark(args: argparse.Namespace, console: Console) -> int:
    """Run the ``spark`` subcommand; returns the exit status."""
    errors = Console(stderr=True)
    try:
        if args.n < 1:
            raise AppError(f"-n must be >= 1, got {args.n}")
        app = load_app(args.app)
        stack = resolve_stack(args.stack)
        require_pyspark()
        find_java()
    except (AppError, SparkUnavailable) as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 2
    extra = tuple(args.args)

    async def member(ch: Any, task: SparkTask) -> Any:
        return await app(ch, task, *extra)

    member.__module__ = app.__module__  # a file app travels by value, with its module
    from pyspark.sql import SparkSession

    ours = SparkSession.getActiveSession() is None  # stop only the session started here
    session = spark_session(args.master or f"local[{args.n}]", "triogroups spark")
    try:
        results = run_group(
            session, args.n, member, stack=stack, formation_timeout=args.formation_timeout
        )
    except SparkGroupError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 2 if exc.member is None else 1
    finally:
        if ours:
            session.stop()
    for partition, result in enumerate(results):
        console.print(f"p{partition}: {result!r}", highlight=False, markup=False)
    return 0
