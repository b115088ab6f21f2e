"""Where the pipeline's Row form spends its time, phase by phase, on a cluster on this host.

    python benchmarks/bench_spark_phases.py [--master spark://127.0.0.1:PORT] [--rows 1000000]
                                            [--repeat 3] [--df-rdd]

`examples/spark_pipeline.py`'s group, in the Row form on ``--rows`` events in 4 partitions,
written as Parquet, with each task writing time stamps (``time.time()``) to a file in a
temporary directory as it passes each phase: its first row reaches Python, its last one
(``rows``), the view of 4 formed and the member function started (``view``), its partition
aggregated (``aggregated``), its shares sent to their owners (``shares sent``), the member
function returned after merging the owners' multicasts (``returned``), the members' meeting
at the end and the leave done (``met``). The driver prints, per repeat, the median over the 4
partitions of each stamp in seconds after the action started, and the action's end; beside it,
in the same repeat, plain Spark's query and the same rows written as Parquet without Python.
With ``--df-rdd`` each repeat also runs the Row form with its rows taken from ``df.rdd``, as
it took them before issue 39, in turns with the way `map_in_group` takes them now.
The stamps are comparable across processes only on one host: the master's workers must run
here (local modes, or a standalone cluster on loopback). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bench_spark import load_pipeline
from pyspark import cloudpickle

from triogroups import Channel
from triogroups.supervisor.spark import SparkTask, map_in_group, run_group, spark_session
from triogroups.supervisor.spark._rows import dataframe_rows

JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
PHASES = ("first row", "rows", "view", "aggregated", "shares sent", "returned", "met")


def _pipeline(stamps: str) -> Any:
    """The example's module, its aggregation and shuffle wrapped to stamp their ends."""
    module = load_pipeline("bench_phases_pipeline")
    cloudpickle.register_pickle_by_value(module)  # the wrappers travel with it
    aggregate, send_shares = module.aggregate, module._send_shares

    def stamp(partition: int, phase: str) -> None:
        with open(stamps, "a") as out:
            out.write(json.dumps([partition, phase, time.time()]) + "\n")

    def aggregated(rows: Any) -> Any:
        result = aggregate(rows)
        stamp(module.current_partition, "aggregated")
        return result

    async def sent(ch: Channel, task: SparkTask, *args: Any) -> None:
        await send_shares(ch, task, *args)
        stamp(task.partition, "shares sent")

    module.stamp, module.aggregate, module._send_shares = stamp, aggregated, sent
    module.stamps_file = stamps
    return module


def _timed_run(spark: Any, df: Any, pipeline: Any, out: str, from_df_rdd: bool) -> dict[str, float]:
    """One run of the Row form, its rows taken as `map_in_group` takes them or (with
    ``from_df_rdd``) from ``df.rdd``; each phase's median stamp after the action started."""
    stamp = pipeline.stamp

    def rows_in(index: int, rows: Iterable[Any]) -> Iterator[Any]:
        stamp(index, "first row")
        yield from rows
        stamp(index, "rows")

    async def member(ch: Channel, task: SparkTask) -> Any:
        stamp(task.partition, "view")
        pipeline.current_partition = task.partition
        result = await pipeline.member(ch, task, 10)
        stamp(task.partition, "returned")
        return result

    def met(index: int, records: Iterable[Any]) -> Iterator[Any]:
        yield from records
        stamp(index, "met")

    started = time.time()
    rows = (df.rdd if from_df_rdd else dataframe_rows(df)).mapPartitionsWithIndex(rows_in)
    result = map_in_group(rows, member).mapPartitionsWithIndex(met)
    spark.createDataFrame(result, pipeline.SCHEMA).write.mode("overwrite").parquet(out)
    ended = time.time()
    by_phase: dict[str, list[float]] = {phase: [] for phase in PHASES}
    for line in Path(pipeline.stamps_file).read_text().splitlines():
        _partition, phase, at = json.loads(line)
        by_phase[phase].append(at - started)
    Path(pipeline.stamps_file).write_text("")
    medians = {phase: statistics.median(at) for phase, at in by_phase.items() if at}
    return {**medians, "end": ended - started}


def main() -> None:
    parser = argparse.ArgumentParser(description="the pipeline's Row form, phase by phase")
    parser.add_argument("--master", help="the Spark master (its workers on this host)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--df-rdd",
        action="store_true",
        help="also run the Row form with its rows from df.rdd (as before issue 39), in turns",
    )
    args = parser.parse_args()
    spark = spark_session(
        args.master,
        "bench_spark_phases",
        conf={"spark.driver.extraJavaOptions": JVM_OPTIONS, "spark.sql.shuffle.partitions": "4"},
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stamps = f"{tmp}/stamps.jsonl"
            Path(stamps).write_text("")
            pipeline = _pipeline(stamps)

            async def warm(ch: Channel, task: SparkTask) -> None:
                return None

            run_group(spark, 4, warm)  # Python workers start here, not in the first figure
            df = pipeline.events(spark, args.rows, 4)
            for _ in range(args.repeat):
                for from_df_rdd in (False, True) if args.df_rdd else (False,):
                    phases = _timed_run(spark, df, pipeline, f"{tmp}/top.parquet", from_df_rdd)
                    print(
                        f"Row form{' from df.rdd' if from_df_rdd else ''}, s after the action: "
                        + ", ".join(f"{phase} {at:.2f}" for phase, at in phases.items()),
                        flush=True,
                    )
                started = time.perf_counter()
                pipeline.plain_spark(df, 10)
                plain = time.perf_counter() - started
                started = time.perf_counter()
                df.write.mode("overwrite").parquet(f"{tmp}/rows.parquet")
                written = time.perf_counter() - started
                load = Path("/proc/loadavg").read_text().split()[0]
                print(
                    f"plain Spark {plain:.2f} s, the rows as Parquet {written:.2f} s, load {load}",
                    flush=True,
                )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
