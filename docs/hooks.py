"""Build hooks of the docs site (``hooks:`` in mkdocs.yml): nav sections filled from their
folders, and the reference pages generated from the code.

The generated pages are made at every build and never written into ``docs/``, so they
cannot go stale:

- ``reference/cli.md`` from the argparse parsers of `triogroups.cli` (what ``--help`` says);
- ``reference/protocols.md`` from each protocol's ``declared_properties()``, through
  `triogroups.properties.property_rows`, the rows ``triogroups protocol X`` prints;
- ``reference/presets.md`` from the TOML files in ``triogroups/presets``;
- ``reference/errors.md`` from the exception classes the public modules export.

Each page is a function returning Markdown (``GENERATED``), so tests can call them too.
This module only reads the code; it never changes what the package does.
"""

from __future__ import annotations

import argparse
import html
import importlib
import inspect
import logging
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from triogroups._public import PUBLIC_NAMESPACES
from triogroups.cli import _parser
from triogroups.config import StackConfig, preset_names
from triogroups.properties import property_rows
from triogroups.protocol import protocol_class, protocol_names

log = logging.getLogger("mkdocs.hooks.triogroups")

HELP_WIDTH = 80
"""Columns of the usage lines on the CLI page: argparse wraps at the terminal's width, and
material's text column holds about 84 characters of code."""

_PUBLIC_MODULES = tuple(importlib.import_module(ns.module) for ns in PUBLIC_NAMESPACES)
"""The modules users import from (`triogroups._public.PUBLIC_NAMESPACES`), each with its page
in the API reference."""


def _escape(text: str) -> str:
    """``text`` shown as written inside Markdown prose or a table cell."""
    text = html.escape(text, quote=False)
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", text)


def _code(text: str) -> str:
    """``text`` as an inline code span, safe in a table cell."""
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if fence == "`" else f"{fence} {text} {fence}"


def _prose_or_text(text: str) -> str:
    """A help text's paragraphs: prose as prose, and a paragraph laid out by hand (indented
    lines: examples, option lists) as a text block, kept as the terminal shows it."""
    out = []
    for paragraph in re.split(r"\n\s*\n", text.strip("\n")):
        lines = paragraph.splitlines()
        if any(line.startswith((" ", "\t")) for line in lines):
            out.append("```text\n" + "\n".join(lines) + "\n```")
        else:
            out.append(_escape(" ".join(line.strip() for line in lines)))
    return "\n\n".join(out)


def _first_paragraph(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n")[0].split())


# -- the command line ----------------------------------------------------------------------


@contextmanager
def _help_width() -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_WIDTH + 2)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def _options_table(parser: argparse.ArgumentParser) -> str:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        invocation = formatter._format_action_invocation(action)
        help_text = formatter._expand_help(action) if action.help else ""
        rows.append(f"| {_code(invocation)} | {_escape(' '.join(help_text.split()))} |")
    if not rows:
        return ""
    return "| option | what it does |\n| --- | --- |\n" + "\n".join(rows)


def _command_section(name: str, summary: str, parser: argparse.ArgumentParser) -> str:
    # an explicit anchor: a heading's anchor is also a cross-reference name, and the bare
    # `triogroups` is the package's (tests/test_docs_site.py: one owner per name)
    parts = [f"## {name} {{#{_anchor(name)}-command}}"]
    if summary:
        parts.append(_escape(summary[0].upper() + summary[1:]) + ".")
    parts.append("```text\n" + parser.format_usage().strip() + "\n```")
    if parser.description:
        parts.append(_prose_or_text(parser.description))
    table = _options_table(parser)
    if table:
        parts.append(table)
    if parser.epilog:
        parts.append(_prose_or_text(parser.epilog))
    return "\n\n".join(parts)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order ``--help`` lists them."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, helps.get(name, ""), sub))
    return found


