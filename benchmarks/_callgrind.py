"""Instruction counts with valgrind's callgrind, for the benchmarks' ``--instructions``.

Instructions, unlike seconds, hardly move with the other load on these shared
machines, so two versions of a path can be compared within a few percent.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

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
