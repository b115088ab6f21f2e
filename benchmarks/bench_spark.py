"""Groups in Spark barrier stages: stage start to the first view of N, and the pipeline.

    python benchmarks/bench_spark.py [--parts view,arrow,pipeline] [--sizes 2,4] [--repeat 3]
                                     [--rows 1000000] [--master spark://HOST:7077]

One session (UI off, serial GC, tiered compilation level 1), warmed by one group run so
Python workers exist: local[4], or the cluster ``--master`` names (a standalone master whose
workers have triogroups importable and 4 slots in all; the figures then include executors on
other JVMs and Spark's scheduling across workers).

- **view of N**: from submitting the stage (`run_group` called on the driver) to the member
  function starting in each task, which happens once the member's view holds all N members
  (first and last member), and the whole `run_group` (including the members' meeting at
  the end and the leave). Beside it, in the same run, the baseline: a plain barrier stage
  whose tasks do one ``allGather`` (what a one-off rendezvous costs: Spark polls once a
  second), from submission to the gather returning, and the whole stage.
- **arrow**: the same for `map_in_group` on a DataFrame of N partitions: from the action
  (``collect``) to the member function starting, in the Arrow form (barrier ``mapInArrow``)
  beside the Row form (barrier RDD of Rows, made a DataFrame again).
- **pipeline**: `examples/spark_pipeline.py` on ``--rows`` events in 4 partitions, the group
  computing top-10 keys by total value and the exact distinct user count and writing Parquet,
  in the Row form and in the Arrow form (members aggregate in pyarrow), beside plain Spark
  computing the same result from the same DataFrame, and what only handing the rows to
  Python as Rows costs: ``df.rdd`` counted per partition, and the Row form's own way for a
  DataFrame of plain columns (through Arrow, `_rows`) counted the same way. The Row form
  also runs once per repeat with its members' rows taken from ``df.rdd`` (the way it took
  them before issue 39), in turns with the others.

Medians of ``--repeat`` runs (the pipeline runs once per repeat too); nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from triogroups import Channel
from triogroups.supervisor.spark import SparkTask, _driver, map_in_group, run_group, spark_session
from triogroups.supervisor.spark._rows import dataframe_rows

JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


async def entered(ch: Channel, task: SparkTask) -> float:
    return time.time()


def gathered(rows: Iterator[Any]) -> Iterator[float]:
    from pyspark import BarrierTaskContext

    BarrierTaskContext.get().allGather("x")
    yield time.time()


def view_of_n(spark: Any, n: int) -> dict[str, float]:
    started = time.time()
    entries = run_group(spark, n, entered)
    ended = time.time()
    stage = spark.sparkContext.parallelize(range(n), n).barrier().mapPartitions(gathered)
    base_started = time.time()
    gathers = stage.collect()
    base_ended = time.time()
    return {
        "first": min(entries) - started,
        "last": max(entries) - started,
        "run_group": ended - started,
        "allgather": max(gathers) - base_started,
        "stage": base_ended - base_started,
    }


async def entered_record(ch: Channel, task: SparkTask) -> list[tuple[int, float]]:
    return [(task.partition, time.time())]


def dataframe_view_of_n(spark: Any, n: int) -> dict[str, float]:
    df = spark.range(0, n, numPartitions=n)
    figures = {}
    for form, arrow in (("arrow", True), ("rows", False)):
        out = map_in_group(df, entered_record, schema="p INT, t DOUBLE", arrow=arrow)
        started = time.time()
        entries = [row.t for row in out.collect()]
        ended = time.time()
        figures[f"{form}_last"] = max(entries) - started
        figures[f"{form}_action"] = ended - started
    return figures


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def load_pipeline(name: str = "bench_spark_pipeline") -> Any:
    """examples/spark_pipeline.py, loaded afresh as module ``name`` (it is no package)."""
    path = Path(__file__).resolve().parents[1] / "examples" / "spark_pipeline.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _count_rows(rdd: Any) -> float:
    """Seconds to hand ``rdd``'s rows to Python, counted per partition."""
    started = time.perf_counter()
    rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    return time.perf_counter() - started