def cli_page() -> str:
    """Every subcommand of ``triogroups``: its usage, description, options and examples."""
    with _help_width():
        parser = _parser()
        commands = _subcommands(parser)
        index = "\n".join(
            f"- [`triogroups {name}`](#triogroups-{name}-command): {_escape(summary)}"
            for name, summary, _ in commands
        )
        sections = [_command_section("triogroups", "", parser)]
        sections += [_command_section(f"triogroups {name}", s, p) for name, s, p in commands]
    return (
        "# Command line\n\n"
        "What `triogroups --help` and each command's help (`triogroups demo --help`, ...) "
        "print, made from the command's own parsers when the site is built.\n\n"
        f"{index}\n\n" + "\n\n".join(sections) + "\n"
    )


# -- protocols -----------------------------------------------------------------------------


def _public_path(cls: type) -> str | None:
    """``module.Name`` where a public module exports ``cls`` (its API reference entry)."""
    for module in _PUBLIC_MODULES:
        if getattr(module, cls.__name__, None) is cls and cls.__name__ in module.__all__:
            return f"{module.__name__}.{cls.__name__}"
    return None


def _class_reference(cls: type) -> str:
    """A link to the class's entry in the API reference, or its import path."""
    path = _public_path(cls)
    return f"[`{path}`][{path}]" if path else f"`{cls.__module__}.{cls.__qualname__}`"


def _anchor(name: str) -> str:
    """The anchor of a ``## NAME`` heading (mkdocs' toc slug)."""
    return re.sub(r"[^\w\- ]", "", name).strip().lower().replace(" ", "-")


def protocols_page() -> str:
    """Each protocol's properties, as ``triogroups protocol NAME`` prints them."""
    names = protocol_names()
    sections = []
    for name in names:
        cls = protocol_class(name)
        rows = property_rows(cls.declared_properties())
        parts = [f"## {name}", f"Class: {_class_reference(cls)}."]
        summary = _first_paragraph(cls)
        if summary:
            parts.append(_escape(summary))
        if rows:
            table = ["| property | default | rule | doc |", "| --- | --- | --- | --- |"]
            table += [
                f"| {_code(key)} | {_code(default)} | {_code(rule)} | {_escape(doc)} |"
                for key, default, rule, doc in rows
            ]
            parts.append("\n".join(table))
        else:
            parts.append("No properties.")
        sections.append("\n\n".join(parts))
    index = " · ".join(f"[{name}](#{_anchor(name)})" for name in names)
    return (
        "# Protocols\n\n"
        "Every protocol a stack may name, with its properties: the table that "
        "`triogroups protocol NAME` prints, made from each protocol's "
        "`declared_properties()` when the site is built. Defaults are written as a TOML "
        'stack writes them: durations with a unit (`"500ms"`), sizes in bytes. A rule '
        "`-` means any value of the property's type.\n\n"
        f"{index}\n\n" + "\n\n".join(sections) + "\n"
    )


# -- stack presets -------------------------------------------------------------------------


def presets_page() -> str:
    """Each preset shipped in ``triogroups/presets``: its layers and its TOML file."""
    sections = []
    for name in preset_names():
        layers = StackConfig.preset(name).names()
        chain = " → ".join(f"[{layer}](protocols.md#{_anchor(layer)})" for layer in layers)
        text = resources.files("triogroups.presets").joinpath(f"{name}.toml").read_text()
        sections.append(
            f"## {name}\n\nLayers, bottom first: {chain}.\n\n"
            f"`triogroups/presets/{name}.toml`:\n\n```toml\n{text.rstrip()}\n```"
        )
    return (
        "# Stack presets\n\n"
        "The stacks shipped with triogroups, by the name `StackConfig.preset(name)`, "
        "`open_channel(..., stack=name)` and `--stack name` take (`triogroups stacks` lists "
        "them). Each is a TOML stack file, bottom layer first; copy one to start a stack of "
        "your own.\n\n" + "\n\n".join(sections) + "\n"
    )


# -- errors --------------------------------------------------------------------------------


def _errors(module: Any) -> list[type[BaseException]]:
    found = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            found.append(obj)
    return found


