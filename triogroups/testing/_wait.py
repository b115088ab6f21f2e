"""`wait_until`: the test kit's one way to wait for a condition, and to say which one failed.

A test that polls with ``while not cond(): await trio.sleep(...)`` under a ``fail_after`` says
only ``TooSlowError`` when the condition never comes; `wait_until` polls the same way and, on
its deadline, raises an `AssertionError` that names the condition (the lambda's source or the
function's name) and, through ``message``, the state it was waiting on. Polling never changes
what is polled: the predicate is called, never awaited, and must not block.
"""

from __future__ import annotations

import ast
import functools
import linecache
import types
from collections.abc import Callable

import trio

__all__ = ["wait_until"]


async def wait_until(
    predicate: Callable[[], object],
    *,
    timeout: float = 60.0,
    interval: float = 0.05,
    message: str | Callable[[], object] | None = None,
) -> None:
    """Return once ``predicate()`` is true, calling it now and then every ``interval`` seconds
    of Trio's clock (virtual time under ``MockClock``; ``interval=0`` checks at every
    scheduling round).

    If it is still false ``timeout`` seconds from now, it is called once more, and if still
    false this raises `AssertionError` naming the predicate (its source, for a lambda) and
    ``message`` (a string, or a callable called then, to show the state that was waited on).
    Real-time tests should give a generous ``timeout``: it bounds a wait on a loaded machine,
    it does not measure speed.
    """
    if timeout < 0 or interval < 0:
        raise ValueError(f"wait_until needs timeout and interval >= 0, got {timeout}, {interval}")
    with trio.move_on_after(timeout):
        while not predicate():
            await trio.sleep(interval)
        return
    if predicate():
        return
    detail = message() if callable(message) else message
    text = f"still false after {timeout:g} s: {describe(predicate)}"
    raise AssertionError(text if detail is None else f"{text}; {detail}")


def describe(predicate: Callable[[], object]) -> str:
    """What ``predicate`` checks, for a message: a lambda's own source (``lambda: ...``), else
    the callable's qualified name."""
    name = getattr(predicate, "__qualname__", None) or repr(predicate)
    code = getattr(predicate, "__code__", None)
    if code is None or code.co_name != "<lambda>":
        return f"{name}()"
    try:
        return _lambda_source(code) or name
    except (OSError, SyntaxError, ValueError):
        return name


def _lambda_source(code: types.CodeType) -> str | None:
    """The source text of the lambda compiled to ``code``, from its file's syntax tree."""
    tree = _syntax_tree(code.co_filename)
    if tree is None:
        return None
    source = "".join(linecache.getlines(code.co_filename))
    lambdas = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno
    ]
    # several lambdas on one line: the one whose body starts where this code's does
    starts = {(line, col) for line, _, col, _ in code.co_positions() if line is not None}
    chosen = [n for n in lambdas if (n.body.lineno, n.body.col_offset) in starts] or lambdas
    if not chosen:
        return None
    return ast.get_source_segment(source, chosen[0])


@functools.lru_cache(maxsize=64)
def _syntax_tree(filename: str) -> ast.Module | None:
    source = "".join(linecache.getlines(filename))
    return ast.parse(source) if source else None
