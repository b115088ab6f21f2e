"""Groups in Spark barrier stages: stage start to the first view of N, and the pipeline.

    python benchmarks/bench_spark.py [--sizes 2,4] [--repeat 3] [--rows 1000000]

``--sizes ""`` measures only the pipeline.

One local[4] session (UI off, serial GC, tiered compilation level 1), warmed by one group run
so Python workers exist.

- **view of N**: from submitting the stage (`run_group` called on the driver) to the member
  function starting in each task, which happens once the member's view holds all N members
  (first and last member), and the whole `run_group` (including the final barrier and the
  leave). Beside it, in the same run, the baseline: a plain barrier stage whose tasks do
  one ``allGather`` (what a one-off rendezvous costs: Spark polls once a second), from
  submission to the gather returning, and the whole stage.
- **pipeline**: `examples/spark_pipeline.py` on ``--rows`` events in 4 partitions, the group
  computing top-10 keys by total value and the exact distinct user count and writing Parquet,
  beside plain Spark computing the same result from the same DataFrame, and what only handing
  the rows to Python costs (``df.rdd`` counted per partition: pyspark makes a Row object per
  row, the floor under any per-partition Python work on a DataFrame).

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
from triogroups.supervisor.spark import SparkTask, run_group, spark_session

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


def _pipeline() -> Any:
    path = Path(__file__).resolve().parents[1] / "examples" / "spark_pipeline.py"
    spec = importlib.util.spec_from_file_location("bench_spark_pipeline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description="spark groups: view of N, pipeline")
    parser.add_argument("--sizes", default="2,4")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    spark = spark_session(
        "local[4]",
        "bench_spark",
        conf={"spark.driver.extraJavaOptions": JVM_OPTIONS, "spark.sql.shuffle.partitions": "4"},
    )
    try:
        run_group(spark, 4, entered)  # Python workers start here, not in the first figure
        for n in (int(s) for s in args.sizes.split(",") if s):
            runs = [view_of_n(spark, n) for _ in range(args.repeat)]
            med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            print(
                f"N={n}: view of N first {med['first']:.2f} s, last {med['last']:.2f} s, "
                f"run_group {med['run_group']:.2f} s | plain barrier stage: allGather "
                f"{med['allgather']:.2f} s, stage {med['stage']:.2f} s"
            )
        pipeline = _pipeline()
        with tempfile.TemporaryDirectory() as tmp:
            reports = [
                pipeline.run_pipeline(spark, args.rows, 4, 10, f"{tmp}/top.parquet")
                for _ in range(args.repeat)
            ]
            df = pipeline.events(spark, args.rows, 4)
            started = time.perf_counter()
            df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
            python_rows = time.perf_counter() - started
        same = all(r["written"] == r["expected"] for r in reports)
        group = statistics.median(r["group_seconds"] for r in reports)
        plain = statistics.median(r["plain_seconds"] for r in reports)
        print(
            f"pipeline, {args.rows:,} rows in 4 partitions: group {group:.1f} s "
            f"(aggregate, shuffle by owner, multicast, Parquet), plain Spark {plain:.1f} s; "
            f"equal: {same}; of which handing the rows to Python (df.rdd, counted) "
            f"{python_rows:.1f} s"
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
