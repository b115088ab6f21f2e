"""Every benchmark in ``benchmarks/`` runs to its table, in its smallest configuration.

The benchmarks are measurements, never timed tests, so nothing here looks at a figure. What
this checks is that each still runs as docs/benchmarks.md says to run it: a benchmark that crashes
(as ``bench_diag.py`` did once ``bench_channel`` gained an option it did not pass on) is
found by the suite, not by the next person who needs its figures. Each runs as a user runs
it, ``python benchmarks/<name>.py ...``, with its member processes; the driver is killed if
it overruns, and its members die with it (PR_SET_PDEATHSIG). The ``--instructions`` modes
(valgrind) are left out. Spark's benchmarks start a JVM of their own (about 30 s): they carry the
``spark`` marker, and are skipped, saying why, where Java or pyspark is missing, as the tests in
``tests/spark`` are.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from triogroups.supervisor.spark import SparkUnavailable
from triogroups.supervisor.spark._setup import find_java, require_pyspark

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 240.0  # seconds a driver may run here before it is killed (and the test fails)

#: Per benchmark: its arguments for a short run, and a line its table prints.
SMALL_RUNS: dict[str, tuple[str, str]] = {
    "bench_stack": ("--messages 2000 --repeat 1", "x plain"),
    "bench_wire": ("", "unpackb+Message()"),
    "bench_protocols": ("--batches 20", "NAKACK2"),
    "bench_loopback": ("--messages 300 --repeat 1", "us CPU each"),
    "bench_transport": ("--seconds 0.3 --repeat 1 --sizes 100", "ratio nodelay"),
    "bench_unicast": ("--seconds 0.3 --rtt-seconds 0.3 --repeat 1", "UNICAST3+UFC"),
    "bench_multicast": ("--seconds 0.3 --repeat 1 --stacks udp,udp-nakack2", "udp-nakack2"),
    "bench_secret": ("--seconds 0.3 --repeat 1 --stacks udp-nakack2", "sealed"),
    "bench_channel": (
        "--presets udp --members 2 --seconds 0.3 --repeat 1",
        "Stack API (bench_multicast",
    ),
    "bench_diag": (
        "--members 2 --seconds 0.3 --repeat 1 --rtt-members 2 --probes 2",
        "probe round trip",
    ),
    "bench_group_scale": ("--sizes 3 --steady 2 --warmup 1", "crash: virtual s to view of N-1"),
    "bench_rpc": ("--presets udp --seconds 0.3 --repeat 1 --callers 4", "udp: 4 callers"),
    "bench_rpc_calls": ("--calls 50", "round trips,"),
    "bench_locks": ("--ops 20 --callers 2", "increments/s"),
    "bench_sequencer": ("--batches 5", "us of CPU per message"),
    "bench_membership": (
        "--parts formation,join,rpc --kinds tcp --sizes 2 --repeat 1"
        " --rpc-seconds 0.3 --rpc-callers 1",
        "Group RPC",
    ),
    "bench_supervisor": ("--kinds tcp --sizes 2 --repeat 1", "first view"),
    "bench_spark": ("--sizes 2 --repeat 1 --rows 2000", "equal: True"),
    "bench_spark_phases": (
        "--repeat 1 --rows 2000 --df-rdd",
        "Row form from df.rdd, s after the action",
    ),
}

SPARK = ("bench_spark", "bench_spark_phases")  # each starts a JVM of its own


def test_every_benchmark_has_a_small_run_here() -> None:
    """A benchmark added to ``benchmarks/`` gets a line in SMALL_RUNS."""
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert scripts == set(SMALL_RUNS)


def _spark_missing() -> str | None:
    """Why Spark's benchmark cannot run here, in the words `spark_session` would use."""
    try:
        require_pyspark()
        find_java()
    except SparkUnavailable as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.spark) if name in SPARK else name
        for name in sorted(SMALL_RUNS)
    ],
)
def test_benchmark_runs_to_its_table(name: str) -> None:
    """``python benchmarks/<name>.py`` with small settings exits 0 and prints its table."""
    if name in SPARK and (missing := _spark_missing()):
        pytest.skip(missing)
    args, table_line = SMALL_RUNS[name]
    try:
        result = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *args.split()],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            env={**os.environ, "COLUMNS": "160"},
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{name} still running after {DEADLINE:.0f} s; its output: {exc.stdout!r}")
    said = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, said
    assert table_line in result.stdout, said
