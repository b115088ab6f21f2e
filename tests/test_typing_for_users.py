"""An application's type checker sees triogroups as installed by ``dev.py`` (editable).

setuptools' default editable install hides the package behind an import hook
that mypy cannot follow, so ``mypy --strict`` on an application said
"cannot find implementation or library stub for module named triogroups".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# mypy --strict over an application and the package it imports: out of `dev.py test --fast`
pytestmark = pytest.mark.slow

APP = """\
import trio

import triogroups
from triogroups import View


async def main() -> None:
    async with triogroups.open_channel("app", stack="udp", name="A") as ch:
        view: View = ch.view
        await ch.send({"members": len(view.members)})
        wrong: int = ch.view  # the one error mypy must find: it knows what ch.view is


trio.run(main)
"""


def test_mypy_strict_on_an_application_sees_the_package_types(tmp_path: Path) -> None:
    """Run from outside the checkout, as a user's project would; the deliberate error
    proves mypy read triogroups' annotations instead of giving up on the import."""
    (tmp_path / "app.py").write_text(APP)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "app.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, result.stdout + result.stderr
    assert errors[0].startswith("app.py:11: error: Incompatible types in assignment"), errors
    assert '"View"' in errors[0], errors
