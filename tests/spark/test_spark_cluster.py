"""A group across executor processes: ``local-cluster[2,1,1024]``, as on a real cluster."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from triogroups.supervisor.spark import SparkUnavailable
from triogroups.supervisor.spark._setup import find_java

pytestmark = [pytest.mark.spark, pytest.mark.sparkcluster]

APP = Path(__file__).with_name("cluster_app.py")


def test_spark_group_spans_two_executor_processes_in_local_cluster_mode() -> None:
    """`triogroups spark` with two executors of one core each: the app file travels to the
    executors (by value) with its ARGS, the members run in separate executor JVMs, form one
    view of both (whichever coordinates), hear each other's multicasts, and each result is
    printed."""
    try:
        find_java()
    except SparkUnavailable as exc:
        pytest.skip(str(exc))
    env = {**os.environ, "JAVA_TOOL_OPTIONS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"}
    command = [sys.executable, "-m", "triogroups.cli", "spark", f"{APP}:member", "-n", "2"]
    command += ["--master", "local-cluster[2,1,1024]", "blue"]  # options after APP, then ARGS
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("p")]
    assert [line.split(":")[0] for line in lines] == ["p0", "p1"]
    results = [ast.literal_eval(line.split(": ", 1)[1]) for line in lines]
    assert len(results) == 2
    assert results[0]["view"] == results[1]["view"]
    for result in results:
        result["view"].sort()
        assert result == {"tag": "blue", "view": ["p0", "p1"], "heard": [0, 1], "executors": 2}
