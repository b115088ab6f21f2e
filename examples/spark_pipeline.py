"""A data pipeline on Spark whose partitions cooperate as one group.

    python examples/spark_pipeline.py --rows 1000000 --out /tmp/top_keys.parquet [--arrow]
    spark-submit --master spark://HOST:7077 examples/spark_pipeline.py --rows 1000000

The master is ``--master``, else spark-submit's, else ``SPARK_MASTER``, else the one in
``spark-defaults.conf``, else ``local[4]`` (as for ``spark_session()``);
the group has ``--members`` members whatever the master (too few slots: an error, never a
smaller group).

1. Generate a DataFrame of ``--rows`` events ``(user, key, value)`` in ``--members``
   partitions (``value`` in cents, so sums are exact).
2. `map_in_group` runs one member per partition in a barrier stage. Each member aggregates
   its own rows (total value per key, the set of users: in Python over Rows, or with
   ``--arrow`` in pyarrow over the partition's record batches from a barrier ``mapInArrow``
   stage, no Row ever made), then the group shuffles by itself:
   every key and user has one owner (``crc32 % N``), and each member sends the owners their
   share by unicast. Each owner now holds whole keys and whole users: it multicasts its own
   top ``k`` keys and its exact count of distinct users. Every member merges the N
   multicasts into the global top ``k`` (a key's total lives with one owner, so the global
   top ``k`` is among the owners' top ``k``) and the exact distinct count (the owners' users
   do not overlap). Partition 0 returns the result rows.
3. The result is written as Parquet, read back, and checked against the same result computed
   with plain Spark (``groupBy().sum()`` ordered, and ``countDistinct``).

``member(ch, task)`` needs the rows of a partition, so this example runs with ``python``
rather than ``triogroups spark``.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from collections import defaultdict
from typing import Any

import trio

from triogroups import Channel
from triogroups.supervisor.spark import SparkGroupError, SparkTask, map_in_group, spark_session

CHUNK = 4096  # entries per shuffle message: well below FRAG's limits, few messages
SCHEMA = "rank INT, key STRING, total LONG, distinct_users LONG"


def owner(value: str | int, members: int) -> int:
    """The member that owns a key or a user: the same answer in every member."""
    return zlib.crc32(str(value).encode()) % members


def top(totals: dict[str, int], k: int) -> list[tuple[str, int]]:
    """The ``k`` largest totals, ties broken by key (as the Spark query orders them)."""
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:k]


async def _send_shares(
    ch: Channel, task: SparkTask, totals: dict[str, int], users: set[int]
) -> None:
    by_name = {m.name: m for m in ch.view.members}
    shares_totals: list[list[list[Any]]] = [[] for _ in range(task.members)]
    shares_users: list[list[int]] = [[] for _ in range(task.members)]
    for key, total in totals.items():
        shares_totals[owner(key, task.members)].append([key, total])
    for user in users:
        shares_users[owner(user, task.members)].append(user)
    for o in range(task.members):
        to = by_name[f"p{o}"]
        part_totals, part_users = shares_totals[o], shares_users[o]
        chunks = max(1, -(-max(len(part_totals), len(part_users)) // CHUNK))
        for c in range(chunks):
            piece = slice(c * CHUNK, (c + 1) * CHUNK)
            last = c == chunks - 1
            await ch.send(["share", part_totals[piece], part_users[piece], last], to=to)


def aggregate(rows: list[Any]) -> tuple[dict[str, int], set[int]]:
    """Total value per key and the set of users of one partition's rows."""
    totals: dict[str, int] = defaultdict(int)
    users: set[int] = set()
    for user, key, value in rows:  # a Row is a tuple: unpacking is much faster than row.key
        totals[key] += value
        users.add(user)
    return totals, users


