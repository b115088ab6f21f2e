#!/usr/bin/env python3
"""One entry point for a fresh checkout: `python3 dev.py demo` or `python3 dev.py test`.

Creates ``.venv`` beside this file on first use, installs triogroups into it
(editable, with the test, spark and docs extras), then runs the demo cluster or the whole
check: ruff lint, ruff format check, mypy, the import layers (`lint-imports`, the contracts in
pyproject.toml) and pytest (in four workers). Needs only Python
3.11+, pip and the package index. `python3 dev.py test --fast` is the quick loop while
working: the same lint and type checks, and every test but the slow kinds (`FAST_SKIPS`),
with fewer Hypothesis examples and one seed of each seeded simulation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")


def _run(*args: str | Path, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(str(a) for a in args), flush=True)
    result = subprocess.run([str(a) for a in args], cwd=ROOT, env=env, check=False)
    if result.returncode:
        sys.exit(result.returncode)


# hatchling's editable install puts the checkout on sys.path with a plain .pth line, so an
# application's `mypy --strict` sees triogroups and its py.typed (setuptools' default editable
# mode hides the package behind an import hook that type checkers cannot follow, and the
# compat mode that avoided it is deprecated).
INSTALL = ("-e", ".[test,spark,docs]")

# The suite spends most of its time waiting (member processes starting, failure detection,
# merges, chaos runs in real time): tests/real and tests/supervisor took 509 s of wall time
# for 106 s of CPU. Four workers that steal each other's queued tests overlap those waits
# on two cores; `dev.py test -n 0` runs everything in one process.
PARALLEL = ("-n", "4", "--dist", "worksteal")

# What `test --fast` leaves out (pytest markers, pyproject.toml; tests/conftest.py marks all
# of tests/real, tests/spark and every *_real.py by place): member processes over real
# sockets, Spark (a JVM), network namespaces, building and installing the package, the chaos
# campaign's whole seeds, the docs site's build and the docs' programs, and the slow rest
# (mypy on applications, the suite re-collected without Spark). What remains is the sans-IO,
# simulated and in-process tests; CI runs everything.
FAST_SKIPS = (
    "real",
    "spark",
    "sparkcluster",
    "multihost",
    "package",
    "chaos",
    "docs",
    "slow",
    "whole_run",
)

# The quick loop's own settings: a handful of examples per Hypothesis property (the profile
# tests/conftest.py registers), one seed of each test parametrised over seeds (the option
# tests/conftest.py adds), and two workers for two cores: what it keeps mostly computes
# rather than waits, and every worker imports and collects the suite again.
FAST_PROFILE = "--hypothesis-profile=fast"
FAST_SEEDS = "--first-seeds=1"
FAST_PARALLEL = ("-n", "2", "--dist", "worksteal")


# Where the suite's Python processes keep their bytecode. An environment that sets
# PYTHONDONTWRITEBYTECODE (container images often do, and so did the machines this suite
# was timed on) kept every process from writing it, so every run compiled everything again:
# each pytest worker rewrote and compiled every test module (collecting the suite took
# 13.1 s of CPU, 3.5 s with the bytecode kept), and each member process, command and
# example the tests start compiled the package (importing it took 1.0 s of CPU, 0.6 s
# kept). The tests' processes keep it here, in the venv, whatever that variable says, and
# the checkout gets no __pycache__ either way. A PYTHONPYCACHEPREFIX of the caller's wins.
PYCACHE = VENV / "pycache"


def pytest_env(environ: dict[str, str]) -> dict[str, str]:
    """The environment `dev.py test` runs pytest in: ``environ`` with bytecode written
    under `PYCACHE` (``PYTHONPYCACHEPREFIX``, unless it names a place already) and without
    ``PYTHONDONTWRITEBYTECODE``. Every process the tests start inherits it."""
    env = {key: value for key, value in environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    if not env.get("PYTHONPYCACHEPREFIX"):
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def pytest_args(rest: list[str]) -> list[str]:
    """pytest's arguments for `dev.py test [--fast] [pytest args]`: ``--fast`` becomes a
    marker expression that deselects `FAST_SKIPS`, the fast Hypothesis profile, one seed per
    seeded test and `FAST_PARALLEL`; everything else goes to pytest as given (a later ``-m``
    or ``-n`` of the caller's replaces them)."""
    if "--fast" not in rest:
        return [*PARALLEL, *rest]
    expression = " and ".join(f"not {marker}" for marker in FAST_SKIPS)
    fast = [*FAST_PARALLEL, "-m", expression, FAST_PROFILE, FAST_SEEDS]
    return fast + [arg for arg in rest if arg != "--fast"]


# The docs site's browser test (tests/test_docs_site.py) drives a Chromium that is already
# installed, the distribution's or Playwright's own; without one it is skipped.
BROWSER_ENV = "TRIOGROUPS_CHROMIUM"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER_HINT = (
    "no Chromium found, so the docs site's browser test is skipped; install one with "
    "`sudo apt-get install chromium` (Debian; Ubuntu: chromium-browser) or "
    "`.venv/bin/python -m playwright install chromium`, or set "
    f"{BROWSER_ENV} to a Chromium or Chrome binary"
)


def chromium() -> str | None:
    """The browser for the docs site's test: ``$TRIOGROUPS_CHROMIUM``, else the first of
    `BROWSERS` on the PATH, else None."""
    chosen = os.environ.get(BROWSER_ENV)
    if chosen:
        return chosen
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def build_inputs() -> list[Path]:
    """What the install is made from beyond the sources it links to: pyproject.toml, the
    build hook, and the compiled core's modules (each ``.pxd``, in subpackages too, and the
    ``.py`` beside it), which the editable install compiles in place: a change to one of them
    needs a new install, or the old compiled module keeps running."""
    typed = sorted((ROOT / "triogroups").rglob("*.pxd"))
    return [
        ROOT / "pyproject.toml",
        ROOT / "hatch_build.py",
        *typed,
        *(pxd.with_suffix(".py") for pxd in typed if pxd.with_suffix(".py").exists()),
    ]


def _ensure_venv() -> None:
    if not (BIN / "python").exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / ".installed"
    wanted = " ".join(INSTALL)
    newest = max(path.stat().st_mtime for path in build_inputs() if path.exists())
    if not stamp.exists() or stamp.stat().st_mtime < newest or stamp.read_text() != wanted:
        _run(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
        _run(BIN / "python", "-m", "pip", "install", "--quiet", *INSTALL)
        stamp.write_text(wanted)


def _playwright_has_chromium() -> bool:
    """Whether ``playwright install chromium`` put a browser where Playwright looks."""
    cache = Path(os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or Path.home() / ".cache/ms-playwright")
    return any(cache.glob("chromium-*"))


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in ("demo", "test"):
        sys.exit(
            "usage: python3 dev.py demo [options] | python3 dev.py test [--fast] [pytest args]"
        )
    _ensure_venv()
    command, rest = argv[0], argv[1:]
    if command == "demo":
        _run(BIN / "triogroups", "demo", *rest)
        return
    _run(BIN / "ruff", "check", ".")
    _run(BIN / "ruff", "format", "--check", ".")
    _run(BIN / "mypy")
    _run(BIN / "lint-imports")
    if chromium() is None and not _playwright_has_chromium():
        print(f"note: {BROWSER_HINT}", flush=True)
    _run(BIN / "python", "-m", "pytest", *pytest_args(rest), env=pytest_env(dict(os.environ)))


if __name__ == "__main__":
    main(sys.argv[1:])
