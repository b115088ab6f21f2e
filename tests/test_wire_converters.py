"""The generated header converters agree with the generic one, for every registered header.

`_wire_headers._compile_header` writes one straight-line function per header class
(the decode hot path) and keeps its type rules a second time beside the
generic, per-field `_converter`. Hypothesis feeds both the same decoded
bodies (arrays as tuples, as the decoder unpacks them), valid ones and junk,
and they must build equal headers or both refuse.
"""

from __future__ import annotations

import types
import typing
from typing import Any, NamedTuple

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Address, Digest, MergeView, View
from triogroups._channel._state import StateHeader
from triogroups._wire_headers import _HEADERS, _INT_HEADERS, _compile_header, _converter
from triogroups.protocols import ids
from triogroups.protocols.nakack2._header import XMIT_RSP, NakAckHeader2
from triogroups.view import ViewId
from triogroups.wire import (
    WIRE_VERSION,
    WireCodec,
    WireError,
    register_header,
)


class _Point(NamedTuple):
    x: int
    y: float | None


class _NestedHeader(NamedTuple):
    """Every shape `_FieldCode` writes inline, nested: the generated code is checked
    against the generic converter on it by the tests below like any registered header."""

    pairs: tuple[tuple[Address, int], ...]
    points: tuple[_Point, ...]
    ratios: tuple[float, ...] | None
    fixed: tuple[int, str]
    point: _Point | None
    ids: tuple[ViewId, ...]


#: Compiled, not registered: the fuzzers draw from every registered header.
_NESTED = _compile_header(_NestedHeader, typing.get_type_hints(_NestedHeader))
A = Address.random("A")
_CODEC = WireCodec("convtest")
_PREFIX = b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"convtest\x00"

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


#: (class, generated converter): every registered header, and the nested shapes.
_CASES = [(spec.cls, spec.convert) for _, spec in sorted(_HEADERS.items())]
_CASES.append((_NestedHeader, _NESTED))


@pytest.mark.parametrize(("cls", "convert"), _CASES, ids=lambda c: getattr(c, "__name__", ""))
@settings(max_examples=examples(100), deadline=None)
@given(data=st.data())
def test_generated_and_generic_header_converters_agree(
    cls: type, convert: Any, data: st.DataObject
) -> None:
    """Every registered header; valid fields (arrays with junk items), one junk field, or
    the wrong length: what one accepts the other builds the same, what one refuses both do."""
    if cls is int:  # a plain-int header (the channel's APP_SEQNO): the value itself
        raw = data.draw(_valid(int) | _JUNK, label="value")
        assert _outcome(convert, raw) == _outcome(_converter(int), raw)
        assert _outcome(convert, raw)[0] == ("ok" if type(raw) is int else "refused")
        return
    hints = typing.get_type_hints(cls)
    fields: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    body: tuple[Any, ...] = tuple(data.draw(_valid(hints[f]), label=f) for f in fields)
    spoil = data.draw(st.booleans(), label="junk field")
    if fields and spoil:
        spoilt = data.draw(st.integers(0, len(fields) - 1), label="spoilt field")
        body = (*body[:spoilt], data.draw(_JUNK, label="junk"), *body[spoilt + 1 :])
    if data.draw(st.booleans(), label="wrong length"):
        shorter = bool(body) and data.draw(st.booleans(), label="shorter")
        body = body[:-1] if shorter else (*body, 0)
    generated = _outcome(convert, body)
    generic = _outcome(_converter(cls), body)
    assert generated == generic, convert.__source__
    if generated[0] == "ok":
        assert type(generated[1]) is cls


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_generated_converter_accepts_every_valid_body(data: st.DataObject) -> None:
    """Valid fields alone are never refused by the generated converter (nor by the generic)."""
    cls, convert = data.draw(st.sampled_from(_CASES))
    body: Any
    if cls is int:  # a plain-int header: the value itself
        body = data.draw(_valid(int), label="value")
    else:
        hints = typing.get_type_hints(cls)
        fields: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
        body = tuple(data.draw(_strict(hints[f]), label=f) for f in fields)
    assert _outcome(convert, body) == _outcome(_converter(cls), body)
    assert _outcome(convert, body)[0] == "ok", (cls, body)


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


def _decode_header(protocol_id: int, raw: Any) -> Any:
    """``raw`` as a header on the wire, decoded by the codec (arrays come back as tuples)."""
    body = [None, A, [[0, {protocol_id: raw}, b"x"]]]
    data = _PREFIX + msgpack.packb(body, default=_CODEC._default, use_bin_type=True)
    return _CODEC.decode(data).messages[0].headers[protocol_id]


def test_state_header_with_applied_pairs_decodes_to_the_same_header() -> None:
    """The channel's ``applied`` (per sender, a seqno) is checked inline: empty and full."""
    B = Address.random("B")
    for header in (StateHeader(2, 5), StateHeader(3, 9, ((A, 4), (B, 0)), True)):
        decoded = _decode_header(ids.STATE_TRANSFER, tuple(header))
        assert decoded == header and type(decoded) is StateHeader


