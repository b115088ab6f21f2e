"""The package builds, passes the index's checks and installs as a user would install it.

Issue 41: ``python -m build`` makes a wheel and an sdist that ``twine check`` accepts; the
wheel installs into a fresh venv (its dependencies from the package index) and runs there,
outside the checkout; the sdist is the checkout minus what git ignores, so the test command
runs from it. The tutorial also tells a user to build a wheel with ``pip wheel --no-deps -w
dist .``: setuptools' editable compat mode, which dev.py once used so that an application's mypy
saw the package, printed deprecation warnings at every install; hatchling needs no such mode.
Issue 43: where a C compiler is, the wheel carries the compiled core (hatch_build.py); where none
is, it builds as pure Python with a warning. One build compiles (the wheel ``python -m build``
makes, which the fresh venv installs); the tutorial's command runs once, without a compiler:
the second compiling build cost 12 s of CPU, and both run the same build hook.

Every test here needs the package index (the build backend, and the wheel's dependencies in the
fresh venv): they carry the ``package`` marker, which ``python3 dev.py test --fast`` deselects.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

import pytest

import triogroups

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.package

# Building and installing take 10-30 s on a quiet machine; the index and a loaded machine can
# make it minutes. No duration is asserted; these only keep a hung pip from holding the run.
BUILD_TIMEOUT = 600

# The files a user of the sdist or the wheel is promised beside the code.
PROJECT_FILES = ("LICENSE", "README.md", "CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md")


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``argv``; fail the test with its output unless it exits 0. Returns stdout."""
    result = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, f"{argv} exited {result.returncode}:\n{output}"
    return result.stdout + result.stderr


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path
    build_output: str


@dataclass(frozen=True)
class FreshVenv:
    bin: Path
    home: Path  # a working directory outside the checkout, so the checkout is never imported


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """One directory for the build and the venv that every pytest-xdist worker of this run
    shares (the workers' temporary directories have one parent): the first worker to need
    a piece makes it under `_locked`, the others reuse it."""
    if worker_id == "master":
        return tmp_path_factory.mktemp("package")
    directory = tmp_path_factory.getbasetemp().parent / "package"
    directory.mkdir(exist_ok=True)
    return directory


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Held while one worker builds or installs into ``directory``."""
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def dists(shared_dir: Path) -> Dists:
    """``python -m build`` on the checkout: the sdist, then the wheel built from the sdist
    (so the sdist is checked to be enough to build from)."""
    out = shared_dir / "dist"
    log = shared_dir / "build.log"
    with _locked(shared_dir):
        if not log.exists():
            argv = [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)]
            log.write_text(_run(argv, shared_dir))
    (sdist,) = out.glob("triogroups-*.tar.gz")
    (wheel,) = out.glob("triogroups-*.whl")
    return Dists(sdist, wheel, log.read_text())


def _clean_env(fresh: Path | None = None) -> dict[str, str]:
    """The environment of a user's shell: nothing that points Python at the checkout or at
    the suite's venv; with ``fresh``, that venv's bin first on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    }
    if fresh is not None:
        env["PATH"] = f"{fresh}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(fresh.parent)
    return env


@pytest.fixture(scope="module")
def fresh_venv(shared_dir: Path, dists: Dists) -> FreshVenv:
    """A new venv (outside the checkout) with the wheel installed by pip, its dependencies
    from the package index as a user gets them."""
    home = shared_dir / "home"
    home.mkdir(exist_ok=True)
    bin_dir = shared_dir / "venv" / "bin"
    done = shared_dir / "venv.installed"
    with _locked(shared_dir):
        if not done.exists():
            venv.EnvBuilder(with_pip=True, clear=True, symlinks=True).create(shared_dir / "venv")
            pip = [str(bin_dir / "python"), "-m", "pip", "install", "--quiet"]
            _run([*pip, str(dists.wheel)], home, _clean_env())
            done.write_text(str(dists.wheel))
    return FreshVenv(bin_dir, home)


def test_built_wheel_carries_presets_py_typed_and_the_compiled_core(dists: Dists) -> None:
    """The wheel ``python -m build`` makes (from the sdist) has the stack presets and
    ``py.typed``, nothing of the tests, examples or benchmarks, and, where a C compiler is,
    the compiled core (hatch_build.py, issue 43) with a platform tag."""
    names = set(zipfile.ZipFile(dists.wheel).namelist())
    assert "triogroups/py.typed" in names
    assert {"triogroups/presets/udp.toml", "triogroups/presets/tcp.toml"} <= names
    assert not any(n.startswith(("tests/", "examples/", "benchmarks/")) for n in names)
    if _has_compiler():
        for module in (
            "_wire_loop",
            "_layer/_scan",
            "transports/_bundle_loop",
            "_channel/_handoff",
            "protocols/_up_scans",
            "protocols/_down_loops",
            "_channel/_send_loop",
        ):
            assert any(n.startswith(f"triogroups/{module}.") and n.endswith(".so") for n in names)
        assert not dists.wheel.name.endswith("-py3-none-any.whl"), dists.wheel.name


