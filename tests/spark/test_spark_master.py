"""Which master a session gets, what a master string says about its slots, what the CLI
refuses before any JVM, and how a lost member is named (issue 39). No JVM here: the CLI
runs in subprocesses without Java, so an answer that needed Spark would say Java is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from triogroups.supervisor.spark._errors import lost_member
from triogroups.supervisor.spark._setup import master_slots, session_master

ROOT = Path(__file__).resolve().parents[2]
HELLO = f"{ROOT / 'examples' / 'spark_hello.py'}:member"


@pytest.fixture
def no_submit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """Neither spark-submit's gateway, its arguments nor SPARK_MASTER in the environment, and
    a Spark configuration directory of its own (tmp_path/conf, empty)."""
    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS", "SPARK_MASTER"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "conf").mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    return monkeypatch


def test_spark_session_master_explicit_then_conf_then_submit_then_env_then_local(
    no_submit: pytest.MonkeyPatch,
) -> None:
    """An explicit master wins, then ``spark.master`` in the conf, then spark-submit's (None:
    the session leaves it to the JVM spark-submit started), then SPARK_MASTER; the local
    default only when nothing says."""
    url = "spark://10.0.0.5:7077"
    assert session_master() == "local[4]"
    assert session_master(local="local[3]") == "local[3]"
    no_submit.setenv("SPARK_MASTER", url)
    assert session_master() == url
    no_submit.setenv("PYSPARK_GATEWAY_PORT", "41234")
    assert session_master() is None
    assert session_master(None, {"spark.master": "yarn"}) == "yarn"
    assert session_master("local[2]", {"spark.master": "yarn"}) == "local[2]"


def test_spark_session_master_from_spark_config_wins_over_the_local_default(
    no_submit: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A master Spark's own configuration names for a session started outside spark-submit
    (``spark.master`` in ``spark-defaults.conf``, ``--master`` in ``PYSPARK_SUBMIT_ARGS``)
    wins over the local default: the session would otherwise override it with local[4]
    and run where the cluster never sees it. SPARK_MASTER is more specific than the file,
    PYSPARK_SUBMIT_ARGS than both; an explicit master or conf wins over all of them."""
    defaults = tmp_path / "conf" / "spark-defaults.conf"
    defaults.write_text(
        "# cluster defaults\nspark.executor.memory  2g\nspark.master   spark://10.0.0.7:7077\n"
    )
    assert session_master() == "spark://10.0.0.7:7077"
    defaults.write_text("spark.master=yarn\n")
    assert session_master(local="local[2]") == "yarn"
    no_submit.setenv("SPARK_MASTER", "spark://10.0.0.5:7077")
    assert session_master() == "spark://10.0.0.5:7077"
    no_submit.setenv("PYSPARK_SUBMIT_ARGS", "--master k8s://https://api:6443 pyspark-shell")
    assert session_master() == "k8s://https://api:6443"
    no_submit.setenv("PYSPARK_SUBMIT_ARGS", "--master=local[3] pyspark-shell")
    assert session_master() == "local[3]"
    assert session_master("local[2]") == "local[2]"
    assert session_master(None, {"spark.master": "local[1]"}) == "local[1]"
    no_submit.setenv("PYSPARK_SUBMIT_ARGS", "--conf spark.ui.enabled=false pyspark-shell")
    assert session_master() == "spark://10.0.0.5:7077"


def test_spark_master_slots_are_known_from_local_strings_only() -> None:
    cpus = os.cpu_count() or 1
    assert [master_slots(m) for m in ("local", "local[3]", "local[*]", "local[4, 2]")] == [
        1,
        3,
        cpus,
        4,
    ]
    assert master_slots("local-cluster[2,3,1024]") == 6
    assert master_slots("local[4]", task_cpus=2) == 2
    for cluster in ("spark://127.0.0.1:7077", "yarn", "k8s://https://api:6443"):
        assert master_slots(cluster) is None


