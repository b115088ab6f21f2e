"""Keyword arguments renamed in a release, still taken under the old name for one more.

A caller passing the old name gets the old behaviour and a `DeprecationWarning` naming the new
name, pointed at the caller's line; passing both names is a `TypeError`. Each renamed parameter
keeps its old name in the signature, typed, defaulting to None (not given), so mypy still checks
callers; the next release removes it. This module only translates names: it never decides what
a value means. It imports nothing from triogroups.
"""

from __future__ import annotations

import warnings
from typing import TypeVar

__all__ = ["renamed", "warn_renamed"]

_T = TypeVar("_T")


def warn_renamed(where: str, old: str, new: str, *, stacklevel: int) -> None:
    """Warn that ``where``'s ``old`` is now called ``new``; ``stacklevel`` as for `warnings.warn`
    counted from the caller of this function."""
    warnings.warn(
        f"{where}: {old} is deprecated, use {new} (the old name goes in the next release)",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def renamed(
    where: str,
    old: str,
    old_value: _T | None,
    new: str,
    new_value: _T,
    *,
    default: _T,
    stacklevel: int = 2,
) -> _T:
    """The value of the option now called ``new``, given under either name.

    ``old_value`` None means the old name was not given. Passing the old name warns (at the
    frame ``stacklevel`` levels above the caller of this function: 2 is the caller's caller);
    passing both raises a `TypeError` naming both.
    """
    if old_value is None:
        return new_value
    if new_value != default:
        raise TypeError(f"{where}: got both {old} and {new}; pass {new} only")
    warn_renamed(where, old, new, stacklevel=stacklevel + 1)
    return old_value
