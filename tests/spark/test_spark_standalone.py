"""Groups on a real Spark standalone cluster (issue 39): a master and two workers of two
cores each, every one its own JVM on loopback (`_standalone`), and one driver submitted to
it with ``spark-submit --master spark://...`` (`standalone_app`) that runs its steps on one
session; each test checks one step of its report. The second worker starts only once the
driver's session is up, so its first group waits for executors, as on a cold cluster. One
run of the cluster serves the module, once per test run however many pytest-xdist workers
run its tests (`once_per_run`): it starts the cluster, submits the driver, runs the CLI
against it and stops it, and the tests check what it saw; the last one, that the stop left
no process of it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _once import once_per_run
from _standalone import StandaloneCluster, driver_env, processes, spark_home, write_driver_only

from triogroups.supervisor.spark import SparkUnavailable
from triogroups.supervisor.spark._setup import find_java, require_pyspark

_SUBMIT_TIMEOUT = 900  # seconds for the whole application (a loaded 2-core machine)
# The first test of a worker waits for the whole run (or runs it): more than pytest's 600 s
# on a loaded machine, but bounded by the run's own deadlines.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.sparkcluster,
    pytest.mark.whole_run,
    pytest.mark.timeout(1800),
]

APP = Path(__file__).with_name("standalone_app.py")
ROOT = Path(__file__).resolve().parents[2]


def _submit(cluster: StandaloneCluster) -> dict[str, dict[str, Any]]:
    """`standalone_app` submitted to the cluster, whose second worker starts once the
    driver's session is up; its steps by name."""
    out = cluster.directory / "report.json"
    marks = cluster.directory / "marks"
    marks.mkdir()
    submit = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url]
    for conf in (
        "spark.executor.memory=512m",
        "spark.executor.extraJavaOptions=-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.driver.extraJavaOptions=-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "spark.stage.maxConsecutiveAttempts=3",
    ):
        submit += ["--conf", conf]
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(APP.parent)]),
    }
    env.pop("SPARK_MASTER", None)
    log = cluster.directory / "driver.log"
    with open(log, "wb") as output:
        driver = subprocess.Popen(
            [*submit, str(APP), str(out), str(marks)],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cluster.directory,
        )
    try:
        deadline = time.monotonic() + _SUBMIT_TIMEOUT
        while not (marks / "session").exists() and driver.poll() is None:
            assert time.monotonic() < deadline, "the driver's session did not start"
            time.sleep(0.2)
        if driver.poll() is None:
            cluster.start_worker()
        returncode = driver.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert returncode == 0, log.read_text()[-3000:]
    session = json.loads((marks / "session").read_text())
    steps = {entry["step"]: entry for entry in json.loads(out.read_text())}
    steps["session"] = session
    return steps


