"""The driver of the multi-host test: a group on a master whose two workers are two "hosts".

    python multihost_app.py MASTER_URL DRIVER_HOST REPORT_FILE

Runs in the root network namespace with the master; its executors run in the workers'
namespaces and reach it at DRIVER_HOST over the bridge. Writes to REPORT_FILE what each
member of a `run_group` group and of a `map_in_group` stage saw: the address its channel
bound, its executor's address, the endpoints the stage gathered, the view, what it heard.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pyspark import BarrierTaskContext

from triogroups import Channel
from triogroups.supervisor.spark import SparkTask, map_in_group, run_group, spark_session

MEMBERS = 2
ROWS = 1000
JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def _where(ch: Channel, task: SparkTask) -> dict[str, Any]:
    """Where this member runs: its channel's bound endpoint, its executor's host, the
    endpoints the stage gathered (its TCPPING's list) and its view."""
    executor = str(BarrierTaskContext.get().getTaskInfos()[task.partition].address)
    tcpping = next(p for p in ch.stack.protocols if type(p).__name__ == "TcpPing")
    return {
        "partition": task.partition,
        "bound": list(ch.stack.protocols[0].physical),
        "executor": executor.rsplit(":", 1)[0],
        "gathered": list(tcpping.initial_hosts),
        "view": [m.name for m in ch.view.members],
        "view_id": str(ch.view.view_id),
    }


async def where(ch: Channel, task: SparkTask) -> dict[str, Any]:
    """Multicast the partition and hear every member's; say where this member runs."""
    await ch.send(task.partition)
    heard = sorted([(await ch.receive()).payload for _ in range(task.members)])
    return {**_where(ch, task), "heard": heard}


async def total(ch: Channel, task: SparkTask) -> list[tuple[str]]:
    """Multicast this partition's sum, add up every member's: one record, in JSON."""
    await ch.send(sum(row[0] for row in task.rows))
    whole = sum([(await ch.receive()).payload for _ in range(task.members)])
    return [(json.dumps({**_where(ch, task), "rows": len(task.rows), "total": whole}),)]


def main() -> None:
    master, host, report = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    spark = spark_session(
        master,
        "triogroups-multihost-test",
        conf={
            "spark.driver.host": host,
            "spark.driver.bindAddress": host,
            "spark.executor.memory": "512m",
            "spark.driver.extraJavaOptions": JVM_OPTIONS,
            "spark.executor.extraJavaOptions": JVM_OPTIONS,
        },
    )
    try:
        group = run_group(spark, MEMBERS, where, formation_timeout=240)
        df = spark.range(0, ROWS, numPartitions=MEMBERS)
        stage = map_in_group(df, total, schema="record STRING", formation_timeout=240)
        records = [json.loads(row.record) for row in stage.collect()]
        report.write_text(json.dumps({"run_group": group, "map_in_group": records}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
