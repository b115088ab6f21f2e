"""The driver the standalone tests submit with ``spark-submit --master spark://...``.

    spark-submit --master URL standalone_app.py REPORT_FILE MARK_DIR

One application, so executors start once: it runs the steps below in order on one session
and writes what each step saw to REPORT_FILE as JSON, the steps in order, for the tests to
check one by one. A step that raises records the exception's type, text and ``member``.
Once its session is up it writes MARK_DIR/session (the slots registered then): the test
starts the cluster's second worker only then, so the first group (of 4, more than one
worker's 2 slots) must wait for executors that register after it was asked for.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
from _standalone import write_driver_only

from triogroups import Channel
from triogroups.cli import main as triogroups_main
from triogroups.supervisor.spark import SparkTask, map_in_group, run_group, spark_session
from triogroups.supervisor.spark._setup import registered_slots

REPORT, MARKS = Path(sys.argv[1]), Path(sys.argv[2])
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def cli(*args: str) -> dict[str, Any]:
    """``triogroups spark ARGS`` run in this driver, so under spark-submit: its exit status
    and what it printed on stdout and on stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = triogroups_main(["spark", *args])
    return {
        "status": status,
        "lines": out.getvalue().splitlines(),
        "errors": err.getvalue().splitlines(),
    }


def driver_only(name: str) -> Any:
    """The member function of a module written to a directory only this driver's sys.path
    has (`write_driver_only`)."""
    directory = MARKS / "driver-only"
    if str(directory) not in sys.path:
        directory.mkdir(exist_ok=True)
        sys.path.insert(0, str(write_driver_only(directory)))
        importlib.invalidate_caches()
    return importlib.import_module(name).member


def pipeline(spark: Any, arrow: bool) -> dict[str, Any]:
    """examples/spark_pipeline.py on 20,000 rows in 4 members (`map_in_group`, written as
    Parquet): what it wrote and what plain Spark computes."""
    path = EXAMPLES / "spark_pipeline.py"
    spec = importlib.util.spec_from_file_location("example_spark_pipeline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = MARKS / f"top-{arrow}.parquet"
    report: dict[str, Any] = module.run_pipeline(spark, 20_000, 4, 5, str(out), arrow)
    return {"written": report["written"], "expected": report["expected"]}


async def partition(ch: Channel, task: SparkTask) -> list[Any]:
    """The partition, the view and the generation: what a healthy group returns."""
    return [task.partition, [m.name for m in ch.view.members], task.generation]


async def p1_raises(ch: Channel, task: SparkTask) -> int:
    """p0 returns at once (and waits at the end for p1), p1 raises seconds later."""
    if task.partition == 1:
        await trio.sleep(5)
        raise ValueError("p1 gives up")
    return task.partition


async def p1_raises_soon(ch: Channel, task: SparkTask) -> list[tuple[int]]:
    """p0 returns its partition as one record at once, p1 raises a second later: a short
    failing attempt, for the steps that run several (retry) or count a `map_in_group`."""
    if task.partition == 1:
        await trio.sleep(1)
        raise ValueError("p1 gives up soon")
    return [(task.partition,)]


def plain(ch: Channel, task: SparkTask) -> int:
    """Not async: refused on the driver."""
    return task.partition


def _executor_jvm() -> int:
    """The pid of this Python worker's executor JVM (its daemon's parent)."""
    pid = os.getpid()
    while pid > 1:
        if b"CoarseGrainedExecutorBackend" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    raise RuntimeError("no executor JVM above this Python worker")


def killer(what: str, mark: str) -> Callable[[Channel, SparkTask], Any]:
    """A member function whose p1 kills its own Python worker (``python``) or its executor's
    JVM (``jvm``) a second into the group, the first time only (``mark`` remembers)."""

    async def member(ch: Channel, task: SparkTask) -> list[Any]:
        done = MARKS / mark
        if task.partition == 1 and not done.exists():
            done.touch()
            await trio.sleep(1)
            os.kill(os.getpid() if what == "python" else _executor_jvm(), signal.SIGKILL)
            await trio.sleep(60)
        return await partition(ch, task)

    return member


def main() -> None:
    spark = spark_session(app_name="triogroups-standalone-test")  # the master: spark-submit's
    sc = spark.sparkContext
    report: list[dict[str, Any]] = []

    def executors() -> list[str]:
        return sorted(str(sc._jsc.sc().getExecutorIds().mkString(",")).split(","))

    def step(name: str, run: Callable[[], Any]) -> None:
        entry: dict[str, Any] = {"step": name, "master": str(sc.master)}
        jobs = len(sc.statusTracker().getJobIdsForGroup())
        started = time.monotonic()
        try:
            entry["result"] = run()
        except Exception as exc:
            entry["error"] = type(exc).__name__
            entry["message"] = str(exc)
            entry["member"] = getattr(exc, "member", None)
            entry["trace"] = traceback.format_exc()[-3000:]
        entry["seconds"] = round(time.monotonic() - started, 1)  # for the notes, never asserted
        entry["jobs_started"] = len(sc.statusTracker().getJobIdsForGroup()) - jobs
        entry["executors"] = executors()
        report.append(entry)
        REPORT.write_text(json.dumps(report, indent=1))

    (MARKS / "session").write_text(json.dumps({"registered": registered_slots(sc)}))
    try:
        step(
            "cold start: a group of 4 right after the session",
            lambda: run_group(spark, 4, partition, formation_timeout=240),
        )
        step("a member function that is not async", lambda: run_group(spark, 2, plain))  # type: ignore[arg-type]
        step("a group of 2 whose p1 raises", lambda: run_group(spark, 2, p1_raises))
        step(
            "a group of 2 whose p1 raises, retry",
            lambda: run_group(spark, 2, p1_raises_soon, retry=True),
        )
        step(
            "map_in_group whose p1 raises, counted",
            lambda: map_in_group(
                spark.range(0, 20, numPartitions=2), p1_raises_soon, schema="p INT"
            ).count(),
        )
        time.sleep(10)  # an executor that was to die of it has died by now
        step("then a group of 4 on the same session", lambda: run_group(spark, 4, partition))
        hello = f"{EXAMPLES / 'spark_hello.py'}:member"
        step("triogroups spark without --master", lambda: cli("-n", "4", hello, "2"))
        step(
            "a member function in a module only the driver has",
            lambda: run_group(spark, 2, driver_only("drivermod")),
        )
        step(
            "a member function in a package only the driver has",
            lambda: run_group(spark, 2, driver_only("driverpkg.members")),
        )
        step(
            "a member function in a namespace package only the driver has",
            lambda: run_group(spark, 2, driver_only("nspkg.members")),
        )
        step(
            "triogroups spark with a namespace package only the driver has",
            lambda: (driver_only("nspkg.members"), cli("-n", "2", "nspkg.members:member"))[1],
        )
        step("the pipeline example, rows", lambda: pipeline(spark, arrow=False))
        step("the pipeline example, arrow", lambda: pipeline(spark, arrow=True))
        step("p1's Python worker killed", lambda: run_group(spark, 2, killer("python", "py")))
        step(
            "p1's Python worker killed, retry",
            lambda: run_group(spark, 2, killer("python", "py-retry"), retry=True),
        )
        step("p1's executor JVM killed", lambda: run_group(spark, 2, killer("jvm", "jvm")))
        step(
            "p1's executor JVM killed, retry",
            lambda: run_group(spark, 2, killer("jvm", "jvm-retry"), retry=True),
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
