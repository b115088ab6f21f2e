"""The docs site builds in strict mode, its generated reference says what the code says, and
it works in a browser.

- ``mkdocs build --strict`` succeeds (a broken link, anchor, nav entry or cross-reference
  fails it); the build runs once per test session, shared by the pytest workers.
- The generated reference pages (docs/hooks.py) cover every subcommand and option, every
  protocol's properties exactly as ``triogroups protocol X`` prints them, every preset,
  every public exception; the API pages document every public name once.
- Headless Chromium opens every built page (no console error, no failed request, nothing
  loaded from outside), follows nav links and finds a word with the site's search. Without
  a browser it is skipped, saying how to install one (dev.py says so too).

The code blocks of the pages run in tests/test_docs.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import html
import http.server
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from rich.console import Console

from dev import BROWSER_HINT, chromium
from triogroups._public import PUBLIC_NAMESPACES
from triogroups.cli import _parser, _protocol
from triogroups.config import preset_names
from triogroups.protocol import protocol_names

# the docs site and its generated reference: out of `dev.py test --fast` (tests/_kinds.py)
pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# Debian's Chromium as a root-run, offline test browser: no sandbox (root), no GPU, none of
# Chrome's own traffic (updates, sync, field trials).
BROWSER_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BROWSER_STEP_TIMEOUT_MS = 180_000
BUILD_TIMEOUT = 300  # seconds; a build takes about 7 s of CPU


def _module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _module("docs_hooks", DOCS / "hooks.py")
PUBLIC_MODULES = [importlib.import_module(ns.module) for ns in PUBLIC_NAMESPACES]
griffe_docstrings = _module("docs_griffe_docstrings", DOCS / "griffe_docstrings.py")


# -- the build -----------------------------------------------------------------------------


def _build(out: Path, config: Path = ROOT / "mkdocs.yml") -> dict[str, Any]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # material's banner about its successor
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    return {"returncode": result.returncode, "output": result.stdout + result.stderr}


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The site built once per session: the first pytest worker to get here builds it under
    a lock, the others wait and take its result (a build takes seconds of CPU)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    site, record = shared / "docs-site", shared / "docs-site.json"
    with open(shared / "docs-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            record.write_text(json.dumps(_build(site)))
    return site, json.loads(record.read_text())


@pytest.fixture(scope="session")
def site(build: tuple[Path, dict[str, Any]]) -> Path:
    path, result = build
    assert result["returncode"] == 0, f"the docs site does not build:\n{result['output']}"
    return path


def test_docs_site_builds_in_strict_mode(build: tuple[Path, dict[str, Any]]) -> None:
    path, result = build
    assert result["returncode"] == 0, result["output"]
    for page in ("index.html", "reference/cli/index.html", "reference/protocols/index.html"):
        assert (path / page).is_file(), page


def test_docs_site_config_fails_on_every_broken_link_and_nav_entry() -> None:
    """Strict mode turns warnings into errors; the validation settings make every broken
    link, anchor and nav entry a warning (some are only logged by default)."""
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"))
    assert config.strict is True
    for group in ("nav", "links"):
        levels = config.validation[group]
        assert all(level >= 30 for level in levels.values()), (group, levels)  # WARNING


def test_docs_site_strict_build_fails_on_a_broken_anchor_or_cross_reference(
    tmp_path: Path,
) -> None:
    """mkdocs.yml's settings on a site of one page with a link to a missing anchor and a
    reference to an API name that does not exist: the build fails and names both."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n## Here\n")
    (docs / "page.md").write_text(
        "# Page\n\nSee [home](index.md#not-here) and [`Nope`][triogroups.Nope].\n"
    )
    config["docs_dir"] = str(docs)
    config["nav"] = ["index.md", "page.md", *hooks.GENERATED]
    config["hooks"] = [str(DOCS / "hooks.py")]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    result = _build(tmp_path / "site", tmp_path / "mkdocs.yml")
    assert result["returncode"] != 0
    warnings = [line for line in result["output"].splitlines() if line.startswith("WARNING")]
    for fault in (
        "'index.md' does not contain an anchor '#not-here'",
        "Could not find cross-reference target 'triogroups.Nope'",
    ):
        assert any(fault in line for line in warnings), (fault, result["output"])


# -- the generated reference ---------------------------------------------------------------


def test_cli_reference_shows_every_subcommand_and_option() -> None:
    page = hooks.cli_page()
    for name, _, parser in hooks._subcommands(_parser()):
        assert f"## triogroups {name} {{#triogroups-{name}-command}}" in page, name
        assert parser.format_usage().split()[1] in page  # "usage: triogroups demo ..."
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in page or f", {option}" in page, (name, option)


def _cells(line: str, sep: str) -> list[str]:
    return [cell.strip() for cell in re.split(rf"(?<!\\){re.escape(sep)}", line)[1:-1]]


def _unmarkdown(cell: str) -> str:
    if cell.startswith("`") and cell.endswith("`"):
        return cell.strip("`").replace("\\|", "|")
    return html.unescape(re.sub(r"\\(.)", r"\1", cell))


