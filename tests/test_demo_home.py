"""The demo has one home, `triogroups._demo` (issue 40 item 8): it was five modules in three
packages (the package root, `supervisor`, `inspector`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import triogroups

_PACKAGE = Path(triogroups.__file__).parent


def test_demo_home_holds_every_demo_module() -> None:
    """No module outside ``triogroups/_demo/`` is a piece of the demo."""
    outside = sorted(
        str(path.relative_to(_PACKAGE))
        for path in _PACKAGE.rglob("*demo*")
        if path.suffix == ".py" and path.parent.name != "_demo"
    )
    assert outside == []


def test_demo_home_a_member_process_loads_no_other_part_of_the_demo() -> None:
    """A real demo member imports `triogroups._demo._member`: the package must not pull in
    the simulated demo (and with it the test kit), the driver or its inspector view."""
    others = ("triogroups.testing", "triogroups._demo._sim", "triogroups._demo._real")
    others += ("triogroups._demo._inspect",)
    code = (
        "import sys, triogroups._demo._member\n"
        f"print([m for m in {others!r} if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
