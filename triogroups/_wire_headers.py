"""What the wire decoder checks: the registered headers and the code generated to check them.

`register_header` records a protocol's header class; from its annotations this
module generates one straight-line converter per header (`_compile_header`),
diff-tested against the plain generic converter (tests/test_wire_converters.py).
Input bytes never reach the code generator: only type hints do. The loop that
checks and builds every message of a bundle with these converters is
`triogroups._wire_loop`; the codec itself (the bundle's prefix, msgpack,
sealing) is `triogroups.wire`.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, NamedTuple

from triogroups._error_root import TriogroupsError
from triogroups.address import Address
from triogroups.message import ALL_FLAGS
from triogroups.view import Digest, MergeView, View, ViewId

__all__ = [
    "WireError",
    "check_members",
    "check_view_id",
    "header_type",
    "register_header",
]

_BAD_ENTRY = "message entry is not [flags, headers, payload]"
#: View ids off the wire stay below 2**63: a member counts on by one from the highest
#: id it installed, and msgpack encodes nothing above 2**64 - 1, so a peer's (or a forged)
#: view id of 2**64 - 1 would make the next view unsendable.
_VIEW_ID_LIMIT = 1 << 63
#: Any bit outside the defined flags; a negative int has all high bits set, so it is caught too.
_BAD_FLAGS = ~ALL_FLAGS


class WireError(TriogroupsError):
    """Bytes that are not a valid bundle for this codec.

    The only exception `WireCodec.decode` raises. ``reason`` is one of
    ``truncated``, ``bad_magic``, ``version``, ``foreign_cluster``, ``auth``,
    ``unknown_key``, ``replay``, ``oversized``, ``malformed``.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# --- header registry ---------------------------------------------------------

_Converter = Callable[[Any], Any]


class _HeaderSpec(NamedTuple):
    cls: type
    convert: _Converter  # raw list -> header instance, or ValueError/TypeError
    hints: dict[str, Any]  # the field types both `convert` and the decode loop check


_HEADERS: dict[int, _HeaderSpec] = {}
_CONVERTERS: dict[int, _Converter] = {}  # protocol id -> its spec's convert, for the decode loop
#: Protocol ids whose header may be an int (``int`` headers, ``bare_int``): the decode loop
#: keeps an int under one of them as it is, before any other check.
_INT_HEADERS: set[int] = set()
_EXACT = {int: "int", bool: "bool", str: "str", bytes: "bytes"}


def _compile_header(cls: type, hints: dict[str, Any], bare_int: bool = False) -> _Converter:
    """One function per header class: unpack, check each field inline, build the tuple.

    Decoding runs for every header of every message received, so instead of
    a generic loop over per-field checkers this generates straight-line code
    (see `_FieldCode` for the shapes checked inline; others call their
    converter). The body is unpacked with arrays as tuples, so when no field
    needed a conversion the raw tuple itself becomes the header: no second
    tuple. The generated source is kept on the function as ``__source__`` for
    inspection; tests check it agrees with the generic ``_converter(cls)``.
    With ``bare_int`` an int is returned as it is (see `register_header`).
    """
    code = _FieldCode({"_new": tuple.__new__})
    lines = ["def convert(raw):"]
    if bare_int:
        lines += ["    if type(raw) is int:", "        return raw"]
    built = _header_check(cls, hints, code, "_cls", "    ", lines)
    lines.append(f"    return {built}")
    source = "\n".join(lines)
    env = code.env
    exec(source, env)  # generated from type hints only, never from input
    convert = env["convert"]
    convert.__source__ = source
    return convert  # type: ignore[no-any-return]


def _header_check(
    cls: type, hints: dict[str, Any], code: _FieldCode, ref: str, ind: str, out: list[str]
) -> str:
    """Append to ``out`` the lines that check ``raw`` as a ``cls`` header (ValueError or
    TypeError when it is not one); return the expression that builds the header.

    ``ref`` names ``cls`` in ``code.env``."""
    if cls is int:  # a header that is one number: the raw value itself, no tuple
        out += [f"{ind}if type(raw) is not int:", f"{ind}    raise ValueError('expected int')"]
        return "raw"
    fields: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    code.env[ref] = cls
    names = [f"f{i}" for i in range(len(fields))]
    out += [
        f"{ind}if type(raw) is not tuple or len(raw) != {len(fields)}:",
        f"{ind}    raise ValueError('{cls.__name__} needs {len(fields)} fields')",
    ]
    if fields:
        out.append(f"{ind}{', '.join(names)}{',' if len(names) == 1 else ''} = raw")
    converted = False
    for name, field in zip(names, fields, strict=True):
        converted = code.check(name, field, hints[field], ind, out) or converted
    if converted:
        return f"_new({ref}, ({', '.join(names)}{',' if len(names) == 1 else ''}))"
    return f"_new({ref}, raw)"