@pytest.mark.parametrize("name", protocol_names())
def test_protocol_reference_rows_equal_what_triogroups_protocol_prints(name: str) -> None:
    """The same rows, cell by cell, as the table of ``triogroups protocol NAME``."""
    out = io.StringIO()
    _protocol(Console(file=out, width=10_000), name)
    printed = [_cells(line, "│") for line in out.getvalue().splitlines() if line.startswith("│")]
    section = hooks.protocols_page().split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
    shown = [
        [_unmarkdown(cell) for cell in _cells(line, "|")]
        for line in section.splitlines()
        if line.startswith("| `")
    ]
    assert shown == printed


def test_preset_reference_shows_every_preset_file() -> None:
    page = hooks.presets_page()
    for name in preset_names():
        text = (ROOT / "triogroups" / "presets" / f"{name}.toml").read_text()
        assert f"## {name}\n" in page and text.rstrip() in page, name


def test_error_reference_lists_every_public_exception() -> None:
    page = hooks.errors_page()
    for module in PUBLIC_MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseException):
                assert f"[`{name}`][{module.__name__}.{name}]" in page, name


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_api_reference_documents_every_public_name_once(module: ModuleType) -> None:
    """Each public namespace (`PUBLIC_NAMESPACES`) has one reference page, whose first
    entry is the module itself; a name added to its ``__all__`` needs its place on that page
    (and one only)."""
    root = re.compile(rf"^::: {re.escape(module.__name__)}$", re.MULTILINE)
    pages = [p for p in sorted((DOCS / "reference").glob("*.md")) if root.search(p.read_text())]
    assert len(pages) == 1, (module.__name__, pages)
    text = pages[0].read_text()
    documented = re.findall(rf"^::: {re.escape(module.__name__)}\.(\w+)$", text, re.MULTILINE)
    assert sorted(documented) == sorted(module.__all__)


def test_every_reference_page_of_a_module_is_a_public_namespace() -> None:
    """The other way round: a page documenting a module that is not in `PUBLIC_NAMESPACES`
    means the list is missing it (its ``__all__`` and errors would go unchecked)."""
    module_entry = re.compile(
        r"^::: ([\w.]+)\n    options:\n      members: false\n      show_root_heading: false$",
        re.MULTILINE,
    )
    roots = [
        module
        for page in sorted((DOCS / "reference").glob("*.md"))
        for module in module_entry.findall(page.read_text())
    ]
    assert sorted(roots) == sorted(ns.module for ns in PUBLIC_NAMESPACES)


def test_nav_folder_section_follows_its_index_then_file_names(tmp_path: Path) -> None:
    pages = {
        "tutorial/index.md": "# Start\n\n[first](first.md), [then](then.md#part), [x](../x.md)\n",
        "tutorial/then.md": "# Then\n",
        "tutorial/first.md": "# First\n",
        "tutorial/b-unlinked.md": "# B\n",
        "tutorial/a-unlinked.md": "# A\n",
        "tutorial/more-steps/c.md": "# C\n",
    }
    for page, text in pages.items():
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text(text)
    nav = [{"Home": "index.md"}, {"Tutorial": "tutorial/"}, {"Design": "design/"}]
    assert hooks.expand_nav(nav, tmp_path) == [
        {"Home": "index.md"},
        {
            "Tutorial": [
                "tutorial/index.md",
                "tutorial/first.md",
                "tutorial/then.md",
                "tutorial/a-unlinked.md",
                "tutorial/b-unlinked.md",
                {"More steps": ["tutorial/more-steps/c.md"]},
            ]
        },
    ]


def test_griffe_extension_fences_docstring_doctests_and_literal_blocks() -> None:
    doc = (
        "Intro.\n\n"
        "- a list item with a stack::\n\n"
        '      [[protocol]]\n      name = "SIM"\n\n'
        "Commands::\n\n    triogroups stacks\n\n"
        ">>> 1 + 1\n2\n\nAfter.\n"
    )
    assert griffe_docstrings.markdown_blocks(doc) == (
        "Intro.\n\n"
        "- a list item with a stack:\n\n"
        '  ```toml\n  [[protocol]]\n  name = "SIM"\n  ```\n\n'
        "Commands:\n\n```text\ntriogroups stacks\n```\n\n"
        "```pycon\n>>> 1 + 1\n2\n```\n\nAfter.\n"
    )


# -- in a browser --------------------------------------------------------------------------


