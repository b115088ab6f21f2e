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