def _cli_without_java(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    skip = ("JAVA_HOME", "SPARK_MASTER", "PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS")
    environ = {k: v for k, v in os.environ.items() if k not in skip}
    environ["SPARK_CONF_DIR"] = str(tmp_path)  # no spark-defaults.conf unless a test writes one
    environ.update(env, PATH=str(tmp_path))  # no java anywhere
    code = f"import sys\nfrom triogroups.cli import main\nsys.exit(main({list(args)!r}))\n"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=60
    )


def test_spark_cli_with_more_members_than_the_masters_slots_says_so_before_any_jvm(
    tmp_path: Path,
) -> None:
    """``-n 4`` on ``local[2]`` (given, or by SPARK_MASTER): one line at once, before Spark
    or Java are looked for (no java here: otherwise that would be the error)."""
    done = _cli_without_java(tmp_path, "spark", "-n", "4", "--master", "local[2]", HELLO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: -n 4 needs 4 task slots at once, master local[2] has 2"
    ]
    done = _cli_without_java(tmp_path, "spark", "-n", "3", HELLO, SPARK_MASTER="local[1]")
    assert done.stderr.strip().splitlines() == [
        "error: -n 3 needs 3 task slots at once, master local[1] has 1"
    ]


def test_spark_cli_takes_the_master_of_spark_defaults_conf_over_its_local_default(
    tmp_path: Path,
) -> None:
    """``spark.master`` in the ``spark-defaults.conf`` of ``SPARK_CONF_DIR`` is the CLI's
    master when neither ``--master``, spark-submit nor SPARK_MASTER says: ``-n 3`` against
    its ``local[1]`` is refused at once (the local[3] default would have started Spark)."""
    (tmp_path / "spark-defaults.conf").write_text("spark.master local[1]\n")
    done = _cli_without_java(tmp_path, "spark", "-n", "3", HELLO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: -n 3 needs 3 task slots at once, master local[1] has 1"
    ]


def test_spark_cli_refuses_a_member_function_that_is_not_async_before_any_jvm(
    tmp_path: Path,
) -> None:
    app = tmp_path / "plain_app.py"
    app.write_text("def member(ch, task):\n    return task.partition\n")
    done = _cli_without_java(tmp_path, "spark", "-n", "2", f"{app}:member")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: app '{app}:member' must be an async function: async def member(ch, task, *args)"
    ]


_STAGE = (
    "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Could not recover "
    "from a failed barrier ResultStage. Most recent failure reason: Stage failed because "
    "barrier task {task}(7, 1) finished unsuccessfully.\n{cause}\n\tat org.apache.spark..."
)
_WORKER = (
    "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). Consider "
    "setting 'spark.sql.execution.pyspark.udf.faulthandler.enabled' or..."
)
_EXECUTOR = (
    "ExecutorLostFailure (executor 1 exited caused by one of the running tasks) Reason: "
    "Command exited with code 137"
)


@pytest.mark.parametrize(
    ("task", "cause", "message"),
    [
        (
            "ResultTask",
            _WORKER,
            "member p1 failed: its Python worker exited unexpectedly (killed or crashed); "
            "its group's barrier stage (7) failed with it",
        ),
        (
            "ShuffleMapTask",
            _EXECUTOR,
            "member p1 failed: its executor was lost (executor 1 exited caused by one of the "
            "running tasks) Reason: Command exited with code 137; its group's barrier stage "
            "(7) failed with it in its last attempt (spark.stage.maxConsecutiveAttempts)",
        ),
    ],
)
def test_spark_lost_member_is_named_with_what_happened(task: str, cause: str, message: str) -> None:
    """Spark's account of a barrier stage whose task died (its Python worker, its executor)
    becomes the member's partition and one line saying what happened to it; a stage that
    Spark reruns (followed by a shuffle, as with retry=True) failed in its last attempt."""
    assert lost_member(_STAGE.format(task=task, cause=cause)) == (1, message)


def test_spark_other_stage_failures_are_not_taken_for_a_lost_member() -> None:
    assert lost_member(_STAGE.format(task="ResultTask", cause="java.lang.OutOfMemoryError")) is None
    assert lost_member("Job aborted due to stage failure: Task 1 failed 1 times") is None
