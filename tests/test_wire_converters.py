"""The generated header converters agree with the generic one, for every registered header.

`wire._compile_header` writes one straight-line function per header class
(the decode hot path) and keeps its type rules a second time beside the
generic, per-field `_converter`. Hypothesis feeds both the same decoded
bodies (arrays as tuples, as the decoder unpacks them), valid ones and junk,
and they must build equal headers or both refuse.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triogroups import Address, Digest, MergeView, View
from triogroups.view import ViewId
from triogroups.wire import _HEADERS, _converter

_ADDRESSES = st.builds(Address, st.integers(1, 2**64 - 1), st.text(max_size=3))
_VIEWS = st.builds(
    lambda vid, members: View(ViewId(vid, members[0]), members),
    st.integers(0, 10),
    st.lists(_ADDRESSES, min_size=1, max_size=3, unique_by=lambda a: a.uuid),
)
_DIGESTS = st.dictionaries(_ADDRESSES, st.integers(0, 5).map(lambda d: (d, d + 1)), max_size=2).map(
    Digest
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=4)
    | st.binary(max_size=4)
    | _ADDRESSES
)
#: What msgpack can hand a converter: scalars, our ext types, arrays as tuples, maps.
_JUNK = st.recursive(
    _SCALARS | _VIEWS | _DIGESTS,
    lambda inner: (
        st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.integers() | st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=6,
)


def _valid(tp: Any) -> st.SearchStrategy[Any]:
    """Values of ``tp`` as the decoder hands them over (a ViewId or NamedTuple as an array)."""
    exact: dict[Any, st.SearchStrategy[Any]] = {
        int: st.integers(-(2**63), 2**64 - 1),
        bool: st.booleans(),
        str: st.text(max_size=4),
        bytes: st.binary(max_size=4),
        float: st.floats(allow_nan=False) | st.integers(-5, 5),
        Address: _ADDRESSES,
        View: _VIEWS,
        MergeView: _VIEWS,
        Digest: _DIGESTS,
        ViewId: st.tuples(st.integers(0, 2**63 + 1), _ADDRESSES),
    }
    if tp in exact:
        return exact[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(st.none() if a is type(None) else _valid(a) for a in args))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(
            _valid(args[0]) | _JUNK.filter(lambda v: type(v) is not int), max_size=3
        ).map(tuple)
    if origin is tuple:
        return st.tuples(*(_valid(a) for a in args))
    if origin is dict:
        return st.dictionaries(_valid(args[0]), _valid(args[1]), max_size=2)
    hints = typing.get_type_hints(tp)
    return st.tuples(*(_valid(hints[f]) for f in tp._fields))


def _outcome(convert: Any, raw: Any) -> tuple[str, Any]:
    try:
        return "ok", convert(raw)
    except (ValueError, TypeError):
        return "refused", None


def test_every_generated_converter_keeps_its_source() -> None:
    for spec in _HEADERS.values():
        source = spec.convert.__source__  # type: ignore[attr-defined]
        assert source.startswith("def convert(raw):"), spec.cls


_IDS = sorted(_HEADERS)


@pytest.mark.parametrize("protocol_id", _IDS, ids=lambda i: f"{i}-{_HEADERS[i].cls.__name__}")
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_generated_and_generic_header_converters_agree(
    protocol_id: int, data: st.DataObject
) -> None:
    """Every registered header; valid fields (arrays with junk items), one junk field, or
    the wrong length: what one accepts the other builds the same, what one refuses both do."""
    spec = _HEADERS[protocol_id]
    hints = typing.get_type_hints(spec.cls)
    fields: tuple[str, ...] = spec.cls._fields  # type: ignore[attr-defined]
    body: tuple[Any, ...] = tuple(data.draw(_valid(hints[f]), label=f) for f in fields)
    spoil = data.draw(st.booleans(), label="junk field")
    if fields and spoil:
        spoilt = data.draw(st.integers(0, len(fields) - 1), label="spoilt field")
        body = (*body[:spoilt], data.draw(_JUNK, label="junk"), *body[spoilt + 1 :])
    if data.draw(st.booleans(), label="wrong length"):
        shorter = bool(body) and data.draw(st.booleans(), label="shorter")
        body = body[:-1] if shorter else (*body, 0)
    generated = _outcome(spec.convert, body)
    generic = _outcome(_converter(spec.cls), body)
    assert generated == generic, spec.convert.__source__  # type: ignore[attr-defined]
    if generated[0] == "ok":
        assert type(generated[1]) is spec.cls


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_generated_converter_accepts_every_valid_body(data: st.DataObject) -> None:
    """Valid fields alone are never refused by the generated converter (nor by the generic)."""
    protocol_id = data.draw(st.sampled_from(sorted(_HEADERS)))
    spec = _HEADERS[protocol_id]
    hints = typing.get_type_hints(spec.cls)
    fields: tuple[str, ...] = spec.cls._fields  # type: ignore[attr-defined]
    body = tuple(data.draw(_strict(hints[f]), label=f) for f in fields)
    assert _outcome(spec.convert, body) == _outcome(_converter(spec.cls), body)
    assert _outcome(spec.convert, body)[0] == "ok", (spec.cls, body)


def _strict(tp: Any) -> st.SearchStrategy[Any]:
    """Like `_valid` without junk items in arrays and with view ids in range."""
    if tp is ViewId:
        return st.tuples(st.integers(0, 2**63 - 1), _ADDRESSES)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(_strict(args[0]), max_size=3).map(tuple)
    if origin is tuple:
        return st.tuples(*(_strict(a) for a in args))
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(st.none() if a is type(None) else _strict(a) for a in args))
    return _valid(tp)
