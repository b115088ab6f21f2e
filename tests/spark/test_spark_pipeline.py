"""The pipeline example on the shared local[4] session."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_spark_pipeline_example_equals_plain_spark(spark: Any, tmp_path: Path) -> None:
    """The example's top-k keys by total value and exact distinct user count, computed by the
    group and written as Parquet, equal what plain Spark computes from the same rows."""
    pipeline = _example("spark_pipeline")
    report = pipeline.run_pipeline(spark, 20_000, 4, 5, str(tmp_path / "top.parquet"))
    assert len(report["written"]) == 5
    assert report["written"] == report["expected"]


def test_spark_pipeline_arrow_aggregation_equals_the_row_aggregation() -> None:
    """The example's --arrow members aggregate record batches in pyarrow: the same totals per
    key and the same users as the Python aggregation over the same rows."""
    import pyarrow as pa

    pipeline = _example("spark_pipeline")
    rows = [(i % 37, f"key-{i % 11}", i * 7 % 1000) for i in range(5000)]
    table = pa.table(
        {
            "user": [user for user, _key, _value in rows],
            "key": [key for _user, key, _value in rows],
            "value": [value for _user, _key, value in rows],
        }
    )
    assert pipeline.aggregate_batches(table.to_batches(max_chunksize=700)) == pipeline.aggregate(
        rows
    )
    assert pipeline.aggregate_batches([]) == ({}, set())


def test_spark_pipeline_with_more_members_than_slots_fails_and_never_shrinks(
    spark: Any, tmp_path: Path
) -> None:
    """``--members 6`` on the local[4] session: SparkGroupError saying the slots, before any
    job and without writing anything (issue 39: a benchmark once ran 2 members for 4)."""
    from triogroups.supervisor.spark import SparkGroupError

    pipeline = _example("spark_pipeline")
    out = tmp_path / "top.parquet"
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    with pytest.raises(SparkGroupError, match=r"a group of 6 needs 6 task slots at once, "):
        pipeline.run_pipeline(spark, 1_000, 6, 5, str(out))
    assert not out.exists()
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs
