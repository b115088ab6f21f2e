"""The wire codec: round trips, the fixed prefix, and hostile input.

Decoding arbitrary bytes must raise `WireError` and nothing else.
"""

from __future__ import annotations

import contextlib
import struct
from typing import NamedTuple

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._forms import both_forms  # noqa: F401 (the fixture below)
from tests._kinds import examples
from triogroups import Address, Digest, Flag, MergeView, Message, View, ViewId
from triogroups.wire import WIRE_VERSION, WireCodec, WireError, register_header

# Every test here runs with the compiled core and with its pure-Python source; the fuzz
# properties ask for half the examples each form that they ran with one.
pytestmark = pytest.mark.usefixtures("both_forms")

A = Address.random("A")
B = Address.random("B")
C = Address.random("C")


class _SeqHeader(NamedTuple):
    seqno: int
    conn_id: int
    first: bool


class _RichHeader(NamedTuple):
    view: View | None
    digest: Digest | None
    members: tuple[Address, ...]
    ratio: float
    name: str
    blob: bytes
    table: dict[int, int]
    view_id: ViewId | None


SEQ_ID = 64001
RICH_ID = 64002
register_header(SEQ_ID, _SeqHeader)
register_header(RICH_ID, _RichHeader)


def _codec(**kw: object) -> WireCodec:
    return WireCodec("wiretest", **kw)  # type: ignore[arg-type]


def _sample_bundle() -> bytes:
    msgs = [
        Message(B, b"x" * 10, src=A, headers={SEQ_ID: _SeqHeader(i, 7, i == 1)}) for i in range(3)
    ]
    return _codec().encode(B, A, msgs)


def test_round_trip_unicast_bundle_keeps_every_field() -> None:
    codec = _codec()
    msgs = [
        Message(B, b"one", src=A, flags=Flag.OOB, headers={SEQ_ID: _SeqHeader(1, 9, True)}),
        Message(B, b"", src=A),
        Message(B, b"relayed", src=C, flags=Flag.DONT_BUNDLE | Flag.NO_FC),
    ]
    bundle = codec.decode(codec.encode(B, A, msgs))
    assert bundle.dest == B and bundle.src == A
    assert [m.payload for m in bundle.messages] == [b"one", b"", b"relayed"]
    assert [m.src for m in bundle.messages] == [A, A, C]
    assert bundle.messages[0].flags == Flag.OOB
    assert bundle.messages[0].headers == {SEQ_ID: _SeqHeader(1, 9, True)}
    assert bundle.messages[2].flags == Flag.DONT_BUNDLE | Flag.NO_FC
    assert all(m.dest == B for m in bundle.messages)


def test_round_trip_keeps_address_names() -> None:
    codec = _codec()
    bundle = codec.decode(codec.encode(None, A, [Message(None, b"m")]))
    assert bundle.dest is None
    assert bundle.src.name == "A" and bundle.src.uuid == A.uuid


def test_an_address_renamed_under_the_same_uuid_is_encoded_with_its_new_name() -> None:
    """The encoder caches each address's encoding; equal addresses may differ in name."""
    codec = _codec()
    codec.encode(None, A, [Message(None, b"m")])
    renamed = Address(A.uuid, "A2")
    bundle = _codec().decode(codec.encode(None, renamed, [Message(None, b"m")]))
    assert bundle.src.name == "A2"


def test_bundles_in_a_row_carry_each_its_own_source_and_destination() -> None:
    """The encoder knows the last bundle's addresses by identity: whatever the order of
    sources and destinations (the group, a peer, another peer, a renamed one), each
    bundle decodes with its own."""
    codec = _codec()
    renamed = Address(B.uuid, "B2")
    pairs = [(None, A), (B, A), (B, A), (C, A), (None, A), (A, B), (A, renamed), (renamed, C)]
    for dest, src in pairs:
        bundle = codec.decode(codec.encode(dest, src, [Message(dest, b"m")]))
        assert (bundle.dest, bundle.src) == (dest, src)
        assert (bundle.dest and bundle.dest.name, bundle.src.name) == (
            dest and dest.name,
            src.name,
        )


def test_addresses_in_headers_keep_their_names_whether_known_by_identity_or_not() -> None:
    """The encoder finds an address in a header by identity first (SEQUENCER's BCAST
    names its forwarder in every message): the same object again, an equal one renamed,
    and the first again each decode with their own name."""
    codec = _codec()
    renamed = Address(B.uuid, "B2")
    members = (B, renamed, B, C, renamed)
    header = _RichHeader(None, None, members, 0.0, "", b"", {}, None)
    for _ in range(2):
        bundle = codec.decode(
            codec.encode(None, A, [Message(None, b"m", headers={RICH_ID: header})])
        )
        decoded = bundle.messages[0].headers[RICH_ID].members
        assert decoded == members
        assert [m.name for m in decoded] == ["B", "B2", "B", "C", "B2"]


