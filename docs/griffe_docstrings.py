"""A griffe extension for the docs site: turns the code blocks of triogroups' docstrings into
fenced Markdown blocks, so the API reference shows them as code.

The docstrings are prose with two kinds of block (tests/test_docs.py runs or checks both):
doctests (``>>>`` lines and their output), which Markdown would read as nested quotes, and
reStructuredText literal blocks (a paragraph ending in ``::``, then indented lines), whose
``::`` Markdown would print. Only the docstrings as the site shows them change; the code is
left alone.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

_LITERAL_START = re.compile(r"^(\s*)(.*?)\s*::\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def markdown_blocks(doc: str) -> str:
    """``doc`` with its doctests fenced as ``pycon`` and its ``::`` literal blocks fenced as
    ``toml`` (a stack) or ``text``, a block in a list item indented as the item's text
    (tests/test_docs_site.py shows each case)."""
    lines = doc.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(">>>"):
            pad = line[: _indent(line)]
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(pad) :])
                i += 1
            out += [f"{pad}```pycon", *(pad + b for b in block), f"{pad}```"]
            continue
        literal = _LITERAL_START.match(line)
        if literal and i + 1 < len(lines) and not lines[i + 1].strip():
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            pad = _indent(line)
            body = []
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > pad):
                body.append(lines[j])
                j += 1
            if body:
                while body and not body[-1].strip():
                    body.pop()
                text = textwrap.dedent("\n".join(body))
                language = "toml" if text.startswith("[[protocol]]") else "text"
                lead, prose = literal.group(1), literal.group(2)
                if prose:
                    out += [f"{lead}{prose}:", ""]
                item = _LIST_ITEM.match(line)
                if item:  # the block belongs to the list item: indent it as the item's text
                    lead = " " * item.end()
                out += [f"{lead}```{language}", *(lead + t for t in text.splitlines())]
                out += [f"{lead}```", ""]
                i = j
                continue
        out.append(line)
        i += 1
    return "\n".join(out) + ("\n" if doc.endswith("\n") else "")


class DocstringBlocks(griffe.Extension):
    """Fences every docstring's code blocks once the package is loaded."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_blocks(obj.docstring.value)
