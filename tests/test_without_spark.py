"""The suite without the ``spark`` extra: it collects, and what needs Spark is skipped saying why.

A fresh interpreter makes the extra's packages unimportable (``sys.modules[name] = None``
fails their import as a missing package does) and runs pytest over the whole suite: every
module collects (``tests/test_docs.py`` imported every module of the package at collection,
the Spark driver's too, and the whole suite failed to collect without pyspark), and the
docstring checks of the Spark driver's modules are skipped, naming the package.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

# re-collects the whole suite in a fresh interpreter: out of `dev.py test --fast`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

SPARK_EXTRA = ("pyspark", "pandas", "pyarrow", "py4j")

WITHOUT_SPARK = f"""
import sys
for name in {SPARK_EXTRA!r}:
    sys.modules[name] = None
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def test_the_suite_collects_without_the_spark_extra_and_skips_spark_modules_saying_why() -> None:
    args = ["-q", "-rs", "-p", "no:cacheprovider", "-n", "0", "tests"]
    args += ["-k", "test_docstring_examples_pass_as_doctests and supervisor.spark"]
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_SPARK, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed, 1 skipped, \d+ deselected in .*", summary), summary
    assert "needs pyspark, which the spark extra installs" in result.stdout, result.stdout[-4000:]
