"""The atheris targets (tests/fuzz/atheris_targets.py) run briefly where atheris is installed.

atheris is optional (not a dependency): without it these tests are skipped, saying so.
Each target runs in its own process, since libFuzzer owns the process it runs in.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("atheris_targets.py")

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("atheris") is None,
    reason="atheris is not installed (optional: pip install atheris)",
)


@pytest.mark.parametrize(("target", "runs"), [("wire", 10_000), ("protocols", 800)])
def test_fuzz_atheris_target_runs_without_a_crash(target: str, runs: int, tmp_path: Path) -> None:
    """libFuzzer exits 0 only if no input made the target raise."""
    result = subprocess.run(
        [sys.executable, str(SCRIPT), target, f"-atheris_runs={runs}", "-seed=1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
