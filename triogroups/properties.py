"""Typed, validated protocol properties.

A protocol declares its properties as class attributes:

>>> from triogroups.extend import Protocol
>>> from triogroups.properties import Duration, positive
>>> class Resender(Protocol):
...     xmit_interval = Duration(0.5, doc="time between retransmission runs", check=positive)
>>> Resender(xmit_interval="200ms").xmit_interval
0.2
>>> Resender(xmit_interval=0)
Traceback (most recent call last):
...
triogroups.PropertyError: Resender.xmit_interval must be > 0, got 0

Construction validates every value and rejects unknown names, so a typo in a
TOML stack file is an error that names the protocol and the property instead
of a silently ignored setting. After construction a property is a plain
instance attribute, so reading it on a hot path costs nothing extra.

Durations are seconds (trio's unit); strings with a unit ("200us", "500ms",
"2s", "1m") are accepted too, so JGroups-style configs read naturally. Sizes are
bytes; "64KB", "2MB" are accepted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from triogroups._error_root import TriogroupsError

__all__ = [
    "Bool",
    "Duration",
    "Float",
    "Int",
    "Property",
    "PropertyError",
    "Rule",
    "Size",
    "Str",
    "StrList",
    "at_least",
    "between",
    "positive",
    "property_rows",
]


class PropertyError(TriogroupsError, ValueError):
    """A bad stack configuration; the message names the protocol and the property."""


T = TypeVar("T")


class Property(Generic[T]):
    """Base descriptor: a default, a doc line and a value check.

    A non-data descriptor: `Protocol.__init__` stores the validated value in
    the instance, which then shadows the descriptor, so reads are plain
    attribute lookups. ``__set__`` exists only for the type checker.
    """

    kind = "any"

    def __init__(
        self,
        default: Any,
        *,
        doc: str,
        check: Callable[[Any], bool] | None = None,
        rule: str = "",
        nullable: bool = False,
    ) -> None:
        self.default = default
        self.doc = doc
        self.check = check
        self.rule = rule or getattr(check, "text", "")
        self.nullable = nullable
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Property[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Property[T] | T:
        if obj is None:
            return self
        return self.default  # type: ignore[no-any-return]

    if TYPE_CHECKING:

        def __set__(self, obj: object, value: T) -> None: ...

    def convert(self, value: Any) -> T:
        """Turn a config value into the property's type or raise TypeError."""
        raise NotImplementedError

    def show(self, value: Any) -> str:
        """``value`` as a TOML stack file would write it (units for durations and sizes)."""
        if value is None:
            return "none"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return f'"{value}"'
        if isinstance(value, tuple | list):
            return "[" + ", ".join(self.show(v) for v in value) + "]"
        return str(value)

    def validate(self, owner: str, value: Any) -> Any:
        """The converted value, or a PropertyError naming ``owner.name``."""
        if value is None and self.nullable:
            return None
        try:
            converted = self.convert(value)
        except (TypeError, ValueError) as exc:
            raise PropertyError(f"{owner}.{self.name} must be {self.kind}, got {value!r}") from exc
        if self.check is not None and not self.check(converted):
            raise PropertyError(f"{owner}.{self.name} must be {self.rule}, got {value!r}")
        return converted


def property_rows(properties: Mapping[str, Property[Any]]) -> list[tuple[str, str, str, str]]:
    """(name, default, rule, doc) of each property, sorted by name: the table that
    ``triogroups protocol X`` prints and the docs site's protocol reference shows, made in
    one place so the two cannot differ. The default is written as a TOML stack writes it.

    >>> rows = property_rows({"xmit_interval": Duration(0.5, doc="between runs", check=positive)})
    >>> rows
    [('xmit_interval', '"500ms"', '> 0', 'between runs')]
    """
    rows = []
    for name, prop in sorted(properties.items()):
        rule = prop.rule or "-"
        if prop.nullable:
            rule = f"{rule}, or none" if prop.rule else "or none"
        rows.append((name, prop.show(prop.default), rule, prop.doc))
    return rows


