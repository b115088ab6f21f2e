"""`build_report` for the application: one member's probe answer from its `Stack` or `Channel`.

The report itself is built beside the stack host (`triogroups._diagnostics`),
which never knows about a channel; this is the one place that unwraps one.
"""

from __future__ import annotations

from typing import Any

from triogroups._channel import Channel
from triogroups._diagnostics import build_report as _stack_report
from triogroups.stack import Stack

__all__ = ["build_report"]


def build_report(stack: Stack | Channel) -> dict[str, Any]:
    """One member's diagnostics answer, as a plain (msgpack/JSON-able) dict.

    ``stack`` is a running `Stack` or a `Channel` (its stack is used); the keys are
    those of `triogroups._diagnostics.build_report`. Raises RuntimeError when the
    stack is not running yet; call it in the stack's trio run.
    """
    return _stack_report(stack.stack if isinstance(stack, Channel) else stack)
