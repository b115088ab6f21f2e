"""Instruction counts with valgrind's callgrind, for the benchmarks' ``--instructions``.

Instructions, unlike seconds, hardly move with the other load on these shared
machines, so two versions of a path can be compared within a few percent.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

_VALGRIND = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]


def require_valgrind() -> None:
    """Exit with a message naming what is missing when valgrind is not installed."""
    if shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind (callgrind) on the PATH")


def instructions(script: str, args: list[str]) -> int:
    """The instructions callgrind counted for one run of ``python script *args``."""
    command = [*_VALGRIND, sys.executable, script, *args]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind: {result.stderr[-500:]}")
    return int(found.group(1))


def instructions_per(script: str, args: Callable[[int], list[str]], units: int) -> float:
    """Instructions per unit of work (a round trip, a message): ``python script
    *args(units)`` and ``*args(2 * units)`` run side by side, and the difference over
    ``units`` leaves out what both runs share (start-up, joining, warm-up)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        one, two = pool.map(lambda n: instructions(script, args(n)), (units, 2 * units))
    return (two - one) / units
