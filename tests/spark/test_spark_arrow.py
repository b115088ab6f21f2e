"""The Arrow form of map_in_group: a group in Spark's barrier mapInArrow stage (issue 15)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from triogroups import Channel
from triogroups.supervisor.spark import (
    SparkTask,
    SparkUnavailable,
    map_in_group,
)

pytestmark = pytest.mark.spark

SCHEMA = "partition INT, view STRING, heard STRING, first LONG, rows LONG, total LONG"


async def report(ch: Channel, task: SparkTask) -> Any:
    """Multicast this partition's row count; return the view, what was heard and the rows,
    as a pyarrow Table from even partitions and as tuples from odd ones."""
    import pyarrow as pa

    ids = [row[0] for row in task.rows]
    await ch.send([task.partition, len(ids)])
    heard = sorted([tuple((await ch.receive()).payload) for _ in range(task.members)])
    view = " ".join(m.name for m in ch.view.members) + f" {ch.view.view_id}"
    preloaded = b"libarrow" in Path(f"/proc/{os.getppid()}/maps").read_bytes()
    total = sum(batch.column(0).to_pylist()[-1] for batch in task.batches) if preloaded else -1
    record = (task.partition, view, str(heard), ids[0], len(ids), total)
    if task.partition % 2:
        return [record]
    return pa.table({name: [value] for name, value in zip(SCHEMA_NAMES, record, strict=True)})


SCHEMA_NAMES = [field.split()[0] for field in SCHEMA.split(", ")]


def test_spark_arrow_group_of_4_forms_one_view_and_sees_its_partition(spark: Any) -> None:
    """A barrier mapInArrow stage over 4 partitions: every member has the same view of 4
    (whichever member coordinates it),
    every member's multicast reaches all, each member holds its own partition's rows (as
    batches and as rows), and the result DataFrame has every member's records. The workers'
    daemon had pyarrow loaded before it forked them."""
    df = spark.range(0, 400, numPartitions=4)
    out = map_in_group(df, report, schema=SCHEMA, arrow=True)
    assert out.columns == SCHEMA_NAMES
    rows = sorted(tuple(r) for r in out.collect())
    assert [r[0] for r in rows] == [0, 1, 2, 3]
    views = {r[1] for r in rows}
    assert len(views) == 1
    *names, _view_id = views.pop().split()
    assert sorted(names) == ["p0", "p1", "p2", "p3"]  # any may coordinate (a late p0 joins)
    assert {r[2] for r in rows} == {str([(p, 100) for p in range(4)])}
    assert [(r[3], r[4]) for r in rows] == [(100 * p, 100) for p in range(4)]
    assert [r[5] for r in rows] == [100 * p + 99 for p in range(4)]


def test_spark_arrow_form_refuses_what_it_cannot_run(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """arrow=True needs a schema and a DataFrame; without pyarrow it names the extra in one
    line. All refused on the driver, before a stage exists."""

    async def member(ch: Channel, task: SparkTask) -> None:
        return None

    df = spark.range(0, 4, numPartitions=2)
    with pytest.raises(ValueError, match=r"map_in_group\(arrow=True\) needs a schema, got None"):
        map_in_group(df, member, arrow=True)
    with pytest.raises(TypeError, match=r"needs a DataFrame, got RDD"):
        map_in_group(df.rdd, member, schema="p INT", arrow=True)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(SparkUnavailable) as caught:
        map_in_group(df, member, schema="p INT", arrow=True)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("arrow=True needs pyarrow and pandas (")
    assert message.endswith("): pip install triogroups[spark]")