def _has_compiler() -> bool:
    return bool(shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc"))


def test_pip_wheel_without_a_c_compiler_builds_pure_python_says_so_and_warns_of_no_deprecation(
    tmp_path: Path,
) -> None:
    """The tutorial's ``pip wheel --no-deps -w dist .``, on a machine without a C compiler
    (here: ``CC`` naming none; issue 43): it still builds triogroups, as pure Python, the
    build warns that the compiled core is missing and nothing warns of a deprecation
    (setuptools' editable compat mode once did); the wheel has the presets and ``py.typed``
    and nothing of the tests. The same command with a compiler runs the same build hook
    that compiled the wheel of `dists`, checked above: one compiling build per run."""
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc")}
    argv = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path), str(ROOT)]
    output = _run(argv, tmp_path, env)
    assert "triogroups: no compiled core" in output, output
    assert "deprecat" not in output.lower(), output
    (wheel,) = tmp_path.glob("triogroups-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "triogroups/_wire_loop.py" in names
    assert "triogroups/py.typed" in names
    assert {"triogroups/presets/udp.toml", "triogroups/presets/tcp.toml"} <= names
    assert not any(n.startswith(("tests/", "examples/", "benchmarks/")) for n in names)
    assert not any(n.endswith(".so") for n in names), sorted(names)


def test_build_makes_an_sdist_and_a_wheel_that_twine_check_accepts(dists: Dists) -> None:
    """Issue 41, item 4: what ``python -m build`` makes is what the index would accept
    (``--strict``: warnings about the metadata, such as a README that does not render,
    fail too), built without deprecation warnings."""
    assert "deprecat" not in dists.build_output.lower(), dists.build_output
    output = _run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dists.sdist), str(dists.wheel)],
        dists.sdist.parent,
    )
    assert output.count("PASSED") == 2, output


def _wheel_metadata(wheel: Path) -> tuple[set[str], dict[str, list[str]]]:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        message = HeaderParser().parsestr(archive.read(metadata).decode())
    fields: dict[str, list[str]] = {}
    for key, value in message.items():
        fields.setdefault(key, []).append(value)
    return names, fields


def test_wheel_metadata_names_license_authors_urls_and_classifiers(dists: Dists) -> None:
    """What an index page and ``pip show`` show: the Apache-2.0 license with its text in the
    wheel, who wrote it, where its docs, changelog and issues are, and what it runs on."""
    names, fields = _wheel_metadata(dists.wheel)
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert f"triogroups-{triogroups.__version__}.dist-info/licenses/LICENSE" in names
    assert fields["License-Expression"] == ["Apache-2.0"]
    assert fields["Version"] == [triogroups.__version__]
    assert fields["Author"] == ["triogroups developers"]
    urls = {url.split(",")[0] for url in fields["Project-URL"]}
    assert {"Homepage", "Documentation", "Changelog", "Issues"} <= urls
    classifiers = set(fields["Classifier"])
    assert {
        "Framework :: Trio",
        "Typing :: Typed",
        "Programming Language :: Python :: 3.11",
        "Topic :: System :: Distributed Computing",
    } <= classifiers
    assert any(c.startswith("Development Status ::") for c in classifiers)


def _tracked_files() -> set[str] | None:
    """The files git tracks in this checkout that exist on disk; None outside a checkout
    (the suite run from an unpacked sdist)."""
    if not (ROOT / ".git").exists():
        return None
    result = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if result.returncode:
        return None
    return {name for name in result.stdout.split("\0") if name and (ROOT / name).is_file()}


def test_sdist_holds_every_tracked_file_and_nothing_of_a_local_venv(dists: Dists) -> None:
    """The sdist lets one run the test command: it holds the tests, dev.py, the examples and
    benchmarks the tests run, the docs and the project files (LICENSE, CHANGELOG, ...), and
    nothing that a checkout has only locally (.venv, caches, dist)."""
    with tarfile.open(dists.sdist) as archive:
        top = f"triogroups-{triogroups.__version__}/"
        names = {m.name.removeprefix(top) for m in archive.getmembers() if m.isfile()}
    assert {*PROJECT_FILES, "pyproject.toml", "dev.py", "tests/conftest.py"} <= names
    assert not any(
        part in (".venv", "__pycache__", ".pytest_cache", ".mypy_cache", "dist")
        for name in names
        for part in name.split("/")
    ), sorted(names)
    tracked = _tracked_files()
    if tracked is None:
        pytest.skip("not a git checkout: the sdist's own contents cannot be compared")
    missing = tracked - names
    assert not missing, f"tracked files not in the sdist (pyproject's sdist include): {missing}"


def test_installed_wheel_runs_version_stacks_and_a_simulated_demo(fresh_venv: FreshVenv) -> None:
    """Issue 41, item 4: in a fresh venv, from a directory outside the checkout, the
    installed ``triogroups`` command prints its version, lists the stack presets (read from
    the installed package's data) and runs a 2-member group on the simulated network to a
    clean check; the package imported is the installed one, with its test kit and
    extension namespace."""
    env = _clean_env(fresh_venv.bin)
    command = str(fresh_venv.bin / "triogroups")

    def run(*args: str) -> str:
        return _run([*args], fresh_venv.home, env)

    where = run(
        str(fresh_venv.bin / "python"),
        "-c",
        "import triogroups, triogroups.testing, triogroups.extend; print(triogroups.__file__)",
    )
    installed = Path(where.strip())
    assert installed.is_relative_to(fresh_venv.bin.parent), where
    assert not installed.is_relative_to(ROOT), where

    name, form = run(command, "--version").strip().splitlines()
    assert name == f"triogroups {triogroups.__version__}"
    # a wheel built where a C compiler is runs the compiled core
    if _has_compiler():
        assert form == "wire codec: compiled core (Cython)", form

    stacks = run(command, "stacks")
    for preset in ("udp", "tcp", "udp-mcast", "sim"):
        assert f" {preset} " in stacks, stacks

    demo = run(command, "demo", "--sim", "--members", "2", "--messages", "100", "--seed", "3")
    assert "2 members on the simulated network" in demo, demo
    assert "every message delivered exactly once, per-sender in order" in demo, demo
