"""The suite's kinds of test and the quick loop (tests/_kinds.py, tests/conftest.py, dev.py):
every test under tests/real and tests/spark, and in a ``*_real.py``, carries its marker by
its place, so ``dev.py test --fast`` leaves it out without a ``pytestmark`` of its own; the
fast Hypothesis profile caps a test's own ``max_examples``; ``--first-seeds`` keeps the
first seeds of a seeded test. Checked on the running session's own tests and on the files,
never by collecting the suite again."""

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
from tests._kinds import (
    DIRECTORY_MARKERS,
    FAST_EXAMPLES,
    FAST_PROFILE,
    FILE_MARKERS,
    NO_SEED,
    REAL_SUFFIX,
    deselects_all,
    examples,
    first_seeds,
    path_markers,
)

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def _placed(node: str) -> str | None:
    """The marker a test has by its place, as CONTRIBUTING.md states the rule."""
    if node.startswith("tests/real/") or "_real.py::" in node:
        return "real"
    return "spark" if node.startswith("tests/spark/") else None


def test_every_collected_test_carries_the_marker_of_its_place(
    request: pytest.FixtureRequest,
) -> None:
    """This session's own tests (all of them in the whole suite; the quick loop does not
    import tests/real and tests/spark at all): the marker is on each test itself, where
    ``-m`` reads it, so a new file there needs no ``pytestmark``."""
    unmarked = sorted(
        item.nodeid
        for item in request.session.items
        if (marker := _placed(item.nodeid)) and item.get_closest_marker(marker) is None
    )
    assert not unmarked, f"{len(unmarked)} tests lack the marker of their place: {unmarked[:5]}"


def test_the_places_and_files_kinds_py_names_exist() -> None:
    """A renamed directory or file would silently move its tests into the quick loop."""
    assert REAL_SUFFIX.endswith(".py")
    missing = [f"tests/{name}/" for name in DIRECTORY_MARKERS if not (TESTS / name).is_dir()]
    missing += [f"tests/{name}" for name in FILE_MARKERS if not (TESTS / name).is_file()]
    assert not missing, missing
    assert any(TESTS.rglob(f"*{REAL_SUFFIX}")), REAL_SUFFIX


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


def test_examples_caps_a_tests_own_count_under_the_fast_profile_only() -> None:
    assert examples(300) == 300  # the suite's profile: as written
    settings.load_profile(FAST_PROFILE)
    try:
        assert examples(300) == FAST_EXAMPLES
        assert examples(FAST_EXAMPLES - 1) == FAST_EXAMPLES - 1
        assert settings().max_examples == FAST_EXAMPLES
    finally:
        settings.load_profile("suite")
    assert examples(300) == 300


def test_first_seeds_keeps_each_functions_first_seeds_and_every_unseeded_case() -> None:
    cases = [
        ("a", 1),
        ("a", 2),
        ("a", 1),  # collected again (another module's copy, say): kept
        ("b", NO_SEED),
        ("c", 7),
        ("a", 3),
        ("c", 5),
        ("b", NO_SEED),
    ]
    assert first_seeds(cases, 1) == [True, False, True, True, True, False, False, True]
    assert first_seeds(cases, 2) == [True, True, True, True, True, False, True, True]
    assert all(first_seeds(cases, 3))


PROPERTY = """
import pytest
from hypothesis import given, settings, strategies as st

from tests._kinds import examples


@settings(max_examples=examples(300), database=None)
@given(st.integers())
def test_counts(n):
    with open("examples.txt", "a") as out:
        out.write("x")


@pytest.mark.parametrize("side", ["x", "y"])
@pytest.mark.parametrize("seed", [3, 1, 2])
def test_seeded(seed, side):
    with open("seeds.txt", "a") as out:
        out.write(f"{seed}{side} ")
"""


@pytest.mark.slow  # pytest in a subprocess
@pytest.mark.parametrize(
    ("options", "most", "seeds"),
    [
        ([], 300, "1x 1y 2x 2y 3x 3y"),
        (["--hypothesis-profile=fast", "--first-seeds=1"], FAST_EXAMPLES, "3x 3y"),
    ],
)
def test_conftest_runs_the_quick_loops_examples_and_seeds(
    tmp_path: Path, options: list[str], most: int, seeds: str
) -> None:
    """The suite's conftest as a plugin, over a property that asks for 300 examples and a
    test over three seeds: the quick loop's options run 10 examples and the first seed."""
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
            *options,
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
    assert " ".join(sorted((tmp_path / "seeds.txt").read_text().split())) == seeds