@contextlib.contextmanager
def _serve(root: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (material's search needs http, not file)."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            if not isinstance(sys.exc_info()[1], ConnectionError):  # a transfer cut short
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _watch(page: Any, problems: list[str]) -> None:
    """Record in ``problems`` what a page's visitor would call broken: a console error, an
    uncaught exception, an HTTP error, a failed request, any request that leaves 127.0.0.1.
    A request the browser itself cut short for the next navigation (ERR_ABORTED) is not
    one: a missing file is an HTTP 404, a dead server a refused connection; nor is one the
    test blocked on purpose (ERR_BLOCKED_BY_CLIENT)."""

    def console(message: Any) -> None:
        if message.type == "error":
            problems.append(f"console error: {message.text}")

    def failed(request: Any) -> None:
        if not any(e in (request.failure or "") for e in ("ERR_ABORTED", "ERR_BLOCKED_BY_CLIENT")):
            problems.append(f"failed: {request.url} {request.failure}")

    def response(response: Any) -> None:
        if response.status >= 400:
            problems.append(f"HTTP {response.status}: {response.url}")

    def request(request: Any) -> None:
        if not request.url.startswith(("http://127.0.0.1:", "data:", "blob:")):
            problems.append(f"outside: {request.url}")

    page.on("console", console)
    page.on("pageerror", lambda error: problems.append(f"exception: {error}"))
    page.on("requestfailed", failed)
    page.on("response", response)
    page.on("request", request)


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium under Playwright, or a skip that says how to install one."""
    sync_api = pytest.importorskip("playwright.sync_api", reason=f"no playwright: {BROWSER_HINT}")
    with sync_api.sync_playwright() as playwright:
        executable = chromium()
        if executable is None and not Path(playwright.chromium.executable_path).exists():
            pytest.skip(BROWSER_HINT)
        browser = playwright.chromium.launch(executable_path=executable, args=BROWSER_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def _open(browser: Any, root: Path) -> Iterator[tuple[Any, str, list[str]]]:
    """(a page, the base URL of ``root`` served on 127.0.0.1, the problems `_watch` saw)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    # Playwright's 30 s per step is for a quiet machine: only a hang should fail these
    page.set_default_timeout(BROWSER_STEP_TIMEOUT_MS)
    page.set_default_navigation_timeout(BROWSER_STEP_TIMEOUT_MS)
    problems: list[str] = []
    _watch(page, problems)
    with _serve(root) as base:
        yield page, base, problems


@pytest.fixture
def browser_page(site: Path, browser: Any) -> Iterator[tuple[Any, str, list[str]]]:
    with _open(browser, site) as opened:
        yield opened


def test_browser_check_sees_console_errors_missing_files_and_outside_requests(
    browser: Any, tmp_path: Path
) -> None:
    """The page checks below can fail: a broken page shows each kind of problem."""
    (tmp_path / "index.html").write_text(
        "<h1>broken</h1><img src='missing.png'>"
        "<script>console.error('boom'); fetch('http://192.0.2.1/x').catch(() => {});</script>"
    )
    with _open(browser, tmp_path) as (page, base, problems):
        page.goto(base, wait_until="load")
    assert "console error: boom" in problems
    assert any(p.startswith("HTTP 404:") and "missing.png" in p for p in problems), problems
    assert any(p.startswith("outside: http://192.0.2.1/") for p in problems), problems


def _pages(site: Path) -> list[str]:
    return sorted(
        p.parent.relative_to(site).as_posix() + "/"
        for p in site.rglob("index.html")
        if p.relative_to(site).parts[0] not in ("assets", "search")
    )


def _title(page: Any) -> str:
    """The page's h1, without the permalink sign the toc extension appends."""
    return str(page.locator("h1").first.inner_text()).removesuffix("¶").strip()


def test_docs_site_every_page_loads_in_chromium_without_errors(
    site: Path, browser_page: tuple[Any, str, list[str]]
) -> None:
    page, base, problems = browser_page
    # Each page would start the search worker, which indexes the whole site again: 40% of
    # this test's time. The search test runs it; here it is blocked.
    page.route("**/assets/javascripts/workers/*", lambda route: route.abort("blockedbyclient"))
    paths = _pages(site)
    assert "./" in paths and "reference/cli/" in paths
    for path in paths:
        page.goto(base + path.removeprefix("./"), wait_until="load")
        assert _title(page), f"{path}: no title"
    assert problems == []


def test_docs_site_nav_links_navigate_in_chromium(browser_page: tuple[Any, str, list[str]]) -> None:
    page, base, problems = browser_page
    page.goto(base, wait_until="load")
    page.locator("a.md-tabs__link", has_text="Reference").click()
    page.wait_for_url("**/reference/api/")
    assert _title(page) == "Application API"
    page.locator(".md-sidebar--primary a.md-nav__link", has_text="Command line").click()
    page.wait_for_url("**/reference/cli/")
    assert _title(page) == "Command line"
    assert problems == []


def test_docs_site_search_finds_a_protocol_in_chromium(
    browser_page: tuple[Any, str, list[str]],
) -> None:
    page, base, problems = browser_page
    page.goto(base, wait_until="load")
    page.locator("input.md-search__input").click()
    page.keyboard.type("VERIFY_SUSPECT")
    results = page.locator("a.md-search-result__link")
    results.first.wait_for()
    hrefs = [results.nth(i).get_attribute("href") or "" for i in range(results.count())]
    assert any("reference/protocols/" in href for href in hrefs), hrefs
    assert problems == []
