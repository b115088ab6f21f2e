"""Every code block in the Markdown docs and every example in a docstring runs as written.

The Markdown docs are README.md, every ``.md`` file under ``docs/`` and the reference pages
the docs site generates at build time (``docs/hooks.py``). A user copies examples; one that
does not run is a bug. So:

- each ```python block of those pages runs as a program of its own (a fresh
  interpreter in an empty directory), or, when it defines ``test_*``
  functions, as a pytest file with pytest-trio's ``trio_mode``;
- each ```toml block parses, and one with ``[[protocol]]`` layers is checked
  as a stack (every property validated; a whole stack built);
- each command in a ```sh block and each ``triogroups ...`` in the prose
  parses with the command's own argument parser;
- every docstring in ``triogroups`` and ``examples`` is a doctest that passes,
  and its ``::`` literal blocks are TOML stacks, commands that parse, or one
  of the few format descriptions named below (never untested Python).

The tests are generic: a block added to the README or to a page under docs/ is covered
without touching this file.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import os
import pkgutil
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import triogroups
from triogroups.cli import _parser
from triogroups.config import StackConfig
from triogroups.protocol import protocol_class
from triogroups.transports.base import Transport

# the docs' programs, doctests and commands: out of `dev.py test --fast` (tests/_kinds.py)
pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"


def _load_docs_hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _markdown_pages() -> dict[str, str]:
    """Page name -> Markdown text: README.md, docs/**/*.md, and the generated reference."""
    pages = {"README.md": README.read_text()}
    for path in sorted(DOCS.rglob("*.md")):
        pages[path.relative_to(ROOT).as_posix()] = path.read_text()
    for uri, make in _load_docs_hooks().GENERATED.items():
        pages[f"docs/{uri} (generated)"] = make()
    return pages


PAGES = _markdown_pages()

_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_LITERAL = re.compile(r"::\n\n((?:[ \t]+\S.*\n|[ \t]*\n)+)")
# `triogroups launch: error: ...` quotes what a command printed: not a command
_INLINE_COMMAND = re.compile(r"`(triogroups (?![\w-]+:)[^`]*|python3? dev\.py [^`]*)`")

# Literal blocks that describe a format rather than show code to run: (module, first line's start).
_FORMAT_DESCRIPTIONS = {("triogroups.wire", 'b"TG" | version:u8')}


_SHELL = ("sh", "bash", "shell", "console")
_CHECKED = ("python", "toml", *_SHELL)
_NOT_CODE = ("", "text")  # format descriptions, sample output


def _blocks(*languages: str) -> list[Any]:
    """``pytest.param(text, id="<page>:<line>")`` for each block in one of ``languages``."""
    found = []
    for page, text in PAGES.items():
        for match in _FENCE.finditer(text):
            if match.group(1) in languages:
                line = text.count("\n", 0, match.start()) + 1
                marks = [pytest.mark.spark] if _SPARK_BLOCK.search(match.group(2)) else []
                found.append(pytest.param(match.group(2), id=f"{page}:{line}", marks=marks))
    return found


# A block that starts Spark (a JVM and a Spark session) is a `spark` test, left out of
# `dev.py test --fast` as the other Spark tests are.
_SPARK_BLOCK = re.compile(r"^\s*(?:from|import) (?:pyspark|triogroups\.supervisor\.spark)\b", re.M)


def _defines_tests(source: str) -> bool:
    tree = ast.parse(source)
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
        for node in tree.body
    )


def _defines_async(source: str) -> bool:
    return any(isinstance(node, ast.AsyncFunctionDef) for node in ast.parse(source).body)


# A block runs a whole program: a Spark block starts a JVM and a local Spark session, which
# took 125-131 s on 2 cores at load 15. The limit only stops a hung block; it is no speed check.
_BLOCK_TIMEOUT = 600


# A Spark block's JVM runs with the settings of the suite's own Spark sessions (a serial GC,
# compilation stopped at C1; tests/spark/conftest.py), given it through JAVA_TOOL_OPTIONS
# as tests/spark/test_spark_cluster.py does, so the block itself runs as written: it took
# 21.7 s of CPU so, 30.6 s with the JVM's defaults.
_SPARK_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def _run(
    args: list[str], cwd: Path, timeout: float = _BLOCK_TIMEOUT, env: dict[str, str] | None = None
) -> None:
    result = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


@pytest.mark.parametrize("source", _blocks("python"))
def test_doc_python_block_runs_as_written(source: str, tmp_path: Path) -> None:
    """The block alone, in an empty directory, with nothing imported for it."""
    env = None
    if _SPARK_BLOCK.search(source):
        given = os.environ.get("JAVA_TOOL_OPTIONS", "")
        env = {**os.environ, "JAVA_TOOL_OPTIONS": f"{_SPARK_JVM} {given}".strip()}
    if _defines_tests(source):
        (tmp_path / "test_block.py").write_text(source)
        pytest_args = ["-q", "-p", "no:cacheprovider", "-o", "trio_mode=true", "test_block.py"]
        _run([sys.executable, "-m", "pytest", *pytest_args], tmp_path, env=env)
    else:
        assert "trio.run(" in source or not _defines_async(source), "an async example must run"
        (tmp_path / "block.py").write_text(source)
        _run([sys.executable, "block.py"], tmp_path, env=env)


def test_doc_blocks_that_start_spark_are_spark_tests() -> None:
    """The Spark how-to's block starts a JVM (265 s of a `dev.py test --fast` run at load
    17): it is marked ``spark``, as the other Spark tests, and the blocks that do not import
    Spark are not."""
    marked = {p.id for p in _blocks("python") if any(m.name == "spark" for m in p.marks)}
    assert any(page.startswith("docs/how-to/spark.md:") for page in marked), marked
    assert "docs/tutorial/launch.md:14" not in marked


@pytest.mark.parametrize("page", PAGES)
def test_doc_blocks_are_in_a_checked_language(page: str) -> None:
    """A block in another language would go unchecked: name it python, toml or sh."""
    languages = {match.group(1) for match in _FENCE.finditer(PAGES[page])}
    assert languages <= {*_CHECKED, *_NOT_CODE}, languages - {*_CHECKED, *_NOT_CODE}


def test_docs_pages_are_found_under_docs_and_generated() -> None:
    """The block tests above see the hand-written pages under docs/ and the generated
    reference, not only the README."""
    assert any(page.startswith("docs/") and "(generated)" not in page for page in PAGES)
    assert "docs/reference/presets.md (generated)" in PAGES
    assert any(p.id.startswith("docs/reference/presets.md") for p in _blocks("toml"))


def _check_stack_toml(text: str) -> None:
    """Every layer's properties validated; a stack with its transport built as a whole."""
    data = tomllib.loads(text)
    if "protocol" not in data:
        return
    config = StackConfig.from_toml(text)
    for layer in config.layers:
        layer.build()
    if issubclass(protocol_class(config.layers[0].name), Transport):
        config.validate()


