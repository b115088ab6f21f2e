"""Without pyspark or Java: one line naming what to install, no traceback (subprocesses that
really lack them: pyspark made unimportable, java taken off PATH)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from triogroups.cli import main

ROOT = Path(__file__).resolve().parents[2]
HELLO = f"{ROOT / 'examples' / 'spark_hello.py'}:member"
NO_PYSPARK = "import sys; sys.modules['pyspark'] = None\n"


def _python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )


def _without_java(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # an empty directory: no java anywhere on PATH
    return env


def _cli(args: list[str]) -> str:
    return f"import sys\nfrom triogroups.cli import main\nsys.exit(main({args!r}))\n"


def test_spark_cli_without_pyspark_names_the_extra_in_one_line() -> None:
    done = _python(NO_PYSPARK + _cli(["spark", "-n", "2", HELLO]))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: spark groups need pyspark: pip install triogroups[spark]"
    ]
    assert done.stdout == ""


def test_run_group_without_pyspark_raises_spark_unavailable_naming_the_extra() -> None:
    code = NO_PYSPARK + (
        "from triogroups.supervisor.spark import SparkUnavailable, run_group\n"
        "async def member(ch, task): pass\n"
        "try:\n"
        "    run_group(None, 2, member)\n"
        "except SparkUnavailable as exc:\n"
        "    print(exc)\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "spark groups need pyspark: pip install triogroups[spark]"


def test_spark_cli_without_java_says_so_in_one_line(tmp_path: Path) -> None:
    done = _python(_cli(["spark", "-n", "2", HELLO]), env=_without_java(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: spark needs Java 17+: no java on PATH and JAVA_HOME is not set"
    ]


def test_spark_session_without_java_raises_spark_unavailable(tmp_path: Path) -> None:
    code = (
        "from triogroups.supervisor.spark import SparkUnavailable, spark_session\n"
        "try:\n"
        "    spark_session()\n"
        "except SparkUnavailable as exc:\n"
        "    print(exc)\n"
    )
    done = _python(code, env=_without_java(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "spark needs Java 17+: no java on PATH and JAVA_HOME is not set"


def test_spark_cli_bad_input_is_one_line_before_any_jvm(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A bad app, stack or count fails before Spark starts: one line, exit status 2."""
    for args, message in (
        (["spark", "-n", "0", HELLO], "error: -n must be >= 1, got 0"),
        (["spark", HELLO, "-n", "0", "x"], "error: -n must be >= 1, got 0"),  # after APP
        (["spark", "nope.py:member"], "error: app file 'nope.py' does not exist (nope.py:member)"),
        (["spark", "--stack", "nope", HELLO], "error: unknown stack preset 'nope'"),
    ):
        assert main(args) == 2, args
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(message), lines


def test_spark_public_names_have_docstrings_and_say_where_they_come_from() -> None:
    """Users import from `triogroups.supervisor.spark`; help() must say so, and importing it
    must not import pyspark (the extra is optional)."""
    code = (
        "import sys\n"
        "import triogroups.supervisor.spark as spark\n"
        "assert 'pyspark' not in sys.modules\n"
        "for name in spark.__all__:\n"
        "    obj = getattr(spark, name)\n"
        "    assert obj.__doc__ and obj.__module__ == 'triogroups.supervisor.spark', name\n"
        "print(len(spark.__all__))\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 6
