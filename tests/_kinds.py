"""Which kind of test a file holds, from where it lives, and the quick loop's Hypothesis profile.

tests/conftest.py marks every test by these rules, so a new file under tests/real or
tests/spark, or a new ``*_real.py``, is left out of ``dev.py test --fast`` without anyone
remembering a ``pytestmark`` (CONTRIBUTING.md, The quick loop). The rules read the path only,
so conftest can also skip importing a file whose tests an ``-m`` expression would all deselect
(tests/test_docs.py and tests/test_docs_site.py, named here for that, also say so themselves).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from pathlib import PurePath

from hypothesis import settings

# tests/<directory>/** -> the marker every test there carries
DIRECTORY_MARKERS = {"real": "real", "spark": "spark"}
REAL_SUFFIX = "_real.py"
# tests/<file> -> its marker, for files whose import alone costs the quick loop seconds in
# every worker (each builds every docs page, the generated reference included)
FILE_MARKERS = {"test_docs.py": "docs", "test_docs_site.py": "docs"}

# `dev.py test --fast` loads this profile (``--hypothesis-profile=fast``): at most this many
# examples per property, a test's own larger ``@settings(max_examples=...)`` included.
FAST_PROFILE = "fast"
FAST_EXAMPLES = 10

# `dev.py test --fast` passes ``--first-seeds=1`` (tests/conftest.py): of a test parametrised
# over a ``seed``, the quick loop runs the first seed of each combination of its other
# parameters (every preset or role still runs once); the whole suite runs every seed.
SEED_PARAMETER = "seed"
NO_SEED = object()


def path_markers(relative: PurePath) -> frozenset[str]:
    """The markers every test in ``relative`` (a path below tests/) carries by its place."""
    markers = set()
    if len(relative.parts) > 1 and relative.parts[0] in DIRECTORY_MARKERS:
        markers.add(DIRECTORY_MARKERS[relative.parts[0]])
    if relative.name.endswith(REAL_SUFFIX):
        markers.add("real")
    if len(relative.parts) == 1 and relative.name in FILE_MARKERS:
        markers.add(FILE_MARKERS[relative.name])
    return frozenset(markers)


def deselects_all(
    evaluate: Callable[[Callable[..., bool]], bool], expression: str, known: frozenset[str]
) -> bool:
    """Whether a marker ``expression`` (``evaluate``, its compiled form) is false for every
    test carrying the ``known`` markers, whatever else it carries: only then may a file go
    uncollected (``-m "real and not multihost"`` must still collect tests/real)."""
    others = sorted(set(_IDENT.findall(expression)) - _KEYWORDS - known)
    if len(others) > _MOST_NAMES:
        return False
    for values in itertools.product((False, True), repeat=len(others)):
        carried = known | {name for name, on in zip(others, values, strict=True) if on}
        try:
            if evaluate(_carries(carried)):
                return False
        except _AskedForArguments:
            return False
    return True


# pytest's marker expressions: identifiers, `and`, `or`, `not`, parentheses (and keyword
# arguments, which `_carries` refuses to guess)
_IDENT = re.compile(r"[\w:+\-.\[\]]+")
_KEYWORDS = frozenset({"and", "or", "not", "True", "False", "None"})
_MOST_NAMES = 12  # 4096 evaluations at most, once per marked file


class _AskedForArguments(Exception):
    """The expression matches a marker's keyword arguments, which a path cannot answer."""


def _carries(carried: frozenset[str]) -> Callable[..., bool]:
    """A matcher for pytest's marker expressions: is marker ``name`` among ``carried``."""

    def carries(name: str, /, **kwargs: object) -> bool:
        if kwargs:  # `-m "name(key=value)"` asks of a marker's arguments
            raise _AskedForArguments
        return name in carried

    return carries


def examples(wanted: int) -> int:
    """How many examples a property that asks for ``wanted`` runs: ``wanted`` in the whole
    suite, at most `FAST_EXAMPLES` while the fast profile is loaded. A profile only changes
    what ``@settings`` leaves unset, so a test that sets its own ``max_examples`` passes it
    through here (``@settings(max_examples=examples(300))``); read when its module is
    imported, which is after pytest's options loaded the profile."""
    if settings.get_current_profile_name() == FAST_PROFILE:
        return min(wanted, FAST_EXAMPLES)
    return wanted


def first_seeds(cases: Sequence[tuple[str, object]], most: int) -> list[bool]:
    """For each case, given as its test function and other parameters' values (one string)
    and its `SEED_PARAMETER` (`NO_SEED` when it has none), whether the quick loop runs it:
    every case without a seed, and of those with one the first ``most`` seeds of each, in
    the order they were collected (so every worker of a run keeps the same ones)."""
    chosen: dict[str, list[object]] = {}
    keep = []
    for case, seed in cases:
        if seed is NO_SEED:
            keep.append(True)
            continue
        seeds = chosen.setdefault(case, [])
        if seed not in seeds and len(seeds) < most:
            seeds.append(seed)
        keep.append(seed in seeds)
    return keep
