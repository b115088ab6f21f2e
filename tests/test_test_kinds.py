"""The suite's kinds of test and the quick loop (tests/_kinds.py, tests/conftest.py, dev.py):
every test under tests/real and tests/spark, and in a ``*_real.py``, carries its marker by
its place, so ``dev.py test --fast`` leaves it out without a ``pytestmark`` of its own; the
fast Hypothesis profile caps a test's own ``max_examples``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path, PurePath

import pytest
from _pytest.mark.expression import Expression
from hypothesis import settings

import dev
from tests._kinds import FAST_EXAMPLES, FAST_PROFILE, capped, deselects_all, path_markers

ROOT = Path(__file__).resolve().parent.parent

# tests/spark/test_spark_master.py and the others without a JVM had no marker of their own:
# before the place rule, `--fast` ran them (CLI subprocesses, 8 s of CPU)
PLACED = ("tests/real", "tests/spark", "tests/supervisor/test_launch_real.py")
KEPT = "tests/test_wire.py"


# pytest over the given paths, collecting only: each test's node id and its markers
MARKERS_OF = """
import sys
import pytest


class Markers:
    def pytest_collection_finish(self, session):
        for item in session.items:
            names = sorted({marker.name for marker in item.iter_markers()})
            print("MARKERS", item.nodeid, ",".join(names), sep="\\t")


sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]],
                     plugins=[Markers()]))
"""


def _collect(*args: str) -> dict[str, set[str]]:
    """Node id -> markers of every test pytest selects from ``args``."""
    result = subprocess.run(
        [sys.executable, "-c", MARKERS_OF, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode in (0, 5), result.stdout[-4000:] + result.stderr[-2000:]
    lines = result.stdout.splitlines()
    found = [line.split("\t") for line in lines if line.startswith("MARKERS\t")]
    return {node: set(filter(None, names.split(","))) for _, node, names in found}


def _placed(node: str) -> str | None:
    """The marker a test has by its place, as CONTRIBUTING.md states the rule."""
    if node.startswith("tests/real/") or "_real.py::" in node:
        return "real"
    return "spark" if node.startswith("tests/spark/") else None


@pytest.mark.slow  # two collections in subprocesses
@pytest.mark.timeout(1500)  # both subprocesses' own limits and more: slow only at high load
def test_fast_leaves_out_every_test_under_tests_real_and_spark_and_keeps_the_wire_tests() -> None:
    everything = _collect(*PLACED, KEPT)
    placed = {node: _placed(node) for node in everything if _placed(node)}
    assert any(n.startswith("tests/spark/test_spark_master.py::") for n in placed), placed
    unmarked = sorted(node for node, marker in placed.items() if marker not in everything[node])
    assert not unmarked, unmarked

    kept = _collect(*dev.pytest_args(["--fast", "-n", "0"]), *PLACED, KEPT)
    assert set(kept) == {n for n in everything if n.startswith(f"{KEPT}::")}, sorted(kept)[:20]
    assert kept, "the fast loop kept nothing"


def test_place_rules_name_the_directories_and_the_real_suffix() -> None:
    assert path_markers(PurePath("real/test_new.py")) == {"real"}
    assert path_markers(PurePath("real/stacks/test_new.py")) == {"real"}
    assert path_markers(PurePath("spark/test_new.py")) == {"spark"}
    assert path_markers(PurePath("supervisor/test_new_real.py")) == {"real"}
    assert path_markers(PurePath("protocols/test_gms.py")) == frozenset()
    assert path_markers(PurePath("real.py")) == frozenset()
    assert path_markers(PurePath("test_docs_site.py")) == {"docs"}
    assert path_markers(PurePath("protocols/test_docs.py")) == frozenset()


def _deselects(expression: str, known: set[str]) -> bool:
    return deselects_all(Expression.compile(expression).evaluate, expression, frozenset(known))


def test_a_file_goes_uncollected_only_when_the_expression_deselects_all_its_tests() -> None:
    fast = " and ".join(f"not {marker}" for marker in dev.FAST_SKIPS)
    assert _deselects(fast, {"real"})
    assert _deselects(fast, {"spark"})
    assert not _deselects(fast, set())
    # a test of tests/real may also be `multihost`: these still select some of them
    assert not _deselects("real and not multihost", {"real"})
    assert not _deselects("not real or multihost", {"real"})
    assert not _deselects("not spark", {"real"})
    assert not _deselects("not real(reason=1)", {"real"})


def test_fast_profile_caps_a_tests_own_max_examples_and_only_it() -> None:
    assert capped(settings(max_examples=300)) is None  # the suite's profile: as written
    settings.load_profile(FAST_PROFILE)
    try:
        faster = capped(settings(max_examples=300, derandomize=True))
        assert faster is not None
        assert faster.max_examples == FAST_EXAMPLES
        assert faster.derandomize
        assert capped(settings(max_examples=FAST_EXAMPLES - 1)) is None
        assert settings().max_examples == FAST_EXAMPLES
    finally:
        settings.load_profile("suite")


PROPERTY = """
from hypothesis import given, settings, strategies as st

@settings(max_examples=300, database=None)
@given(st.integers())
def test_counts(n):
    with open("examples.txt", "a") as out:
        out.write("x")
"""


@pytest.mark.slow  # pytest in a subprocess
@pytest.mark.parametrize(("profile", "most"), [("suite", 300), (FAST_PROFILE, FAST_EXAMPLES)])
def test_conftest_runs_a_property_with_the_profiles_examples(
    tmp_path: Path, profile: str, most: int
) -> None:
    """The suite's conftest as a plugin, over a property that asks for 300 examples."""
    (tmp_path / "test_property.py").write_text(textwrap.dedent(PROPERTY))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.conftest",
            f"--hypothesis-profile={profile}",
            "--rootdir",
            str(tmp_path),
            "test_property.py",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    ran = len((tmp_path / "examples.txt").read_text())
    assert most // 2 < ran <= most, ran