class _FieldCode:
    """Writes the straight-line check of one field value, recursively.

    Inline: exact types (``int``), ``float`` (an int becomes a float),
    Address/View/MergeView/Digest, ``X | None``, ``tuple[X, ...]``, fixed
    tuples and nested NamedTuples, in any nesting. Every data message
    carries a ``tuple[...]`` field (NAKACK2's ``ranges``, the channel's
    ``applied``), almost always empty: inline, an empty array costs one type
    check instead of a converter call, a generator and a new tuple.
    Everything else (ViewId, maps) calls its generic converter. The rules
    are the generic `_converter`'s, except that arrays must be tuples, which
    is all the decoder produces (it unpacks with ``use_list=False``).
    """

    def __init__(self, env: dict[str, Any]) -> None:
        self.env = env
        self._count = 0

    def _fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def check(self, var: str, label: str, tp: Any, ind: str, out: list[str]) -> bool:
        """Append to ``out`` the lines that check ``var`` (indented by ``ind``);
        True if they may rebind ``var`` to a converted value."""

        def fail(expected: str) -> str:
            return f"{ind}    raise ValueError({f'{label}: expected {expected}'!r})"

        if tp in _EXACT:
            out += [f"{ind}if type({var}) is not {_EXACT[tp]}:", fail(_EXACT[tp])]
            return False
        if tp is float:
            out += [
                f"{ind}if type({var}) is not float:",
                f"{ind}    if type({var}) is not int:",
                f"    {fail('float')}",
                f"{ind}    {var} = float({var})",
            ]
            return True
        if tp is Any:
            return False
        if tp in (Address, View, MergeView, Digest):
            ref = self._fresh("_t")
            self.env[ref] = tp
            out += [f"{ind}if not isinstance({var}, {ref}):", fail(tp.__name__)]
            return False
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
            inner = args[0] if args[1] is type(None) else args[1]
            out.append(f"{ind}if {var} is not None:")
            body: list[str] = []
            converted = self.check(var, label, inner, ind + "    ", body)
            out += body or [f"{ind}    pass"]
            return converted
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            out += [f"{ind}if type({var}) is not tuple:", fail("array")]
            item = self._fresh("_i")
            body = []
            if not self.check(item, f"{label}[]", args[0], ind + "        ", body):
                if body:  # most arrays on the wire are empty: no iterator for those
                    out += [f"{ind}if {var}:", f"{ind}    for {item} in {var}:", *body]
                return False
            acc = self._fresh("_o")
            out += [
                f"{ind}if {var}:",
                f"{ind}    {acc} = []",
                f"{ind}    for {item} in {var}:",
                *body,
                f"{ind}        {acc}.append({item})",
                f"{ind}    {var} = tuple({acc})",
            ]
            return True
        if origin is tuple and Ellipsis not in args and args:
            return self._fixed(var, label, list(args), None, ind, out)
        if (
            tp is not ViewId
            and isinstance(tp, type)
            and issubclass(tp, tuple)
            and hasattr(tp, "_fields")
        ):
            hints = typing.get_type_hints(tp)
            return self._fixed(var, label, [hints[f] for f in tp._fields], tp, ind, out)
        ref = self._fresh("_c")
        self.env[ref] = _converter(tp)
        out.append(f"{ind}{var} = {ref}({var})")
        return True

    def _fixed(
        self, var: str, label: str, types_: list[Any], cls: type | None, ind: str, out: list[str]
    ) -> bool:
        """A fixed-length array: a ``tuple[A, B]`` or a NamedTuple (then always built)."""
        what = f"{len(types_)} items" if cls is None else f"{cls.__name__} of {len(types_)} fields"
        out += [
            f"{ind}if type({var}) is not tuple or len({var}) != {len(types_)}:",
            f"{ind}    raise ValueError({f'{label}: expected {what}'!r})",
        ]
        names = [self._fresh("_e") for _ in types_]
        packed = f"({', '.join(names)}{',' if len(names) == 1 else ''})"
        out.append(f"{ind}{packed[1:-1]} = {var}")
        converted = False
        for i, (name, tp) in enumerate(zip(names, types_, strict=True)):
            converted = self.check(name, f"{label}[{i}]", tp, ind, out) or converted
        if cls is not None:
            ref = self._fresh("_nt")
            self.env[ref] = cls
            out.append(f"{ind}{var} = _new({ref}, {packed if converted else var})")
            return True
        if converted:
            out.append(f"{ind}{var} = {packed}")
        return converted