def test_round_trip_headers_with_views_digests_and_containers() -> None:
    codec = _codec()
    sub1 = View.create(A, 3, [A, C])
    sub2 = View.create(B, 5, [B])
    merge = MergeView(ViewId(6, A), [A, B, C], [sub1, sub2])
    header = _RichHeader(
        merge,
        Digest({A: (3, 5), B: (0, 0)}),
        (A, B),
        0.25,
        "näme",
        b"\x00\xff",
        {1: 2, 3: 4},
        ViewId(6, A),
    )
    bundle = codec.decode(codec.encode(None, A, [Message(None, b"p", headers={RICH_ID: header})]))
    got = bundle.messages[0].headers[RICH_ID]
    assert got == header
    assert isinstance(got.view, MergeView)
    assert got.view.subgroups == (sub1, sub2)
    assert got.digest[A] == (3, 5)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "truncated"),
        (b"TG", "truncated"),
        (b"XX" + bytes([WIRE_VERSION, 0, 8]) + b"wiretest\x00\x90", "bad_magic"),
        (b"TG" + bytes([WIRE_VERSION + 1, 0, 8]) + b"wiretest\x00\x90", "version"),
        (b"TG" + bytes([WIRE_VERSION, 2, 8]) + b"wiretest\x00\x90", "malformed"),
        (b"TG" + bytes([WIRE_VERSION, 1, 8]) + b"wiretest\x10" + bytes(32), "auth"),
        (b"TG" + bytes([WIRE_VERSION, 0, 5]) + b"other\x00\x93\xc0\xc0\x90", "foreign_cluster"),
        (b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"wiretest", "truncated"),
        (b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"wiretest\x00", "truncated"),
        (b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"wiretest\x03abc\x90", "auth"),
        (b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"wiretest\x00\x90", "malformed"),
        (b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"wiretest\x00\xc1", "malformed"),
        (b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"wiretest\x00\x93\xc0\x01\x90", "malformed"),
    ],
    ids=[
        "empty",
        "two-bytes",
        "bad-magic",
        "newer-version",
        "prefix-flags",
        "sealed-without-secret",
        "foreign-cluster",
        "no-auth-byte",
        "no-body",
        "tag-without-authenticator",
        "body-not-triple",
        "invalid-msgpack",
        "src-not-address",
    ],
)
def test_prefix_and_body_errors_name_their_reason(data: bytes, reason: str) -> None:
    with pytest.raises(WireError) as info:
        _codec().decode(data)
    assert info.value.reason == reason


def test_oversized_datagram_is_rejected_before_parsing() -> None:
    codec = _codec(max_size=100)
    with pytest.raises(WireError) as info:
        codec.decode(b"TG" + b"\x00" * 200)
    assert info.value.reason == "oversized"


def test_encode_refuses_a_bundle_above_max_size() -> None:
    codec = _codec(max_size=100)
    with pytest.raises(ValueError, match="exceeds max_size 100"):
        codec.encode(None, A, [Message(None, b"x" * 200)])


def test_unknown_header_id_is_malformed() -> None:
    codec = _codec()
    body = msgpack.packb([None, None, []])
    good = codec.encode(None, A, [Message(None, b"x", headers={SEQ_ID: _SeqHeader(1, 2, False)})])
    bad = good.replace(struct.pack(">H", SEQ_ID), struct.pack(">H", 64999))
    assert bad != good and body
    with pytest.raises(WireError, match="unknown protocol id"):
        codec.decode(bad)


def test_header_field_of_the_wrong_type_is_malformed() -> None:
    codec = _codec()
    good = codec.encode(None, A, [Message(None, b"x", headers={SEQ_ID: _SeqHeader(5, 2, False)})])
    bad = good.replace(b"\x93\x05\x02\xc2", b"\x93\xa1x\x02\xc2")
    assert bad != good
    with pytest.raises(WireError, match="_SeqHeader"):
        codec.decode(bad)


def test_flag_bits_outside_the_defined_set_are_malformed() -> None:
    codec = _codec()
    good = codec.encode(None, A, [Message(None, b"zz", flags=Flag.OOB)])
    bad = good.replace(b"\x93\x01\xc0\xc4\x02zz", b"\x93\xcd\x10\x00\xc0\xc4\x02zz")
    assert bad != good
    with pytest.raises(WireError, match="bad flags"):
        codec.decode(bad)


