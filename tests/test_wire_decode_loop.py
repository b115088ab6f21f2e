"""The decode loop accepts and rejects exactly what a plain decoder does, in both forms.

`WireCodec.decode` builds messages in one loop (`triogroups._wire_loop`: no
`Message.__init__`, header maps converted in place), compiled or as its pure-Python
source; every test here runs with each. These tests keep a straightforward reference decoder,
written the obvious way (every header through its converter), and check on
generated bundle bodies (valid and subtly broken) that both give the same
messages or the same `WireError` reason.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgpack
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests._forms import both_forms, decode_outcome  # noqa: F401 (both_forms: the fixture below)
from tests._kinds import examples
from triogroups import Address, Message
from triogroups._wire_headers import _HEADERS as HEADERS
from triogroups.message import ALL_FLAGS
from triogroups.wire import WIRE_VERSION, Bundle, WireCodec, WireError, register_header

# Every test here runs with the compiled core and with its pure-Python source.
pytestmark = pytest.mark.usefixtures("both_forms")

A = Address.random("A")
B = Address.random("B")
CODEC = WireCodec("looptest")
PREFIX = b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"looptest\x00"


class _LoopHeader(NamedTuple):
    seqno: int
    conn_id: int
    first: bool


LOOP_ID = 1  # unused by the protocols; 1 so that a msgpack ``True`` key (== 1) must be refused
register_header(LOOP_ID, _LoopHeader)


class _InlineHeader(NamedTuple):
    """An optional address and an int array."""

    seqno: int
    sender: Address | None = None
    ranges: tuple[int, ...] = ()


INLINE_ID = 0xFFF0  # unused by the protocols
register_header(INLINE_ID, _InlineHeader)


def _reference_decode(data: bytes) -> Bundle:
    """The decoder written plainly: one helper per message, `Message.__init__`, new dicts.

    Arrays unpack as tuples, as in the codec.
    """
    try:
        pos = CODEC.check_prefix(data)
        if data[pos]:
            raise WireError("auth", "tag without authenticator")
        top = msgpack.unpackb(
            data[pos + 1 :],
            raw=False,
            strict_map_key=False,
            ext_hook=CODEC._ext_hook,
            use_list=False,
        )
        if type(top) is not tuple or len(top) != 3:
            raise WireError("malformed", "body")
        dest, src, entries = top
        if dest is not None and type(dest) is not Address:
            raise WireError("malformed", "dest")
        if type(src) is not Address or type(entries) is not tuple:
            raise WireError("malformed", "src or entries")
        return Bundle(dest, src, [_reference_message(e, dest, src) for e in entries])
    except WireError:
        raise
    except Exception as exc:
        raise WireError("malformed", str(exc)) from None


def _reference_message(entry: Any, dest: Address | None, src: Address) -> Message:
    if type(entry) is not tuple or len(entry) not in (3, 4):
        raise WireError("malformed", "entry")
    flags, hdrs, payload = entry[:3]
    if len(entry) == 4:
        src = entry[3]
        if type(src) is not Address:
            raise WireError("malformed", "message source")
    if type(flags) is not int or flags < 0 or flags & ~ALL_FLAGS:
        raise WireError("malformed", "flags")
    if type(payload) is not bytes:
        raise WireError("malformed", "payload")
    headers: dict[int, Any] = {}
    if hdrs is not None:
        if type(hdrs) is not dict:
            raise WireError("malformed", "headers")
        for pid, raw in hdrs.items():
            spec = HEADERS.get(pid) if type(pid) is int else None
            if spec is None:
                raise WireError("malformed", "protocol id")
            try:
                headers[pid] = spec.convert(raw)
            except (ValueError, TypeError):
                raise WireError("malformed", "header") from None
    return Message(dest, payload, src=src, flags=flags, headers=headers)


_flags = st.sampled_from(
    [0, 1, 64, ALL_FLAGS, 128, 256, -1, -128, 2**64 - 1, -(2**63), True, 1.0, None]
)
_header_values = st.sampled_from(
    [
        *([1, 2, False], [1, 2], [1, 2, 3], [True, 2, False], (1, 2, False), "x", None),
        *([1, None, []], [1, A, [1, 2]], [1, "A", []], [1, None, [1, "x"]], [1, None, 7]),
        *([1.0, None, []], [1, None, [], 0], [1, None], [1, None, [True]]),
    ]
)
_header_maps = st.one_of(
    st.none(),
    st.sampled_from(["headers", 7, [1, 2]]),
    st.dictionaries(
        st.sampled_from([LOOP_ID, INLINE_ID, 65535, 0, True, False, -1, "id", float(INLINE_ID)]),
        _header_values,
        max_size=3,
    ),
)
_payloads = st.sampled_from([b"", b"x" * 100, "text", 5, None, [b"x"]])
_sources = st.sampled_from([A, B, None, "A", b"\x00" * 16])
_entries = st.one_of(
    st.tuples(_flags, _header_maps, _payloads).map(list),
    st.tuples(_flags, _header_maps, _payloads, _sources).map(list),
    st.sampled_from([[], [0], [0, None], [0, None, b"", A, A], "entry", {0: 0, 1: None, 2: b""}]),
)


@settings(max_examples=examples(300))  # per form: 600 in all
@example(None, A, [[0, {True: [1, 2, False]}, b""]])  # True == 1, but is no protocol id
@example(None, A, [[-128, None, b""]])  # negative flags
@example(None, A, [{0: 0, 1: None, 2: b""}])  # a map unpacks like a 3-entry list
@example(B, A, [[0, {LOOP_ID: [1, 2, False]}, b"x", B], [1, None, b"y"]])
@example(None, A, [[0, {INLINE_ID: [1, A, [1, 2]], LOOP_ID: [1, 2, True]}, b"x"]])
@example(None, A, [[0, {INLINE_ID: [1, None, [1, "x"]]}, b"x"]])  # a bad array item
@example(None, A, [[0, {float(INLINE_ID): [1, None, []]}, b"x"]])  # == INLINE_ID, not an id
@given(
    st.sampled_from([None, B, "B"]),
    st.sampled_from([A, None, 3]),
    st.lists(_entries, max_size=6) | st.sampled_from([None, "entries", {}]),
)
def test_decode_loop_matches_the_reference_decoder(dest: Any, src: Any, entries: Any) -> None:
    body = msgpack.packb([dest, src, entries], default=CODEC._default, use_bin_type=True)
    data = PREFIX + body
    assert decode_outcome(CODEC.decode, data) == decode_outcome(_reference_decode, data)


def test_decoded_messages_have_every_slot_set() -> None:
    """The loop sets slots by hand; a slot added to Message must be set there too."""
    msgs = [
        Message(B, b"p", src=A, headers={LOOP_ID: _LoopHeader(1, 2, True)}),
        Message(B, b"q", src=B),
    ]
    for msg in CODEC.decode(CODEC.encode(B, A, msgs)).messages:
        for slot in Message.__slots__:
            assert hasattr(msg, slot), slot


def test_decoded_header_maps_are_plain_mutable_dicts() -> None:
    data = CODEC.encode(None, A, [Message(None, b"x", headers={LOOP_ID: _LoopHeader(1, 2, True)})])
    first = CODEC.decode(data).messages[0]
    second = CODEC.decode(data).messages[0]
    first.put_header(65535, "mine")
    assert type(first.headers) is dict
    assert second.headers == {LOOP_ID: _LoopHeader(1, 2, True)}


def test_registering_a_header_again_keeps_decoding_it() -> None:
    """A module imported twice registers its header twice: decoding is unchanged."""
    register_header(INLINE_ID, _InlineHeader)
    data = CODEC.encode(None, A, [Message(None, b"x", headers={INLINE_ID: _InlineHeader(5, B)})])
    assert CODEC.decode(data).messages[0].headers == {INLINE_ID: _InlineHeader(5, B, ())}
