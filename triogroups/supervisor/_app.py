"""Where a member's application comes from: ``module:function``, ``path.py:function`` or a
function object, and how it travels to the member process.

Everything a member needs (the application, its arguments, the stack) is packed into one
cloudpickle payload that the member reads at start-up. A function object travels by value when
it lives in ``__main__`` (a script, a notebook) and by reference otherwise; a spec string travels
as is and the member imports it itself. `load_app` is also what the supervisor calls before it
starts anything, so bad input fails once, in the supervisor, with one line naming the problem.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle

from triogroups._error_root import TriogroupsError
from triogroups.config import StackConfig
from triogroups.properties import PropertyError

__all__ = ["AppError", "Payload", "load_app", "resolve_stack", "stack_label"]

App = Callable[..., Any]


class AppError(TriogroupsError, ValueError):
    """The application or the stack cannot be used; the message is one line naming why."""


def _load_file(path: Path, spec: str) -> Any:
    if not path.is_file():
        raise AppError(f"app file {str(path)!r} does not exist ({spec})")
    module_spec = importlib.util.spec_from_file_location(f"_triogroups_app_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise AppError(f"app file {str(path)!r} is not a python file ({spec})")
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(path.resolve().parent))  # as when the file is run as a script
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    return module


def load_app(spec: str) -> App:
    """The function named by ``module:function`` or ``path/to/file.py:function``."""
    where, sep, function = spec.rpartition(":")
    if not sep or not where or not function:
        raise AppError(f"app must be module:function or file.py:function, got {spec!r}")
    if where.endswith(".py") or "/" in where:
        module = _load_file(Path(where), spec)
    else:
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as exc:
            raise AppError(f"cannot import app module {where!r} ({spec}): {exc}") from None
    app = getattr(module, function, None)
    if app is None:
        raise AppError(f"app module {where!r} has no function {function!r}")
    if not callable(app):
        raise AppError(f"app {spec!r} is not callable, got {type(app).__name__}")
    return app  # type: ignore[no-any-return]


def stack_label(stack: StackConfig | str | Path) -> str:
    """How errors name a stack: ``stack file 'x.toml'``, ``stack preset 'udp'`` or ``stack``."""
    if isinstance(stack, StackConfig):
        return "stack"
    if isinstance(stack, Path) or stack.endswith(".toml"):
        return f"stack file {str(stack)!r}"
    return f"stack preset {stack!r}"


def resolve_stack(stack: StackConfig | str | Path, *, bare: bool = False) -> StackConfig:
    """The stack as the member will build it, refused here when unknown, when a layer would
    refuse it (an unknown protocol or property, a bad value, a broken rule such as
    ``FD_ALL3.interval must be < timeout``: the member would fail the same way at every
    start) or (unless ``bare``: the application gets the stack itself, not a channel) without
    GMS."""
    if isinstance(stack, str | Path) and str(stack).endswith(".toml") and not Path(stack).is_file():
        raise AppError(f"stack file {str(stack)!r} does not exist")
    try:
        config = StackConfig.resolve(stack)
    except PropertyError as exc:
        raise AppError(str(exc)) from None
    try:
        config.validate()
    except PropertyError as exc:
        raise AppError(f"{stack_label(stack)}: {exc}") from None
    if not bare and "GMS" not in config.names():
        raise AppError(f"stack must contain GMS to form a group, got {', '.join(config.names())}")
    return config


@dataclass(frozen=True)
class Payload:
    """What one member process runs: ``app(channel, *args)`` on ``stack``, with ``state``
    (an object with ``get_state``/``set_state``, or None) given to `open_channel`; with
    ``bare``, ``app(stack, *args)`` on the started `Stack`, without a channel. One pickle
    for all of it, so an object in ``args`` that is also ``state`` stays one object."""

    app: App | str
    args: tuple[Any, ...]
    stack: StackConfig | str
    state: Any = None
    bare: bool = False

    def dumps(self) -> bytes:
        return cloudpickle.dumps(self)  # type: ignore[no-any-return]

    @staticmethod
    def loads(raw: bytes) -> Payload:
        payload = cloudpickle.loads(raw)
        if not isinstance(payload, Payload):
            raise TypeError(f"payload must be a Payload, got {type(payload).__name__}")
        return payload

    def function(self) -> App:
        return load_app(self.app) if isinstance(self.app, str) else self.app
