"""``python3 dev.py test --fast``: the quick loop runs lint, types and every test but the slow
kinds, which are exactly the markers pyproject.toml registers (CONTRIBUTING.md, Testing)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import dev

ROOT = Path(__file__).resolve().parent.parent


def _registered_markers() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {line.split(":")[0] for line in config["tool"]["pytest"]["ini_options"]["markers"]}


def test_dev_test_fast_becomes_a_marker_expression_and_the_rest_goes_to_pytest() -> None:
    fast = (
        "not real and not spark and not sparkcluster and not multihost and not package"
        " and not chaos and not docs and not slow and not whole_run"
    )
    assert dev.pytest_args(["--fast", "-k", "wire", "-x"]) == [
        *dev.FAST_PARALLEL,
        "-m",
        fast,
        "--hypothesis-profile=fast",
        "--first-seeds=1",
        "-k",
        "wire",
        "-x",
    ]
    assert dev.pytest_args(["-k", "wire"]) == [*dev.PARALLEL, "-k", "wire"]


def test_dev_test_fast_skips_every_registered_marker() -> None:
    """Every marker the suite registers names a slow kind of test (processes, Spark,
    namespaces, the package build): a new marker must be placed in or out of the quick
    loop on purpose."""
    assert set(dev.FAST_SKIPS) == _registered_markers()


def test_dev_test_fast_expression_deselects_marked_tests_and_keeps_the_rest() -> None:
    """pytest reads the expression as meant: the package tests (module marker) go, the wire
    codec's tests stay."""
    (*_, flag, expression, _profile, _seeds) = dev.pytest_args(["--fast"])
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    files = ("tests/test_packaging.py", "tests/test_wire.py")
    result = subprocess.run(
        [*collect, flag, expression, *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    selected = [line for line in result.stdout.splitlines() if "::" in line]
    assert selected, result.stdout
    assert all(line.startswith("tests/test_wire.py::") for line in selected), result.stdout


def test_dev_installs_again_when_the_compiled_core_or_its_build_changes() -> None:
    """The editable install compiles the compiled core in place (hatch_build.py): dev.py
    installs again when pyproject.toml, the build hook or a compiled-core module (a ``.pxd``
    and the ``.py`` beside it, in a subpackage too, or the ``.pxd`` of `Message`'s layout
    they share) is newer than its last install, so the compiled form never
    lags behind its source."""
    inputs = {path.relative_to(ROOT).as_posix() for path in dev.build_inputs()}
    assert {
        "pyproject.toml",
        "hatch_build.py",
        "triogroups/_wire_loop.py",
        "triogroups/_wire_loop.pxd",
        "triogroups/_layer/_scan.py",
        "triogroups/_layer/_scan.pxd",
        "triogroups/_message_layout.pxd",
    } <= inputs
    assert all((ROOT / name).exists() for name in inputs)


def test_dev_test_keeps_bytecode_in_the_venv_whatever_the_environment_says() -> None:
    """pytest and every process it starts write their bytecode under the venv (each worker
    rewrote and compiled every test module, and each member process compiled the package,
    on every run, where PYTHONDONTWRITEBYTECODE was set), and a prefix the caller chose
    stays; everything else of the environment passes unchanged."""
    env = dev.pytest_env({"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/bin", "PYTHONPATH": "."})
    assert env == {"PATH": "/bin", "PYTHONPATH": ".", "PYTHONPYCACHEPREFIX": str(dev.PYCACHE)}
    assert dev.PYCACHE.is_relative_to(dev.VENV)
    assert dev.pytest_env({"PYTHONPYCACHEPREFIX": "/tmp/mine"}) == {
        "PYTHONPYCACHEPREFIX": "/tmp/mine"
    }