def _base_names(cls: type) -> str:
    names = []
    for base in cls.__bases__:
        path = _public_path(base)
        names.append(f"[`{base.__name__}`][{path}]" if path else f"`{base.__name__}`")
    return ", ".join(names)


def errors_page() -> str:
    """The exception classes of the public modules: what each is and what it derives from."""
    sections = []
    for module, namespace in zip(_PUBLIC_MODULES, PUBLIC_NAMESPACES, strict=True):
        title = f"{namespace.audience} errors"
        rows = ["| error | is a | meaning |", "| --- | --- | --- |"]
        for cls in _errors(module):
            path = f"{module.__name__}.{cls.__name__}"
            rows.append(
                f"| [`{cls.__name__}`][{path}] | {_base_names(cls)} | "
                f"{_escape(_first_paragraph(cls))} |"
            )
        sections.append(f"## {title}\n\nExported by `{module.__name__}`.\n\n" + "\n".join(rows))
    return (
        "# Errors\n\n"
        "Every exception type the public modules export, made from the code when the site is "
        "built. Bad values raise `ValueError` (a bad stack or property: `PropertyError`), bad "
        "types `TypeError`, misuse `RuntimeError`; protocol and membership failures have "
        "their own types. Every error of the package is a `TriogroupsError` and keeps the "
        "built-in base its meaning calls for (`RpcTimeout` is a `TimeoutError`); `SignalExit` "
        "and `Interrupted` end the process, so they are a `SystemExit` only, and the test "
        "kit's failed checks are `AssertionError`s. Each name links to its full entry in the "
        "API reference.\n\n" + "\n\n".join(sections) + "\n"
    )


GENERATED: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/protocols.md": protocols_page,
    "reference/presets.md": presets_page,
    "reference/errors.md": errors_page,
}


# -- nav sections from folders -------------------------------------------------------------


_PAGE_LINK = re.compile(r"\]\(([\w.-]+\.md)(?:#[^)]*)?\)")
"""A Markdown link to a page in the same folder: ``[text](page.md)`` or ``(page.md#part)``."""


def folder_pages(docs_dir: Path, folder: str) -> list[Any]:
    """The nav entries of a folder: ``index.md`` first, then the pages in the order the
    index links to them (it is the section's table of contents), then the others by file
    name; each subfolder is a section of its own, titled from its name."""
    root = docs_dir / folder
    if not root.is_dir():
        return []
    index = root / "index.md"
    linked = re.findall(_PAGE_LINK, index.read_text()) if index.exists() else []
    order = {name: i for i, name in enumerate(dict.fromkeys(["index.md", *linked]))}
    pages = sorted(root.glob("*.md"), key=lambda p: (order.get(p.name, len(order)), p.name))
    entries: list[Any] = [p.relative_to(docs_dir).as_posix() for p in pages]
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        inner = folder_pages(docs_dir, f"{folder.rstrip('/')}/{sub.name}/")
        if inner:
            entries.append({sub.name.replace("-", " ").capitalize(): inner})
    return entries


def expand_nav(nav: list[Any], docs_dir: Path) -> list[Any]:
    """``nav`` with each ``Title: folder/`` entry replaced by the pages of that folder; a
    section whose folder has no page yet is left out."""
    expanded: list[Any] = []
    for entry in nav:
        if isinstance(entry, dict):
            ((title, value),) = entry.items()
            if isinstance(value, str) and value.endswith("/"):
                pages = folder_pages(docs_dir, value)
                if pages:
                    expanded.append({title: pages})
                else:
                    log.info("nav section %r left out: %s has no pages", title, value)
                continue
            if isinstance(value, list):
                expanded.append({title: expand_nav(value, docs_dir)})
                continue
        expanded.append(entry)
    return expanded


# -- the hooks -----------------------------------------------------------------------------


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    if config.nav is not None:
        config.nav = expand_nav(config.nav, Path(config.docs_dir))
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for uri, make in GENERATED.items():
        if files.get_file_from_path(uri) is not None:
            raise PluginError(f"docs/{uri} is generated at build time (docs/hooks.py): remove it")
        files.append(File.generated(config, uri, content=make()))
    return files
