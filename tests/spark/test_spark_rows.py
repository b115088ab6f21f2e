"""The Row form's input through Arrow (`_rows`, issue 39 item 7): the same Rows as ``df.rdd``.

A DataFrame of plain columns reaches the Row form's members as Arrow batches turned into Rows
in one call each, instead of rows pickled one by one in the JVM: a speed trick, so its tests
check that what the members see equals the plain form (``df.rdd``), row for row, type for
type, with the ``__fields__`` pyspark gives, and that every other DataFrame keeps ``df.rdd``.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest

from triogroups import Channel
from triogroups.supervisor.spark import SparkTask, map_in_group

pytestmark = pytest.mark.spark

PLAIN = "a BOOLEAN, b BYTE, c SHORT, d INT, e LONG, f FLOAT, g DOUBLE, h STRING"
PLAIN_ROWS = [
    (True, 1, 2, 3, 4, 1.5, 2.25, "x"),
    (None, None, None, None, None, None, float("inf"), None),
    (False, -128, 32767, 2**31 - 1, 2**63 - 1, 0.1, -0.0, "ü ✓"),
    (True, 0, -1, -(2**31), -(2**63), -3.0e38, 1e-300, ""),
]


def _seen(rows: Any) -> list[tuple[str, type, list[str], list[type]]]:
    """What a member can tell of its rows: their text, type, fields and value types."""
    return [(repr(r), type(r), list(r.__fields__), [type(v) for v in r]) for r in rows]


async def rows_seen(ch: Channel, task: SparkTask) -> list[Any]:
    """This member's rows, as `_seen` describes them, for the driver to compare."""
    return [(task.partition, _seen(task.rows))]


def _by_partition(data: Any) -> list[Any]:
    """What ``data.rdd`` gives each partition, as `_seen` describes it."""
    return [_seen(part) for part in data.rdd.glom().collect()]


def test_spark_row_form_of_plain_columns_sees_the_rows_df_rdd_gives(spark: Any) -> None:
    """A DataFrame of booleans, integers of every width, floats, doubles and strings, with
    nulls, in 2 partitions: each member's ``task.rows`` are the Rows ``df.rdd`` gives that
    partition (same values, Row type, ``__fields__`` and value types)."""
    df = spark.createDataFrame(PLAIN_ROWS, PLAIN).repartition(2)
    out = map_in_group(df, rows_seen).collect()
    assert [seen for _partition, seen in sorted(out)] == _by_partition(df)
    assert sum(len(seen) for _partition, seen in out) == len(PLAIN_ROWS)


def test_spark_row_form_of_other_columns_sees_the_rows_df_rdd_gives(spark: Any) -> None:
    """Columns Arrow would give other Python values for (a date, a timestamp, a decimal,
    binary, an array, a struct) keep ``df.rdd``: the members see its Rows."""
    rows = [
        (
            1,
            datetime.date(2026, 11, 29),
            datetime.datetime(2026, 11, 29, 23, 59, 1),
            decimal.Decimal("1.25"),
            bytearray(b"\x00\xff"),
            [1, 2],
            (3, "s"),
        )
    ]
    schema = (
        "i INT, d DATE, t TIMESTAMP, m DECIMAL(5,2), b BINARY, a ARRAY<INT>, "
        "s STRUCT<x: INT, y: STRING>"
    )
    df = spark.createDataFrame(rows, schema).repartition(2)
    out = map_in_group(df, rows_seen).collect()
    assert [seen for _partition, seen in sorted(out)] == _by_partition(df)


def test_spark_rows_through_arrow_only_for_plain_columns() -> None:
    """Which schemas take Arrow: at least one column, each of a plain type."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        DateType,
        DecimalType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    from triogroups.supervisor.spark._rows import arrow_rows_apply

    def schema(*types: Any) -> StructType:
        return StructType([StructField(f"c{i}", t) for i, t in enumerate(types)])

    assert arrow_rows_apply(schema(LongType(), StringType(), IntegerType()))
    for other in (DateType(), DecimalType(5, 2), BinaryType(), ArrayType(LongType())):
        assert not arrow_rows_apply(schema(LongType(), other))
    assert not arrow_rows_apply(schema())