def aggregate_batches(batches: list[Any]) -> tuple[dict[str, int], set[int]]:
    """`aggregate` over a partition's Arrow record batches, in pyarrow's compute kernels."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not batches:
        return {}, set()
    table = pa.Table.from_batches(batches)
    sums = table.group_by("key").aggregate([("value", "sum")])
    totals = dict(zip(sums["key"].to_pylist(), sums["value_sum"].to_pylist(), strict=True))
    return totals, set(pc.unique(table["user"]).to_pylist())


async def member(ch: Channel, task: SparkTask, k: int = 10) -> list[tuple[int, str, int, int]]:
    """Aggregate this partition, shuffle to the owners, merge the owners' multicasts."""
    # Seconds of CPU work go to a thread: the event loop keeps the stack's heartbeats going.
    if task.batches:
        totals, users = await trio.to_thread.run_sync(aggregate_batches, task.batches)
    else:
        totals, users = await trio.to_thread.run_sync(aggregate, task.rows)
    await _send_shares(ch, task, totals, users)

    owned: dict[str, int] = defaultdict(int)
    owned_users: set[int] = set()
    shares_done = 0
    results: list[list[Any]] = []
    async for msg in ch:
        kind = msg.payload[0]
        if kind == "share":
            _, part_totals, part_users, last = msg.payload
            for key, total in part_totals:
                owned[key] += total
            owned_users.update(part_users)
            shares_done += last
            if last and shares_done == task.members:
                await ch.send(["result", top(owned, k), len(owned_users)])
        elif kind == "result":
            results.append(msg.payload)
            if len(results) == task.members:
                break
    candidates = {key: total for result in results for key, total in result[1]}
    distinct = sum(result[2] for result in results)
    if not task.coordinator:
        return []
    return [(i + 1, key, total, distinct) for i, (key, total) in enumerate(top(candidates, k))]


def events(spark: Any, rows: int, partitions: int) -> Any:
    """``rows`` generated events (user, key, value in cents) in ``partitions`` partitions."""
    from pyspark.sql import functions as F

    ids = spark.range(0, rows, numPartitions=partitions)
    return ids.select(
        F.pmod(F.xxhash64("id", F.lit("user")), F.lit(rows // 4 + 1)).alias("user"),
        F.concat(F.lit("key-"), F.pmod(F.xxhash64("id"), F.lit(50_000)).cast("string")).alias(
            "key"
        ),
        F.pmod(F.xxhash64("id", F.lit("value")), F.lit(10_000)).alias("value"),
    )


def plain_spark(df: Any, k: int) -> list[tuple[int, str, int, int]]:
    """The same result with plain Spark: the reference the group's result must equal."""
    from pyspark.sql import functions as F

    distinct = df.select(F.countDistinct("user")).first()[0]
    ranked = df.groupBy("key").agg(F.sum("value").alias("total"))
    rows = ranked.orderBy(F.desc("total"), F.asc("key")).limit(k).collect()
    return [(i + 1, r.key, int(r.total), int(distinct)) for i, r in enumerate(rows)]


def run_pipeline(
    spark: Any, rows: int, members: int, k: int, out: str, arrow: bool = False
) -> dict[str, Any]:
    """Run the group pipeline (``arrow``: the Arrow form), write ``out`` (Parquet), and time
    it beside plain Spark."""
    df = events(spark, rows, members)

    async def top_k(ch: Channel, task: SparkTask) -> list[tuple[int, str, int, int]]:
        return await member(ch, task, k)

    started = time.perf_counter()
    result = map_in_group(df, top_k, schema=SCHEMA, arrow=arrow)
    result.write.mode("overwrite").parquet(out)
    group_seconds = time.perf_counter() - started
    written = [tuple(r) for r in spark.read.parquet(out).orderBy("rank").collect()]
    started = time.perf_counter()
    expected = plain_spark(df, k)
    plain_seconds = time.perf_counter() - started
    return {
        "written": written,
        "expected": expected,
        "group_seconds": group_seconds,
        "plain_seconds": plain_seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="events (default 1M)")
    parser.add_argument("--members", type=int, default=4, help="partitions = members")
    parser.add_argument("--k", type=int, default=10, help="top k keys (default 10)")
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master (default: spark-submit's, SPARK_MASTER or spark-defaults.conf's, "
        "else local[4])",
    )
    parser.add_argument("--out", default="/tmp/triogroups_top_keys.parquet", help="Parquet out")
    parser.add_argument("--arrow", action="store_true", help="barrier mapInArrow, pyarrow")
    args = parser.parse_args(argv)
    spark = spark_session(args.master, "spark_pipeline")
    try:
        report = run_pipeline(spark, args.rows, args.members, args.k, args.out, args.arrow)
    except SparkGroupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    for rank, key, total, _distinct in report["written"]:
        print(f"{rank:3d}  {key:10s}  {total / 100:12.2f}")
    print(f"distinct users: {report['written'][0][3]}")
    same = report["written"] == report["expected"]
    print(
        f"group pipeline {report['group_seconds']:.1f} s, plain spark "
        f"{report['plain_seconds']:.1f} s; equal to plain spark: {same}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
