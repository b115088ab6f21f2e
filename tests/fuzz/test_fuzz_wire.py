"""The wire decoder with the real protocols' headers: only `WireError`, whatever the bytes.

tests/test_wire.py fuzzes the codec with test headers; here the bundles carry
the headers every protocol registers, with any well-typed values, and are then
broken the ways a network and an attacker break them: bytes flipped, inserted,
deleted, cut short, two bundles spliced, and the msgpack body rebuilt with one
value swapped for a value of another type (so the prefix and the framing stay
valid and the header checks themselves are what must hold). A valid bundle must
decode to what was encoded.
"""

from __future__ import annotations

import contextlib

import msgpack
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import _hostile
from tests.fuzz._protocol_ids import registered_ids
from tests.fuzz._settings import fuzz_settings
from triogroups import Address, Message
from triogroups.wire import WireCodec, WireError

A = Address(1, "A")
B = Address(2, "B")
C = Address(3, "C")
POOL = (A, B, C)
IDS = registered_ids()
CODEC = WireCodec("fuzz")


def _valid_bundles() -> st.SearchStrategy[tuple[bytes, list[Message]]]:
    @st.composite
    def build(draw: st.DrawFn) -> tuple[bytes, list[Message]]:
        msgs = draw(st.lists(_hostile.messages(IDS, POOL, POOL, B), min_size=1, max_size=4))
        dest = draw(st.sampled_from([None, B]))
        for m in msgs:
            m.dest = dest
        return CODEC.encode(dest, A, msgs), msgs

    return build()


def _decodes_or_wire_error(data: bytes) -> None:
    with contextlib.suppress(WireError):
        bundle = CODEC.decode(data)
        assert all(isinstance(m, Message) for m in bundle.messages)


@fuzz_settings(60)
@given(_valid_bundles())
def test_fuzz_wire_bundles_of_every_protocol_header_round_trip(
    bundle: tuple[bytes, list[Message]],
) -> None:
    """Whatever values a registered header holds, what is encoded decodes back equal."""
    data, msgs = bundle
    decoded = CODEC.decode(data)
    assert [(m.dest, m.src, m.flags, m.headers, m.payload) for m in decoded.messages] == [
        (m.dest, m.src, m.flags, m.headers, m.payload) for m in msgs
    ]


_edits = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=9)),
    st.tuples(st.just("delete"), st.integers(0, 10_000), st.integers(1, 9)),
    st.tuples(st.just("cut"), st.integers(0, 10_000), st.just(0)),
)


@fuzz_settings(120)
@given(_valid_bundles(), st.lists(_edits, min_size=1, max_size=6), st.none() | _valid_bundles())
def test_fuzz_wire_mutated_bundles_decode_or_raise_only_wire_error(
    bundle: tuple[bytes, list[Message]],
    edits: list[tuple[str, int, object]],
    other: tuple[bytes, list[Message]] | None,
) -> None:
    """Bytes flipped, inserted, deleted, cut, or spliced with another bundle: a bundle or a
    `WireError`, never another exception."""
    raw = bytearray(bundle[0])
    if other is not None:  # splice: our head, the other bundle's tail
        raw = raw[: len(raw) // 2] + other[0][len(other[0]) // 2 :]
    for kind, at, arg in edits:
        pos = at % (len(raw) or 1)
        if kind == "flip" and raw:
            raw[pos] = arg  # type: ignore[call-overload]
        elif kind == "insert":
            raw[pos:pos] = arg  # type: ignore[assignment]
        elif kind == "delete":
            del raw[pos : pos + arg]  # type: ignore[operator]
        elif kind == "cut":
            del raw[pos:]
    _decodes_or_wire_error(bytes(raw))


_anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=4)
    | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.integers(0, 70), inner, max_size=2)
    ),
    max_leaves=6,
)


def _paths(value: object, path: tuple[int | str, ...] = ()) -> list[tuple[int | str, ...]]:
    out = [path]
    if isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*path, i))
    elif isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*path, f"k{key}"))
    return out


def _replace(value: object, path: tuple[int | str, ...], new: object) -> object:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        assert isinstance(head, int)
        return [_replace(v, rest, new) if i == head else v for i, v in enumerate(value)]
    assert isinstance(value, dict) and isinstance(head, str)
    return {k: _replace(v, rest, new) if f"k{k}" == head else v for k, v in value.items()}


@fuzz_settings(120)
@given(_valid_bundles(), st.data())
def test_fuzz_wire_bodies_with_one_value_of_the_wrong_type_raise_only_wire_error(
    bundle: tuple[bytes, list[Message]], data: st.DataObject
) -> None:
    """The body re-packed with any one value (a header field, a flag, an address, a whole
    entry) replaced by a value of another shape: the prefix is intact, so the header and
    entry checks are what must turn it into `WireError`."""
    raw = bundle[0]
    at = CODEC.check_prefix(raw) + 1
    body = msgpack.unpackb(raw[at:], raw=False, strict_map_key=False)
    path = data.draw(st.sampled_from(_paths(body)))
    broken = _replace(body, path, data.draw(_anything))
    _decodes_or_wire_error(raw[:at] + msgpack.packb(broken, use_bin_type=True))