@pytest.mark.parametrize("text", _blocks("toml"))
def test_doc_toml_block_is_a_valid_stack(text: str) -> None:
    _check_stack_toml(text)


def _check_command(line: str) -> None:
    """A command parses with its own parser (``--help`` for the examples' scripts)."""
    argv = shlex.split(line, comments=True)
    if not argv:
        return
    if argv[0] == "triogroups":
        args = argv[1:]
    elif argv[:2] in (["python3", "dev.py"], ["python", "dev.py"]):
        if argv[2:3] == ["test"]:
            return  # the rest goes to pytest
        args = argv[2:]
    elif argv[0] in ("python", "python3") and argv[1:2] and argv[1].startswith("examples/"):
        _run([sys.executable, *argv[1:], "--help"], ROOT)
        return
    else:
        return
    assert_cli_parses(args, line)


def assert_cli_parses(args: list[str], line: str) -> None:
    """``triogroups ARGS`` (from ``line``) parses with the CLI's own parser; a lone subcommand
    named in the prose must exist (it is asked for its ``--help``)."""
    if len(args) == 1 and not args[0].startswith("-"):
        args = [*args, "--help"]
    try:
        _parser().parse_args(args)
    except SystemExit as exc:
        assert exc.code == 0, f"`{line}` does not parse"


def _check_one_group(lines: list[str]) -> None:
    """Commands in one block that start the same example are members of one group: they
    must agree on the options that decide whether they can meet (``--stack``, ``--cluster``)."""
    seen: dict[str, dict[str, str]] = {}
    for line in lines:
        argv = shlex.split(line, comments=True)
        if len(argv) < 2 or not argv[1].startswith("examples/"):
            continue
        options = {
            key: argv[i + 1] for i, key in enumerate(argv[:-1]) if key in ("--stack", "--cluster")
        }
        first = seen.setdefault(argv[1], options)
        assert options == first, f"members of one group with different options: {lines}"


def _doc_commands() -> list[Any]:
    lines = [
        line
        for block in _blocks(*_SHELL)
        for line in re.sub(r"\\\n\s*", " ", block.values[0]).splitlines()  # `\` continues
    ]
    for text in PAGES.values():
        lines += _INLINE_COMMAND.findall(text)
    return [pytest.param(line, id=line) for line in dict.fromkeys(lines) if line.strip()]


