"""The public namespaces, and making re-exported names say where users import them from.

`PUBLIC_NAMESPACES` is the one list of the modules users import from: the docs site's
reference pages and errors page, and the tests of ``__all__``, docstrings and errors, all
read it, so a new namespace is added here once.

`set_public_module` sets ``__module__`` of public classes and functions (and
of the methods and properties a public class defines) to the package that
re-exports them, so ``help(GroupActor)`` says ``triogroups.GroupActor``
instead of a private ``triogroups._group_actor``. Only objects defined in a
module below that package are touched; an alias of something foreign (a
trio name, say) keeps its own module.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import typing
from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["PUBLIC_NAMESPACES", "Namespace", "set_public_module"]


class Namespace(NamedTuple):
    """A public module and who it is for (the errors page titles its section so)."""

    module: str
    audience: str


PUBLIC_NAMESPACES = (
    Namespace("triogroups", "Application"),
    Namespace("triogroups.extend", "Extension"),
    Namespace("triogroups.testing", "Test kit"),
    Namespace("triogroups.supervisor.spark", "Spark group"),
)
"""The modules users import from, each with a ``__all__`` and its page in the API reference;
other modules are implementation details, or (`triogroups.events`, `triogroups.properties`)
what `triogroups.extend` gathers from for protocol authors."""


def set_public_module(package: str, names: Mapping[str, Any], *, root: str | None = None) -> None:
    """Set ``__module__`` to ``package`` for each public class or function in ``names``
    defined below ``root`` (default: ``package`` itself; `triogroups.extend` re-exports what
    sits in private modules elsewhere in the package)."""
    root = root or package
    for obj in names.values():
        if not _defined_below(obj, root):
            continue
        if isinstance(obj, type):
            _resolve_annotations(obj, names)
        obj.__module__ = package
        if isinstance(obj, type):
            for attr in vars(obj).values():
                target = attr.fget if isinstance(attr, property) else attr
                target = getattr(target, "__func__", target)
                if callable(target) and _defined_below(target, root):
                    target.__module__ = package


def _resolve_annotations(cls: type, names: Mapping[str, Any]) -> None:
    """Evaluate the class's own string annotations where it was defined.

    `typing.get_type_hints` looks names up in the module ``__module__`` names;
    once that is the package, names imported only by the defining module
    would not be found. Each annotation is evaluated in the defining module,
    with the public names as a fallback (for names imported there only when
    type checking); one that still does not evaluate stays as it was. A
    NamedTuple keeps its string annotations as `typing.ForwardRef` objects:
    those are evaluated the same way.
    """
    own = inspect.get_annotations(cls)
    if not own:
        return
    scope = {**names, **vars(sys.modules[cls.__module__])}
    resolved = {}
    for name, value in own.items():
        source = value.__forward_arg__ if isinstance(value, typing.ForwardRef) else value
        if isinstance(source, str):
            with contextlib.suppress(Exception):  # what does not evaluate stays as it was
                value = eval(source, scope, dict(vars(cls)))
        resolved[name] = value
    cls.__annotations__ = resolved


def _defined_below(obj: Any, package: str) -> bool:
    module = getattr(obj, "__module__", None)
    return (
        (isinstance(obj, type) or callable(obj))
        and isinstance(module, str)
        and module.startswith(package + ".")
    )