class _XorAuth:
    """A toy authenticator (checks the plumbing, not cryptography)."""

    def __init__(self, key: int) -> None:
        self.key = key

    def sign(self, body: bytes) -> bytes:
        return bytes([sum(body) % 256 ^ self.key])

    def verify(self, body: bytes, tag: bytes) -> bool:
        return tag == self.sign(body)


def test_authenticator_signs_and_verifies_the_body() -> None:
    codec = _codec(authenticator=_XorAuth(7))
    data = codec.encode(None, A, [Message(None, b"secret")])
    assert codec.decode(data).messages[0].payload == b"secret"
    with pytest.raises(WireError) as info:
        _codec(authenticator=_XorAuth(8)).decode(data)
    assert info.value.reason == "auth"


def test_cluster_name_must_fit_the_prefix() -> None:
    with pytest.raises(ValueError, match="cluster name"):
        WireCodec("x" * 300)


def test_register_header_refuses_a_taken_id() -> None:
    class Other(NamedTuple):
        x: int

    with pytest.raises(ValueError, match="already has header _SeqHeader"):
        register_header(SEQ_ID, Other)


# --- hostile input: only WireError, ever ------------------------------------------


def _decode_only_wire_errors(data: bytes) -> None:
    with contextlib.suppress(WireError):
        _codec().decode(data)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_random_bytes_raise_only_wire_error(data: bytes) -> None:
    _decode_only_wire_errors(data)


@settings(max_examples=examples(300))
@given(st.binary(max_size=300))
def test_fuzz_random_body_after_a_valid_prefix_raises_only_wire_error(body: bytes) -> None:
    _decode_only_wire_errors(b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"wiretest\x00" + body)


_msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=5)
    | st.binary(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.integers(0, 70000), inner, max_size=3)
    ),
    max_leaves=20,
)


@settings(max_examples=examples(150))
@given(_msgpack_values)
def test_fuzz_well_formed_msgpack_of_the_wrong_shape_raises_only_wire_error(value: object) -> None:
    body = msgpack.packb(value)
    _decode_only_wire_errors(b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"wiretest\x00" + body)


@settings(max_examples=examples(300))
@given(st.integers(0, 200))
def test_fuzz_truncated_bundles_raise_only_wire_error(cut: int) -> None:
    data = _sample_bundle()
    _decode_only_wire_errors(data[: min(cut, len(data) - 1)])


@settings(max_examples=examples(250))
@given(st.data())
def test_fuzz_mutated_bundles_decode_or_raise_wire_error(data: st.DataObject) -> None:
    raw = bytearray(_sample_bundle())
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    try:
        bundle = _codec().decode(bytes(raw))
    except WireError:
        return
    assert all(isinstance(m, Message) for m in bundle.messages)


def test_merge_view_of_a_merge_view_round_trips() -> None:
    codec = _codec()
    first = MergeView(ViewId(3, A), [A, B], [View.create(A, 2, [A]), View.create(B, 2, [B])])
    second = MergeView(ViewId(4, A), [A, B, C], [first, View.create(C, 1, [C])])
    header = _RichHeader(second, None, (), 0.0, "", b"", {}, None)
    bundle = codec.decode(codec.encode(None, A, [Message(None, b"", headers={RICH_ID: header})]))
    assert bundle.messages[0].headers[RICH_ID].view == second


@pytest.mark.parametrize("older", [1, 2])
def test_an_older_versions_bundle_is_refused_since_it_means_something_else(older: int) -> None:
    """Version 1 tagged every channel payload; version 2 sends bytes untagged (`Flag.TAGGED`
    marks the rest); version 3 carries a channel's application seqno in a plain-int header
    of its own (``APP_SEQNO``) instead of a `StateHeader`, and NAKACK2's and MCAST's MSG as
    its bare seqno. Read by another version a payload would lose or keep a byte, or a
    message its place in the state, so the versions refuse each other's bundles, each
    naming both versions."""
    codec = _codec()
    data = bytearray(codec.encode(None, A, [Message(None, b"\x00payload")]))
    assert data[2] == WIRE_VERSION == 3
    data[2] = older
    with pytest.raises(WireError, match=f"wire version {older}, this member speaks 3") as info:
        codec.decode(bytes(data))
    assert info.value.reason == "version"


def test_the_tagged_flag_travels_on_the_wire() -> None:
    codec = _codec()
    flags = int(Flag.TAGGED | Flag.OOB)
    (got,) = codec.decode(
        codec.encode(None, A, [Message(None, b"\x01\xa1x", flags=flags)])
    ).messages
    assert got.flags == flags