def _cli_with_master(cluster: StandaloneCluster, directory: Path) -> dict[str, Any]:
    """``PYTHONPATH=. triogroups spark --master URL -n 2 climod:member hey`` in a directory
    only this driver has (`write_driver_only`): its exit status, output and directory."""
    directory.mkdir()
    write_driver_only(directory)
    env = driver_env({**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), "."])})
    env.pop("SPARK_MASTER", None)
    env["COLUMNS"] = "40"  # each result stays one line however narrow the terminal
    code = "import sys; from triogroups.cli import main; sys.exit(main())"
    command = [sys.executable, "-c", code, "spark", "--master", cluster.url, "-n", "2"]
    try:
        run = subprocess.run(
            [*command, "climod:member", "hey"],
            capture_output=True,
            text=True,
            env=env,
            cwd=directory,
            timeout=_SUBMIT_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:  # its test fails with it, not the whole run
        return {"status": None, "lines": [], "stderr": str(exc), "directory": str(directory)}
    return {
        "status": run.returncode,
        "lines": run.stdout.splitlines(),
        "stderr": run.stderr[-3000:],
        "directory": str(directory),
    }


def _run_standalone(directory: Path) -> dict[str, Any]:
    """The cluster's whole life: the master and its first worker, the submitted driver (the
    second worker joins it), the CLI with ``--master`` once that application finished (its
    cores are free again), then the stop: everything the tests check, and what ``ps`` still
    lists of the cluster's sessions after it."""
    try:
        require_pyspark()
        find_java()
    except SparkUnavailable as exc:
        pytest.skip(str(exc))
    cluster = StandaloneCluster(directory)
    try:
        cluster.start(workers=1)
        steps = _submit(cluster)
        cli = _cli_with_master(cluster, directory / "cli")
        running = sorted(processes(cluster.sessions).values())
    finally:
        left = cluster.stop()
    sessions = cluster.sessions
    listing = subprocess.run(
        ["ps", "-eo", "sid=,stat=,pid=,args="], capture_output=True, text=True, check=True
    ).stdout
    # An exited process that its new parent has not reaped yet (a zombie, stat Z) runs
    # nothing and holds no port: only a running one would be an orphan.
    listed = [
        line
        for line in listing.splitlines()
        if int(line.split()[0]) in sessions and not line.split()[1].startswith("Z")
    ]
    return {
        "url": cluster.url,
        "steps": steps,
        "cli": cli,
        "stop": {"running_before": running, "left": left, "listed_after": listed},
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The standalone cluster's run, once per test run (`once_per_run`)."""
    return once_per_run(tmp_path_factory, "standalone", _run_standalone)


@pytest.fixture(scope="module")
def report(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What the submitted driver's steps saw, by name."""
    steps: dict[str, dict[str, Any]] = run["steps"]
    return steps


def _ok(entry: dict[str, Any]) -> Any:
    assert "error" not in entry, entry.get("trace")
    return entry["result"]


def test_spark_submit_master_wins_and_a_cold_group_waits_for_its_executors(
    run: dict[str, Any], report: dict[str, dict[str, Any]]
) -> None:
    """The driver's ``spark_session()`` takes spark-submit's ``--master`` (not local[4]),
    and a group of 4 asked for when at most one worker's 2 slots were registered waits for
    the second worker's executor (instead of failing at once with the slots registered so
    far): one view of 4 across both executors."""
    assert report["session"]["registered"] <= 2  # one worker's slots at most: it must wait
    entry = report["cold start: a group of 4 right after the session"]
    assert entry["master"] == run["url"]
    results = _ok(entry)
    assert [r[0] for r in results] == [0, 1, 2, 3]
    assert len({tuple(r[1]) for r in results}) == 1
    assert sorted(results[0][1]) == ["p0", "p1", "p2", "p3"]
    assert len({r[2] for r in results}) == 1
    assert len(entry["executors"]) == 2


def test_spark_member_function_not_async_is_refused_before_any_job(
    report: dict[str, dict[str, Any]],
) -> None:
    """A plain ``def`` member: TypeError naming it, on the driver, no job started."""
    entry = report["a member function that is not async"]
    assert entry["error"] == "TypeError"
    assert entry["message"].startswith("member_fn must be an async function")
    assert "'plain'" in entry["message"]
    assert entry["jobs_started"] == 0


def test_spark_member_that_raises_fails_its_group_without_losing_an_executor(
    report: dict[str, dict[str, Any]],
) -> None:
    """p1 raises while p0 waits at the group's end: SparkGroupError names p1 and carries its
    traceback; ten seconds later a group of 4 runs on the same session, on the same two
    executors (Spark's own ``barrier()`` there made p0's executor exit with code 50 when
    the stage was cancelled, and a new one replaced it)."""
    failed = report["a group of 2 whose p1 raises"]
    assert failed["error"] == "SparkGroupError"
    assert failed["member"] == 1
    assert failed["message"].startswith("member p1 of 2")
    assert "ValueError: p1 gives up" in failed["message"]
    after = report["then a group of 4 on the same session"]
    assert [r[0] for r in _ok(after)] == [0, 1, 2, 3]
    first = report["cold start: a group of 4 right after the session"]
    assert failed["executors"] == after["executors"] == first["executors"]


@pytest.mark.parametrize(
    "name", ["a group of 2 whose p1 raises, retry", "map_in_group whose p1 raises, counted"]
)
def test_spark_member_that_raises_in_a_rerun_stage_is_named_and_no_executor_dies(
    report: dict[str, dict[str, Any]], name: str
) -> None:
    """p1 raises in a stage that Spark reruns after a failure (``run_group(retry=True)``, and
    ``map_in_group(...).count()``, whose count shuffles after the group): every attempt
    fails the same way, and the last one's error is SparkGroupError with p1's traceback
    (each cancelled attempt made p0's executor exit with code 50, and the error became
    ``ExecutorLostFailure`` a minute later); the executors are still the first ones. Spark
    may rerun the stage for p1 alone, when it kept p0's output of the attempt before (a full
    suite run saw it): then the last error is p1's saying so, a SparkGroupError too."""
    entry = report[name]
    assert entry["error"] == "SparkGroupError", entry.get("trace")
    assert entry["member"] == 1
    if "ran only 1 of this barrier stage's tasks" not in entry["message"]:
        assert entry["message"].startswith("member p1 of 2")
        assert "ValueError: p1 gives up soon" in entry["message"]
    first = report["cold start: a group of 4 right after the session"]
    assert entry["executors"] == first["executors"]


def test_spark_cli_under_spark_submit_runs_on_its_master(
    report: dict[str, dict[str, Any]],
) -> None:
    """``triogroups spark -n 4`` without ``--master`` in a driver that spark-submit started
    runs its group on the cluster's two executors (the session spark-submit's master gave)
    and prints each member's result. (That the CLI takes SPARK_MASTER and spark-submit's
    master over its local default is checked without a JVM in test_spark_master.py.)"""
    entry = report["triogroups spark without --master"]
    result = _ok(entry)
    assert result["status"] == 0
    assert [line.split(":")[0] for line in result["lines"]] == ["p0", "p1", "p2", "p3"]
    for i, line in enumerate(result["lines"]):
        member = ast.literal_eval(line.split(": ", 1)[1])
        assert member["sum"] == 12  # two rounds of 0 + 1 + 2 + 3
        assert member["greeting"] == f"hello from p{(i - 1) % 4}"
        assert sorted(member["view"]) == ["p0", "p1", "p2", "p3"]
    assert len(entry["executors"]) == 2


def test_spark_member_in_a_module_only_the_driver_has_is_sent_to_the_executors(
    report: dict[str, dict[str, Any]],
) -> None:
    """A member function in a module that only the driver's sys.path has (a top-level
    module, and a package whose module imports its sibling) runs on both executors: the
    driver sent the module's file, or its package as a zip, as ``sc.addPyFile`` does; the
    tasks imported it from there. (Without that every task failed with
    ModuleNotFoundError and a raw Py4JJavaError came a minute later.)"""
    entry = report["a member function in a module only the driver has"]
    results = _ok(entry)
    assert [r[0] for r in results] == [0, 1]
    assert all(sorted(r[1]) == ["p0", "p1"] for r in results)
    for _partition, _view, file in results:
        assert file.endswith("/drivermod.py") and "driver-only" not in file
    assert len(entry["executors"]) == 2
    results = _ok(report["a member function in a package only the driver has"])
    assert [r[:2] for r in results] == [[0, "helped p0"], [1, "helped p1"]]
    assert all(r[2].endswith("driverpkg.zip/driverpkg/members.py") for r in results)


def test_spark_member_module_that_cannot_be_sent_is_refused_on_the_driver_in_one_line(
    report: dict[str, dict[str, Any]],
) -> None:
    """A member function in a namespace package only the driver has cannot travel as a file
    or a zip: SparkGroupError before any job, saying what to do; the CLI prints it as one
    line and exits 2."""
    entry = report["a member function in a namespace package only the driver has"]
    assert entry["error"] == "SparkGroupError"
    assert entry["member"] is None
    assert entry["message"] == (
        "member_fn's module 'nspkg.members' cannot be sent to the executors ('nspkg' is a "
        "namespace package): install it on every executor, or pass it with spark-submit "
        "--py-files"
    )
    assert entry["jobs_started"] == 0
    result = _ok(report["triogroups spark with a namespace package only the driver has"])
    assert result["status"] == 2
    assert result["lines"] == []
    assert len(result["errors"]) == 1
    assert result["errors"][0].startswith("error: member_fn's module 'nspkg.members' cannot")


def test_spark_cli_with_master_runs_a_member_module_only_its_driver_has(
    run: dict[str, Any],
) -> None:
    """``PYTHONPATH=. triogroups spark --master spark://... climod:member`` (the module beside
    the driver, not on the workers) runs its group on the cluster and prints each member's
    result (the submitted application has finished: its cores are free again)."""
    cli = run["cli"]
    assert cli["status"] == 0, cli["stderr"]
    assert [line.split(":")[0] for line in cli["lines"]] == ["p0", "p1"]
    for i, line in enumerate(cli["lines"]):
        said = ast.literal_eval(line.split(": ", 1)[1])
        assert said.startswith(f"hey from p{i} of 2 in ") and "climod.py" in said
        assert cli["directory"] not in said


@pytest.mark.parametrize("form", ["rows", "arrow"])
def test_spark_pipeline_example_on_the_cluster_equals_plain_spark(
    report: dict[str, dict[str, Any]], form: str
) -> None:
    """examples/spark_pipeline.py's `map_in_group` stage, in the Row and the Arrow form,
    across both executors: what it wrote equals plain Spark's answer."""
    result = _ok(report[f"the pipeline example, {form}"])
    assert len(result["written"]) == 5
    assert result["written"] == result["expected"]


def test_spark_member_whose_python_worker_is_killed_is_named_with_what_happened(
    report: dict[str, dict[str, Any]],
) -> None:
    """p1's Python worker killed mid-group: SparkGroupError naming p1 and that its worker
    exited, not Spark's Py4JJavaError; its peer's executor survives it."""
    entry = report["p1's Python worker killed"]
    assert entry["error"] == "SparkGroupError", entry.get("trace")
    assert entry["member"] == 1
    assert entry["message"].startswith("member p1 failed: its Python worker exited unexpectedly")
    first = report["cold start: a group of 4 right after the session"]
    assert entry["executors"] == first["executors"]


def test_spark_group_with_retry_reruns_as_a_new_group_after_a_python_worker_is_killed(
    report: dict[str, dict[str, Any]],
) -> None:
    """With ``retry=True`` the killed worker's stage reruns: the results are those of a new
    group (one generation, a view of 2)."""
    results = _ok(report["p1's Python worker killed, retry"])
    assert [r[0] for r in results] == [0, 1]
    assert results[0][2] == results[1][2]
    assert all(sorted(r[1]) == ["p0", "p1"] for r in results)


def test_spark_member_whose_executor_is_lost_is_named_with_what_happened(
    report: dict[str, dict[str, Any]],
) -> None:
    """p1's executor JVM killed mid-group: SparkGroupError naming p1 and what happened to
    it (its executor lost, or its Python worker cut off with it), not a Py4JJavaError."""
    entry = report["p1's executor JVM killed"]
    assert entry["error"] == "SparkGroupError", entry.get("trace")
    assert entry["member"] == 1
    assert entry["message"].startswith(
        ("member p1 failed: its executor was lost", "member p1 failed: its Python worker")
    )


def test_spark_group_with_retry_reruns_as_a_new_group_after_an_executor_is_lost(
    report: dict[str, dict[str, Any]],
) -> None:
    """With ``retry=True`` the stage whose p1 killed its executor's JVM reruns on the
    executors left (and the one the worker started in its place): the results are those of
    one new group of 2."""
    results = _ok(report["p1's executor JVM killed, retry"])
    assert [r[0] for r in results] == [0, 1]
    assert results[0][2] == results[1][2]
    assert all(sorted(r[1]) == ["p0", "p1"] for r in results)


def test_spark_standalone_cluster_stops_with_no_process_left(run: dict[str, Any]) -> None:
    """Stopping the master and workers ends every process they started (executors, Python
    daemons and workers): ``ps`` finds none of their sessions."""
    stop = run["stop"]
    assert stop["running_before"], "the cluster's JVMs should be running before the stop"
    assert stop["left"] == {}
    assert stop["listed_after"] == []
