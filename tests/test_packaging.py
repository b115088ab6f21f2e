"""The package builds the way the README says, without warnings about how it is built.

The README tells a user to install from a checkout (editable) or from a wheel built once
(``pip wheel --no-deps -w dist .``). setuptools' editable compat mode, which dev.py used so
that an application's mypy saw the package, printed deprecation warnings at every install;
hatchling's editable install is a plain ``.pth`` line and needs no such mode.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_builds_without_deprecation_warnings_and_carries_presets_and_py_typed(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "deprecat" not in (result.stdout + result.stderr).lower(), result.stderr
    (wheel,) = tmp_path.glob("triogroups-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "triogroups/py.typed" in names
    assert {"triogroups/presets/udp.toml", "triogroups/presets/tcp.toml"} <= names
    assert not any(n.startswith(("tests/", "examples/", "benchmarks/")) for n in names)