@pytest.mark.parametrize("line", _doc_commands())
def test_doc_command_parses(line: str) -> None:
    _check_command(line)


def test_doc_command_check_can_fail() -> None:
    with pytest.raises(AssertionError, match="does not parse"):
        _check_command("triogroups demo --members three")


# What the ``spark`` extra installs: a module that needs one of them (the Spark driver's
# modules) is skipped, saying so, where the extra is not installed.
_SPARK_EXTRA = ("pyspark", "pandas", "pyarrow", "py4j")


def _module_names() -> list[str]:
    """Every module of the package, then every example as ``examples_<stem>``: names only, so
    collection imports none of them (and needs no optional extra)."""
    names = [info.name for info in pkgutil.walk_packages(triogroups.__path__, "triogroups.")]
    return ["triogroups", *names, *(f"examples_{p.stem}" for p in sorted(EXAMPLES.glob("*.py")))]


def _module(name: str) -> ModuleType:
    """The module ``name`` imported (an example loaded from its file); the test is skipped
    if the module needs the spark extra and it is not installed."""
    try:
        if not name.startswith("examples_"):
            return importlib.import_module(name)
        if name in sys.modules:
            return sys.modules[name]
        path = EXAMPLES / f"{name.removeprefix('examples_')}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in _SPARK_EXTRA:
            raise
        pytest.skip(f"{name} needs {exc.name}, which the spark extra installs")


MODULES = _module_names()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_pass_as_doctests(name: str) -> None:
    module = _module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, module.__name__):
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} doctest failure(s) in {module.__name__}"


def _docstrings(module: ModuleType) -> list[str]:
    path = Path(module.__file__ or "")
    if path.suffix != ".py":  # a compiled module: its Python reference lies beside it
        path = path.parent / f"{module.__name__.rpartition('.')[2]}.py"
    source = path.read_text()
    docs = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if doc:
                docs.append(doc)
    return docs


@pytest.mark.parametrize("name", MODULES)
def test_docstring_literal_blocks_are_checked(name: str) -> None:
    """A ``::`` block is a TOML stack, commands that parse, or a known format description;
    Python examples belong in doctests (``>>>``), which run."""
    module = _module(name)
    for doc in _docstrings(module):
        for match in _LITERAL.finditer(doc + "\n"):
            lines = [line.strip() for line in match.group(1).splitlines() if line.strip()]
            if lines[0] == "[[protocol]]":
                _check_stack_toml("\n".join(lines))
            elif all(line.split()[0] in ("python", "python3", "triogroups") for line in lines):
                for line in lines:
                    _check_command(line)
                _check_one_group(lines)
            else:
                assert any(
                    module.__name__ == name and lines[0].startswith(start)
                    for name, start in _FORMAT_DESCRIPTIONS
                ), f"{module.__name__}: a literal block not tested; make it a doctest:\n{lines}"


def _block_containing(language: str, needle: str) -> str:
    found = [p.values[0] for p in _blocks(language) if needle in p.values[0]]
    assert found, f"no ```{language} block in the docs contains {needle!r}"
    return str(found[0])


def test_readme_quick_start_activation_makes_its_commands_work_as_typed() -> None:
    """After the Quick start, a new shell runs the README's line that activates the venv,
    then types ``triogroups ...`` and ``python examples/...`` as the README shows them
    (first contact: without that line, "command not found" and ModuleNotFoundError)."""
    if not (ROOT / ".venv" / "bin" / "activate").exists():
        pytest.skip("no .venv beside the checkout: `python3 dev.py test` makes it")
    block = _block_containing("sh", "activate")
    activate = next(line for line in block.splitlines() if "activate" in line)
    activate = activate.split("#")[0].strip()
    fresh_path = ":".join(
        p for p in os.environ["PATH"].split(":") if not p.startswith(str(ROOT / ".venv"))
    )
    env = {**os.environ, "PATH": fresh_path}
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    script = f"{activate} && triogroups --version && python examples/chat.py --help"
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=_BLOCK_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("triogroups "), result.stdout


def test_readme_first_channel_example_shows_both_messages_it_sends(tmp_path: Path) -> None:
    """The Channels section's first example multicasts a dict and unicasts bytes to itself;
    the two travel apart, so it must wait for both whatever their order, and print each
    (it used to stop at the unicast, which usually came first)."""
    source = _block_containing("python", 'ch.send(b"just you", to=ch.address)')
    (tmp_path / "block.py").write_text(source)
    result = subprocess.run(
        [sys.executable, "block.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=_BLOCK_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "{'hello': 'group'} multicast" in result.stdout, result.stdout
    assert "b'just you' unicast" in result.stdout, result.stdout
