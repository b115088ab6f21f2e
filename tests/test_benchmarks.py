"""Every benchmark in ``benchmarks/`` runs to its table, in its smallest configuration.

The benchmarks are measurements, never timed tests, so nothing here looks at a figure. What
this checks is that each still runs as docs/benchmarks.md says to run it: a benchmark that crashes
(as ``bench_diag.py`` did once ``bench_channel`` gained an option it did not pass on) is
found by the suite, not by the next person who needs its figures. Each runs as a user runs
it, ``python benchmarks/<name>.py ...``, with its member processes; the driver is killed if
it overruns, and its members die with it (PR_SET_PDEATHSIG). The ``--instructions`` modes
(valgrind) are left out. Spark's two benchmarks need a JVM (starting one and its session costs
about 15 s of CPU): they run one after the other in one Python process, each as its script
(``__main__``, its arguments in ``sys.argv``), the second one's session started on the JVM the
first one's left; they carry the ``spark`` marker, and are skipped, saying why, where Java or
pyspark is missing, as the tests in ``tests/spark`` are.
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

#: Per benchmark: its arguments for a short run, and a line its table prints. Most of a
#: smoke run's CPU is its member processes starting (importing triogroups: 0.6 s each), not
#: its sending (0.3 s or 0.1 s of it made no difference), so each runs the fewest members
#: its table takes.
SMALL_RUNS: dict[str, tuple[str, str]] = {
    "bench_stack": ("--messages 2000 --repeat 1", "x plain"),
    "bench_wire": ("--repeat 1", "unpackb+Message()"),
    "bench_core": ("--repeat 1", "up scans"),
    "bench_protocols": ("--batches 20", "NAKACK2"),
    "bench_loopback": ("--messages 300 --repeat 1", "us CPU each"),
    "bench_transport": ("--seconds 0.3 --repeat 1 --sizes 100", "ratio nodelay"),
    "bench_unicast": ("--seconds 0.3 --rtt-seconds 0.3 --repeat 1", "UNICAST3+UFC"),
    "bench_multicast": (
        "--members 2 --seconds 0.3 --repeat 1 --stacks udp,udp-nakack2",
        "udp-nakack2",
    ),
    "bench_secret": ("--members 2 --seconds 0.3 --repeat 1 --stacks udp-nakack2", "sealed"),
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

SPARK = ("bench_spark", "bench_spark_phases")  # run in turn in one process, on one JVM

#: Runs ``benchmarks/NAME.py ARGS`` for each "NAME ARGS" given, in turn in this process, as
#: ``python benchmarks/NAME.py ARGS`` would (the benchmarks' directory first on sys.path, the
#: script as ``__main__``), printing `MARK` and the name before each. Each Spark benchmark
#: stops its session at its end; the next one's `spark_session` starts a new session on the
#: JVM pyspark keeps for the process: the two cost 55 s of CPU so, 66 s as two processes.
MARK = "=== benchmark: "
_IN_TURN = f"""
import runpy, sys
folder, runs = sys.argv[1], sys.argv[2:]
sys.path.insert(0, folder)
for run in runs:
    name, _, args = run.partition(" ")
    print({MARK!r} + name, flush=True)
    sys.argv = [f"{{folder}}/{{name}}.py", *args.split()]
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


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


def _run(argv: list[str], what: str, deadline: float) -> subprocess.CompletedProcess[str]:
    """``argv`` run from the checkout, killed (and the test failed) after ``deadline`` s."""
    try:
        return subprocess.run(
            argv,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=deadline,
            env={**os.environ, "COLUMNS": "160"},
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{what} still running after {deadline:.0f} s; its output: {exc.stdout!r}")


@pytest.mark.parametrize("name", [name for name in sorted(SMALL_RUNS) if name not in SPARK])
def test_benchmark_runs_to_its_table(name: str) -> None:
    """``python benchmarks/<name>.py`` with small settings exits 0 and prints its table."""
    args, table_line = SMALL_RUNS[name]
    script = str(ROOT / "benchmarks" / f"{name}.py")
    result = _run([sys.executable, script, *args.split()], name, DEADLINE)
    said = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, said
    assert table_line in result.stdout, said


@pytest.mark.spark
def test_spark_benchmarks_run_to_their_tables_in_turn_on_one_jvm() -> None:
    """``bench_spark.py`` and then ``bench_spark_phases.py``, each as its script with small
    settings, in one process (`_IN_TURN`): it exits 0 and each prints its table."""
    if missing := _spark_missing():
        pytest.skip(missing)
    runs = [f"{name} {SMALL_RUNS[name][0]}" for name in SPARK]
    folder = str(ROOT / "benchmarks")
    argv = [sys.executable, "-c", _IN_TURN, folder, *runs]
    result = _run(argv, " then ".join(SPARK), DEADLINE * len(SPARK))
    said = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, said
    parts = result.stdout.split(MARK)[1:]
    assert [part.split("\n", 1)[0] for part in parts] == list(SPARK), said
    for name, part in zip(SPARK, parts, strict=True):
        assert SMALL_RUNS[name][1] in part, (name, said)
