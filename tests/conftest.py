"""What every test may assume of the process it runs in, and how long it may run."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests._deadline import TEST_TIMEOUT, deadline_run
from tests._kinds import (
    FAST_EXAMPLES,
    FAST_PROFILE,
    NO_SEED,
    SEED_PARAMETER,
    deselects_all,
    first_seeds,
    path_markers,
)
from triogroups._ports import DEFAULT_BLOCK, PORTS_ENV


def _worker_block() -> str:
    """This pytest-xdist worker's share of `DEFAULT_BLOCK`, as ``LOW-HIGH``: workers draw
    ports side by side, and with a block each they never draw the same one."""
    low, high = DEFAULT_BLOCK
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), index + 1)
    size = (high - low + 1) // workers
    return f"{low + index * size}-{low + (index + 1) * size - 1}"


# Hypothesis times each example against a 200 ms deadline and calls a slow data draw an
# error: on a shared machine at load 25 a wire fuzz test failed that way. No test here
# depends on the machine's speed, so the suite's profile has neither (set before any test
# module is imported, so every @settings inherits it).
settings.register_profile(
    "suite", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("suite")
# The quick loop's (`dev.py test --fast` passes ``--hypothesis-profile=fast``): a handful of
# examples per property, a test's own larger ``max_examples`` capped too (`tests._kinds.examples`).
settings.register_profile(FAST_PROFILE, settings.get_profile("suite"), max_examples=FAST_EXAMPLES)

TESTS = Path(__file__).resolve().parent

# Set before any test runs, so member processes, chaos runs and benchmarks started by a test
# inherit it (triogroups/_ports.py).
os.environ[PORTS_ENV] = _worker_block()

# A shell without job control starts background commands (`.ci/run &`, nohup) with SIGINT
# ignored, and Python keeps an ignored SIGINT ignored. The signal tests (open_channel takes
# unhandled signals only, and its children inherit the disposition) need the usual start:
# Python's KeyboardInterrupt handler, which an exec'd member turns back into the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--first-seeds",
        type=int,
        default=0,
        metavar="N",
        help="run only the cases of the first N values of each test's parametrised "
        f"'{SEED_PARAMETER}' (the quick loop, dev.py test --fast: 1); 0, the default: all",
    )


@pytest.hookimpl(trylast=True)  # after pytest-trio has marked the async tests, after -m
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every Trio test runs under a wall-clock deadline (tests/_deadline.py) that cancels
    it through Trio, so its cleanup runs. pytest-timeout (``timeout`` in pyproject.toml)
    stays the last resort at twice that: for a Trio test by its ``thread`` method (stacks
    dumped, the worker ends), since a SIGALRM raised inside Trio's run loop would leave
    every later Trio test of that worker failing. (pytest-trio would run the inner test of
    a Trio test driven by Hypothesis with ``trio.run`` itself, so such a test, of which the
    suite has none, would have the last resort only.)"""
    run = deadline_run(TEST_TIMEOUT)
    for item in items:
        if item.get_closest_marker("trio") is not None:
            item.add_marker(pytest.mark.trio(run=run), append=False)
            item.add_marker(pytest.mark.timeout(2 * TEST_TIMEOUT, method="thread"))
    most = config.getoption("first_seeds")
    if most > 0:
        _keep_first_seeds(config, items, most)
    _whole_runs_first(items)


def _whole_runs_first(items: list[pytest.Item]) -> None:
    """Moves the tests marked ``whole_run`` (a Spark cluster's minutes-long run, done once
    per test run by tests/spark/_once.py) to the front, keeping every other test's order.
    pytest-xdist's ``worksteal`` hands each worker a contiguous share of the collection
    and others steal only from the end of a queue, so a long run left in its place
    (tests/spark, in the last share with the supervisor, packaging and benchmark tests)
    ran after most of that worker's share, and the suite waited for it at the end. First,
    its minutes overlap the short tests of the other workers."""
    first = [item for item in items if item.get_closest_marker("whole_run") is not None]
    if first:
        rest = [item for item in items if item.get_closest_marker("whole_run") is None]
        items[:] = first + rest


def _keep_first_seeds(config: pytest.Config, items: list[pytest.Item], most: int) -> None:
    """Deselects the cases of every seed after a test's first ``most`` (``--first-seeds``),
    for each combination of its other parameters (a preset or a role still runs with its
    own first seed): the quick loop runs each seeded simulation once, the whole suite with
    all its seeds."""
    cases = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec else {}
        others = sorted(
            (name, repr(value)) for name, value in params.items() if name != SEED_PARAMETER
        )
        parent = item.parent.nodeid if item.parent else ""
        case = f"{parent}::{getattr(item, 'originalname', item.name)}{others}"
        cases.append((case, params.get(SEED_PARAMETER, NO_SEED)))
    keep = first_seeds(cases, most)
    dropped = [item for item, kept in zip(items, keep, strict=True) if not kept]
    if dropped:
        items[:] = [item for item, kept in zip(items, keep, strict=True) if kept]
        config.hook.pytest_deselected(items=dropped)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Every test carries the markers of its kind (`_item_markers`) before ``-m`` selects by
    them (pytest deselects later, in ``pytest_collection_modifyitems``)."""
    for marker in sorted(_item_markers(item)):
        item.add_marker(marker)


def _item_markers(item: pytest.Item) -> set[str]:
    """The markers ``item`` carries by its place (tests/_kinds.py) and by what it uses: a test
    that takes the shared Spark session (tests/spark/conftest.py) is a ``spark`` test."""
    markers = set(_relative_markers(item.path))
    if "spark" in getattr(item, "fixturenames", ()):
        markers.add("spark")
    return markers


def _relative_markers(path: Path) -> frozenset[str]:
    try:
        return path_markers(path.relative_to(TESTS))
    except ValueError:  # not below tests/ (a doctest of the package, say)
        return frozenset()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leaves unimported a file or directory whose tests ``-m`` would all deselect by their
    place alone (tests/real under ``dev.py test --fast``): importing and collecting them
    cost the quick loop seconds of CPU in every worker. None: pytest decides as usual."""
    expression = config.getoption("markexpr", "")
    if not expression:
        return None
    probe = collection_path / "test_.py" if collection_path.is_dir() else collection_path
    known = _relative_markers(probe)
    if not known:
        return None
    from _pytest.mark.expression import Expression  # pytest's own parser of -m

    evaluate = Expression.compile(expression).evaluate
    return True if deselects_all(evaluate, expression, known) else None