def register_header(protocol_id: int, cls: type, *, bare_int: bool = False) -> None:
    """Register the header NamedTuple of the protocol with this id, or ``int`` for a
    header that is one number (the channel's application seqno): an int on the
    wire and in ``Message.headers``, with no tuple to build or to take apart.

    Field annotations drive validation on decode: int, bool, float, str, bytes,
    Address, View, MergeView, Digest, ViewId (ids below 2**63), ``X | None``, ``tuple[X, ...]``,
    ``dict[K, V]`` and nested registered-style NamedTuples. ``bare_int``: besides the NamedTuple,
    the header may be a bare int, on the wire and in ``Message.headers``, which the
    protocol reads as its most common message (NAKACK2's and MCAST's: a MSG's seqno), so
    that message has no tuple to build, encode, decode or check.
    """
    if not 0 < protocol_id < 1 << 16:
        raise ValueError(f"protocol id must be in 1..65535, got {protocol_id}")
    if cls is not int and not (
        isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")
    ):
        raise TypeError(f"a header is a NamedTuple or int, not {cls!r}")
    existing = _HEADERS.get(protocol_id)
    if existing is not None and existing.cls is not cls:
        raise ValueError(
            f"protocol id {protocol_id} already has header {existing.cls.__name__}, "
            f"cannot register {cls.__name__}"
        )
    hints = {} if cls is int else typing.get_type_hints(cls)
    spec = _HEADERS[protocol_id] = _HeaderSpec(
        cls, _compile_header(cls, hints, bare_int and cls is not int), hints
    )
    _CONVERTERS[protocol_id] = spec.convert
    if cls is int or bare_int:
        _INT_HEADERS.add(protocol_id)


def header_type(protocol_id: int) -> type | None:
    """The header class registered for ``protocol_id`` (`register_header`), or None."""
    spec = _HEADERS.get(protocol_id)
    return None if spec is None else spec.cls


def _exact(tp: type) -> _Converter:
    def check(value: Any) -> Any:
        if type(value) is not tp:
            raise ValueError(f"expected {tp.__name__}, got {type(value).__name__}")
        return value

    return check


def _float(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise ValueError(f"expected float, got {type(value).__name__}")


def _instance(tp: type) -> _Converter:
    def check(value: Any) -> Any:
        if not isinstance(value, tp):
            raise ValueError(f"expected {tp.__name__}, got {type(value).__name__}")
        return value

    return check


def _converter(tp: Any) -> _Converter:
    if tp is int or tp is bool or tp is str or tp is bytes:
        return _exact(tp)
    if tp is float:
        return _float
    if tp is Any:
        return lambda v: v
    if tp in (Address, View, MergeView, Digest):
        return _instance(tp)
    if tp is ViewId:
        return check_view_id
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [_converter(a) for a in args if a is not type(None)]
        optional = type(None) in args
        if len(inner) != 1:
            raise TypeError(f"header unions must be 'X | None', got {tp}")
        conv = inner[0]
        if optional:
            return lambda v: None if v is None else conv(v)
        return conv
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _converter(args[0])
            return lambda v: tuple(item(x) for x in _seq(v))
        items = [_converter(a) for a in args]

        def fixed(v: Any) -> tuple[Any, ...]:
            seq = _seq(v)
            if len(seq) != len(items):
                raise ValueError(f"expected {len(items)} items, got {len(seq)}")
            return tuple(c(x) for c, x in zip(items, seq, strict=True))

        return fixed
    if origin is dict:
        key, val = (_converter(a) for a in args)

        def mapping(v: Any) -> dict[Any, Any]:
            if type(v) is not dict:
                raise ValueError(f"expected map, got {type(v).__name__}")
            return {key(k): val(x) for k, x in v.items()}

        return mapping
    if isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields"):
        hints = typing.get_type_hints(tp)
        convs = [_converter(hints[f]) for f in tp._fields]

        def nested(v: Any) -> Any:
            seq = _seq(v)
            if len(seq) != len(convs):
                raise ValueError(f"{tp.__name__} needs {len(convs)} fields, got {len(seq)}")
            return tp(*(c(x) for c, x in zip(convs, seq, strict=True)))

        return nested
    raise TypeError(f"unsupported header field type {tp!r}")


def _seq(v: Any) -> list[Any] | tuple[Any, ...]:
    if type(v) is not list and type(v) is not tuple:
        raise ValueError(f"expected array, got {type(v).__name__}")
    return v  # type: ignore[no-any-return,unused-ignore]


def check_view_id(vid: Any) -> ViewId:
    if (type(vid) is not list and type(vid) is not tuple) or len(vid) != 2:
        raise ValueError("bad view id")
    counter, coord = vid
    if type(counter) is not int or type(coord) is not Address:
        raise ValueError("bad view id")
    if not 0 <= counter < _VIEW_ID_LIMIT:
        raise ValueError(f"view id {counter} outside 0..2**63-1")
    return ViewId(counter, coord)


def check_members(members: Any) -> list[Address]:
    if type(members) is not list or not all(type(m) is Address for m in members):
        raise ValueError("bad view members")
    return members