class Int(Property[int]):
    kind = "an int"

    def convert(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(value)
        return value


class Float(Property[float]):
    kind = "a number"

    def convert(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(value)
        return float(value)


class Bool(Property[bool]):
    kind = "a bool"

    def convert(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise TypeError(value)
        return value


class Str(Property[str]):
    kind = "a string"

    def convert(self, value: Any) -> str:
        if not isinstance(value, str):
            raise TypeError(value)
        return value


class StrList(Property[tuple[str, ...]]):
    kind = "a list of strings"

    def convert(self, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise TypeError(value)
        return tuple(value)


_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(us|ms|s|m|h)?\s*$")
_DURATION_UNITS = {"us": 1e-6, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
_SIZE = re.compile(r"^\s*(\d+)\s*(b|kb|k|mb|m|gb|g)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30}
_SIZE_UNITS["gb"] = 1 << 30


class Duration(Property[float]):
    kind = "a duration (seconds, or a string like '500ms' or '200us')"

    def show(self, value: Any) -> str:
        """Seconds as ``"500ms"``, ``"2s"``, ``"1.5s"``, ``"200us"``.

        >>> [Duration(0, doc="").show(v) for v in (0.5, 2.0, 1.5, 0, -1, 0.0125, 0.0002)]
        ['"500ms"', '"2s"', '"1.5s"', '"0s"', '"-1s"', '"12.5ms"', '"200us"']
        """
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            return super().show(value)
        if 0 < abs(value) < 0.001:
            return f'"{round(value * 1e6, 3):g}us"'
        if 0 < abs(value) < 1:
            return f'"{round(value * 1000, 6):g}ms"'
        return f'"{value:g}s"'

    def convert(self, value: Any) -> float:
        if isinstance(value, str):
            match = _DURATION.match(value)
            if match is None:
                raise ValueError(value)
            # rounded to the nanosecond: "200us" is 0.0002, not 0.00019999999999999998
            return round(float(match.group(1)) * _DURATION_UNITS[match.group(2)], 9)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(value)
        return float(value)


class Size(Property[int]):
    kind = "a size (bytes, or a string like '64KB')"

    def show(self, value: Any) -> str:
        """Bytes in the largest unit that divides them: ``"64KB"``, ``"5MB"``, ``"64000B"``.

        >>> [Size(0, doc="").show(v) for v in (65536, 5 << 20, 64000, 0)]
        ['"64KB"', '"5MB"', '"64000B"', '"0B"']
        """
        if isinstance(value, bool) or not isinstance(value, int):
            return super().show(value)
        for unit in ("GB", "MB", "KB"):
            scale = _SIZE_UNITS[unit.lower()]
            if value and value % scale == 0:
                return f'"{value // scale}{unit}"'
        return f'"{value}B"'

    def convert(self, value: Any) -> int:
        if isinstance(value, str):
            match = _SIZE.match(value)
            if match is None:
                raise ValueError(value)
            unit = (match.group(2) or "b").lower()
            return int(match.group(1)) * _SIZE_UNITS[unit]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(value)
        return value


class Rule:
    """A value check that can say itself ("> 0"), so a property need not repeat it."""

    __slots__ = ("_test", "text")

    def __init__(self, test: Callable[[Any], bool], text: str) -> None:
        self._test = test
        self.text = text

    def __call__(self, value: Any) -> bool:
        return self._test(value)


positive = Rule(lambda value: value > 0, "> 0")


def at_least(low: float) -> Rule:
    """The rule "value >= low" (says itself as ">= low" in errors and help)."""
    return Rule(lambda value: value >= low, f">= {low}")


def between(low: float, high: float) -> Rule:
    """The rule "low <= value <= high" (says itself as "in [low, high]")."""
    return Rule(lambda value: low <= value <= high, f"in [{low}, {high}]")
