"""Instruction counts with valgrind's callgrind, for the benchmarks' ``--instructions``, and
the table of compiled against pure Python that the compiled core's benchmarks share.

Instructions, unlike seconds, hardly move with the other load on these shared
machines, so two versions of a path can be compared within a few percent. The compiled
core (issue 43) is measured against its pure-Python source in the same run: a part's work
with each form behind it (`module_forms`), in turns (`in_turns`) or counted
(`instructions_per`), one row per part of compiled, pure and their ratio (`print_header`,
`print_row`); a whole script runs with each form through ``TRIOGROUPS_PURE_PYTHON``
(`instructions_by_form`). `forms_parser` is those benchmarks' common command line.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

from triogroups import _compiled

_VALGRIND = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]

#: The forms of the compiled core, in the order a table shows them.
FORMS = ("compiled", "pure")


def require_valgrind() -> None:
    """Exit with a message naming what is missing when valgrind is not installed."""
    if shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind (callgrind) on the PATH")


def instructions(script: str, args: list[str], env: Mapping[str, str] | None = None) -> int:
    """The instructions callgrind counted for one run of ``python script *args`` (in
    ``env`` if given, else this process's environment)."""
    command = [*_VALGRIND, sys.executable, script, *args]
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, env=None if env is None else {**env}
    )
    if result.returncode:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr[-2000:]}")
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind: {result.stderr[-500:]}")
    return int(found.group(1))


def instructions_per(
    script: str,
    args: Callable[[int], list[str]],
    units: int,
    env: Mapping[str, str] | None = None,
) -> float:
    """Instructions per unit of work (a round trip, a message): ``python script
    *args(units)`` and ``*args(2 * units)`` run side by side, and the difference over
    ``units`` leaves out what both runs share (start-up, joining, warm-up)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        one, two = pool.map(lambda n: instructions(script, args(n), env), (units, 2 * units))
    return (two - one) / units


def compiled_core_built() -> bool:
    """Whether this install has the compiled core (its first module, the codec's loop)."""
    return _compiled.is_compiled(importlib.import_module("triogroups._wire_loop"))


def instructions_by_form(
    script: str, args: Callable[[int], list[str]], units: int
) -> dict[str, float]:
    """`instructions_per` of a whole script with the compiled core (where built) and with
    ``TRIOGROUPS_PURE_PYTHON=1``, one after the other."""
    plain = {k: v for k, v in os.environ.items() if k != _compiled.PURE_ENV}
    envs = {"compiled": plain} if compiled_core_built() else {}
    envs["pure"] = plain | {_compiled.PURE_ENV: "1"}
    return {form: instructions_per(script, args, units, env) for form, env in envs.items()}


def module_forms(name: str) -> dict[str, ModuleType]:
    """The compiled-core module ``name`` (``"_layer._scan"``) by form: "compiled" only
    where the build made it, then "pure"."""
    forms = {"pure": _compiled.pure(name)}
    built = importlib.import_module(f"triogroups.{name}")
    if _compiled.is_compiled(built):
        forms = {"compiled": built, **forms}
    return forms


def in_turns(
    works: Mapping[str, Callable[[], object]], repeat: int, loops: int, scale: float
) -> dict[str, float]:
    """The median CPU of one call of each work, times ``scale`` (a unit and a batch
    size), over ``repeat`` turns of ``loops`` calls: the works take turns, in order, then
    in reverse (compiled, pure, pure, compiled, ...), so a change of load hits both."""
    samples: dict[str, list[float]] = {name: [] for name in works}
    for turn in range(repeat):
        for name in list(works)[:: 1 if turn % 2 == 0 else -1]:
            work = works[name]
            start = time.process_time()
            for _ in range(loops):
                work()
            samples[name].append((time.process_time() - start) / loops * scale)
    return {name: statistics.median(values) for name, values in samples.items()}


def print_header(title: str, label: str, width: int = 20) -> None:
    """A table's title line and its column names: ``label``, the forms, the ratio."""
    print(title)
    print(f"{label:<{width}}" + "".join(f"{form:>10}" for form in FORMS) + f"{'ratio':>8}")


def print_row(label: str, values: Mapping[str, float], fmt: str, width: int = 20) -> None:
    """One row: each form's value (``fmt``, a format spec; "-" where there is none) and
    compiled over pure."""
    cells = "".join(
        f"{format(values[form], fmt):>10}" if form in values else f"{'-':>10}" for form in FORMS
    )
    ratio = values["compiled"] / values["pure"] if "compiled" in values else math.nan
    print(f"{label:<{width}}{cells}{ratio:>7.2f}x")


def forms_parser(description: str, run: str) -> argparse.ArgumentParser:
    """The command line of a benchmark of the compiled core's parts: ``--repeat`` (turns
    of each form), ``--instructions``, and the hidden ``--run`` that one counted run of a
    part takes (``run``: its arguments' names, space-separated, as in ``"form part
    batches"``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeat", type=int, default=7, help="turns of each form (default 7)")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions with callgrind"
    )
    parser.add_argument("--run", nargs=len(run.split()), help=argparse.SUPPRESS)
    return parser


def check_repeat(parser: argparse.ArgumentParser, repeat: int) -> None:
    """Refuse a ``--repeat`` below 1, in one line."""
    if repeat < 1:
        parser.error(f"--repeat must be at least 1, got {repeat}")