def _through_df_rdd(run: Any) -> Any:
    """``run()`` with the Row form taking its rows from ``df.rdd`` (as before issue 39)."""
    real = _driver.dataframe_rows
    _driver.dataframe_rows = lambda data: getattr(data, "rdd", data)  # type: ignore[assignment]
    try:
        return run()
    finally:
        _driver.dataframe_rows = real  # type: ignore[assignment]


def _bench_pipeline(spark: Any, rows: int, repeat: int) -> None:
    pipeline = load_pipeline()
    forms = ("rows", "arrow", "rows from df.rdd")
    reports: dict[str, list[dict[str, Any]]] = {form: [] for form in forms}
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/top.parquet"
        runs = {
            "rows": lambda: pipeline.run_pipeline(spark, rows, 4, 10, out, False),
            "arrow": lambda: pipeline.run_pipeline(spark, rows, 4, 10, out, True),
            "rows from df.rdd": lambda: _through_df_rdd(runs["rows"]),
        }
        for _ in range(repeat):
            for form in forms:
                reports[form].append(runs[form]())
        df = pipeline.events(spark, rows, 4)
        handed = {
            "df.rdd": statistics.median(_count_rows(df.rdd) for _ in range(repeat)),
            "arrow": statistics.median(_count_rows(dataframe_rows(df)) for _ in range(repeat)),
        }
    same = all(r["written"] == r["expected"] for runs_ in reports.values() for r in runs_)
    group = {form: statistics.median(r["group_seconds"] for r in reports[form]) for form in forms}
    plain = statistics.median(r["plain_seconds"] for runs_ in reports.values() for r in runs_)
    print(
        f"pipeline, {rows:,} rows in 4 partitions: group in the Row form {group['rows']:.1f} s "
        f"(with its rows from df.rdd {group['rows from df.rdd']:.1f} s), in the Arrow form "
        f"{group['arrow']:.1f} s (aggregate, shuffle by owner, multicast, Parquet), plain Spark "
        f"{plain:.1f} s; equal: {same}; handing the rows to Python as Rows, counted: df.rdd "
        f"{handed['df.rdd']:.1f} s, the Row form's way {handed['arrow']:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="spark groups: view of N, pipeline")
    parser.add_argument("--parts", default="view,arrow,pipeline")
    parser.add_argument("--sizes", default="2,4")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--master",
        help="the Spark master (else spark-submit's, SPARK_MASTER, spark-defaults.conf's, "
        "local[4])",
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    sizes = [int(s) for s in args.sizes.split(",") if s]
    spark = spark_session(
        args.master,
        "bench_spark",
        conf={"spark.driver.extraJavaOptions": JVM_OPTIONS, "spark.sql.shuffle.partitions": "4"},
    )
    try:
        run_group(spark, 4, entered)  # Python workers start here, not in the first figure
        for n in sizes if "view" in parts else []:
            med = _medians([view_of_n(spark, n) for _ in range(args.repeat)])
            print(
                f"N={n}: view of N first {med['first']:.2f} s, last {med['last']:.2f} s, "
                f"run_group {med['run_group']:.2f} s | plain barrier stage: allGather "
                f"{med['allgather']:.2f} s, stage {med['stage']:.2f} s"
            )
        for n in sizes if "arrow" in parts else []:
            med = _medians([dataframe_view_of_n(spark, n) for _ in range(args.repeat)])
            print(
                f"N={n}: map_in_group on a DataFrame, action to view of N: Arrow form "
                f"{med['arrow_last']:.2f} s (action {med['arrow_action']:.2f} s), Row form "
                f"{med['rows_last']:.2f} s (action {med['rows_action']:.2f} s)"
            )
        if "pipeline" in parts:
            _bench_pipeline(spark, args.rows, args.repeat)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