def test_an_int_header_decodes_to_the_int_itself() -> None:
    """The channel's application seqno (``APP_SEQNO``) is a plain int on the wire and in
    the decoded message, checked in the decode loop: anything else is refused."""
    for seqno in (0, 1, 2**64 - 1, -5):
        decoded = _decode_header(ids.APP_SEQNO, seqno)
        assert decoded == seqno and type(decoded) is int
    for bad in ("5", 5.0, True, None, [5], {1: 2}):
        with pytest.raises(WireError, match="header int: expected int"):
            _decode_header(ids.APP_SEQNO, bad)


def test_a_bare_int_header_decodes_as_the_int_and_its_namedtuple_form_still_decodes() -> None:
    """NAKACK2 registers ``bare_int``: a MSG travels as its bare seqno. The decode loop and
    the converter keep an int as it is, build the NamedTuple from an array as before, and
    refuse anything else (a bool is not an int)."""
    spec = _HEADERS[ids.NAKACK2]
    assert ids.NAKACK2 in _INT_HEADERS
    for seqno in (1, 2**64 - 1):
        decoded = _decode_header(ids.NAKACK2, seqno)
        assert decoded == seqno and type(decoded) is int
        assert spec.convert(seqno) == seqno
    full = NakAckHeader2(XMIT_RSP, 3, A)
    decoded = _decode_header(ids.NAKACK2, tuple(full))
    assert decoded == full and type(decoded) is NakAckHeader2
    for bad in (True, "5", 5.0, None, {1: 2}):
        with pytest.raises(WireError, match="header NakAckHeader2"):
            _decode_header(ids.NAKACK2, bad)


def test_only_ids_whose_header_may_be_an_int_keep_an_int_in_the_decode_loop() -> None:
    """The decode loop keeps an int as it is only under `_INT_HEADERS` (``int`` headers and
    ``bare_int``); under any other id, registered or not, an int is refused as before."""
    assert {ids.APP_SEQNO, ids.NAKACK2, ids.MCAST} <= _INT_HEADERS
    assert ids.UNICAST3 not in _INT_HEADERS and ids.RPC not in _INT_HEADERS
    with pytest.raises(WireError, match="header Unicast3Header"):
        _decode_header(ids.UNICAST3, 7)
    with pytest.raises(WireError, match="unknown protocol id 60001"):
        _decode_header(60_001, 7)


def test_register_header_refuses_a_class_that_is_neither_namedtuple_nor_int() -> None:
    for cls in (str, tuple, dict, object()):
        with pytest.raises(TypeError, match="a header is a NamedTuple or int"):
            register_header(60_000, cls)  # type: ignore[arg-type]
    assert 60_000 not in _HEADERS


@pytest.mark.parametrize(
    "applied",
    [
        [[A, "4"]],  # a seqno that is not an int
        [[A, 4, 5]],  # three items, not (sender, seqno)
        [[A]],
        [["A", 4]],  # a sender that is not an address
        [7],  # an item that is not an array
        [[A, True]],  # a bool is not an int
        {"x": 1},  # a map, not an array
        5,
    ],
)
def test_state_header_with_bad_applied_is_refused_by_the_codec(applied: Any) -> None:
    with pytest.raises(WireError, match="StateHeader: applied"):
        _decode_header(ids.STATE_TRANSFER, [1, 5, applied, False])


def test_nested_named_tuples_are_built_as_their_classes() -> None:
    """A NamedTuple inside an array is built as its class; an int becomes a float."""
    raw = (((A, 1),), ((1, 2), (3, None)), (1, 2.5), (4, "x"), (5, 1), ((3, A),))
    header = _NESTED(raw)
    assert header == _NestedHeader(
        ((A, 1),),
        (_Point(1, 2.0), _Point(3, None)),
        (1.0, 2.5),
        (4, "x"),
        _Point(5, 1.0),
        (ViewId(3, A),),
    )
    assert type(header) is _NestedHeader
    assert [type(p) for p in header.points] == [_Point, _Point]
    assert type(header.point) is _Point and type(header.points[0].y) is float
    assert type(header.ids[0]) is ViewId


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (((), ((1,),), None, (4, "x"), None, ()), "points"),
        (((), ((1, "y"),), None, (4, "x"), None, ()), "points"),
        (((), (), ("1.0",), (4, "x"), None, ()), "ratios"),
        (((), (), None, (4, 5), None, ()), "fixed"),
        (((), (), None, (4, "x", 5), None, ()), "fixed"),
        (((), (), None, [4, "x"], None, ()), "fixed"),  # arrays unpack as tuples, never lists
        (((), (), None, (4, "x"), (1, 2, 3), ()), "point"),
        (((), (), None, (4, "x"), None, ((-1, A),)), "view id"),
    ],
)
def test_nested_fields_of_the_wrong_shape_are_refused(raw: Any, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        _NESTED(raw)
