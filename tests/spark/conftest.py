"""One SparkSession for every Spark test (local[4]): starting one costs 4-8 s, so it is shared.

Without Java or pyspark the Spark tests are skipped and the reason says which is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from triogroups.supervisor.spark import SparkUnavailable, spark_session

SLOTS = 4
JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local[4] session: UI off, serial GC, quick JIT, four shuffle partitions."""
    try:
        session = spark_session(
            f"local[{SLOTS}]",
            "triogroups-tests",
            conf={
                "spark.driver.extraJavaOptions": JVM_OPTIONS,
                "spark.sql.shuffle.partitions": str(SLOTS),
                "spark.default.parallelism": str(SLOTS),
                "spark.stage.maxConsecutiveAttempts": "3",
            },
        )
    except SparkUnavailable as exc:
        pytest.skip(str(exc))
    yield session
    session.stop()
