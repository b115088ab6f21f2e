"""The data model: addresses, messages, views, digests."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from triogroups import Address, Digest, Flag, MergeView, Message, View, ViewId
from triogroups.message import new_message


def test_address_identity_is_the_uuid_not_the_name() -> None:
    a = Address(5, "A")
    assert a == Address(5, "other") and hash(a) == hash(Address(5, ""))
    assert a != Address(6, "A")
    assert Address.random("A") != Address.random("A")


def test_address_orders_by_uuid_and_survives_pickle() -> None:
    low, high = Address(1, "z"), Address(2, "a")
    assert sorted([high, low]) == [low, high]
    back = pickle.loads(pickle.dumps(high))
    assert back == high and back.name == "a"


def test_address_bytes_round_trip_is_16_bytes() -> None:
    a = Address.random("A")
    raw = a.to_bytes()
    assert len(raw) == 16 and Address.from_bytes(raw, "A") == a


@pytest.mark.parametrize(
    ("uuid", "error"), [(-1, ValueError), (1 << 128, ValueError), ("x", TypeError)]
)
def test_address_rejects_bad_uuids(uuid: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="address uuid"):
        Address(uuid)  # type: ignore[arg-type]


def test_address_is_immutable() -> None:
    with pytest.raises(AttributeError):
        Address(1).name = "x"  # type: ignore[misc]


def test_message_flags_and_headers() -> None:
    m = Message(None, b"p", flags=Flag.OOB)
    assert m.has_flag(Flag.OOB) and not m.has_flag(Flag.DONT_BUNDLE)
    m.set_flag(Flag.NO_FC).put_header(3, ("h",))
    assert m.flags == Flag.OOB | Flag.NO_FC and m.get_header(3) == ("h",)
    c = m.copy()
    c.put_header(4, ("x",))
    assert 4 not in m.headers and c.payload is m.payload


def test_message_copy_sets_every_slot_and_shares_only_payload_and_header_objects() -> None:
    """copy() sets slots by hand; a slot added to Message must be copied too."""
    a, b = Address(1, "A"), Address(2, "B")
    m = Message(b, b"p", src=a, flags=Flag.OOB | Flag.DONT_LOOPBACK, headers={3: ("h",)})
    c = m.copy()
    for slot in Message.__slots__:
        assert getattr(c, slot) == getattr(m, slot), slot
    assert c.headers is not m.headers and c.headers[3] is m.headers[3]


@pytest.mark.parametrize("dest", [None, Address(2, "B")])
@pytest.mark.parametrize("src", [None, Address(1, "A")])
@pytest.mark.parametrize("flags", [0, int(Flag.OOB | Flag.TAGGED)])
@pytest.mark.parametrize("headers", [{}, {3: ("h",), 7: 12}])
def test_new_message_equals_the_constructor_in_every_slot(
    dest: Address | None, src: Address | None, flags: int, headers: dict[int, Any]
) -> None:
    """Issue 40 item 3: `new_message` is the one fast form of ``Message(...)`` (the channel's
    send, NAKACK2's own copy, the wire decoder and `Message.copy` call it instead of each
    setting the slots by hand); a slot added to Message must be set there too, and it
    takes the header map it is given, not a copy."""
    fast = new_message(dest, src, flags, headers, b"p")
    plain = Message(dest, b"p", src=src, flags=flags, headers=headers)
    for slot in Message.__slots__:
        assert getattr(fast, slot) == getattr(plain, slot), slot
    assert type(fast.flags) is int
    assert fast.headers is headers


def test_view_coordinator_membership_and_differences() -> None:
    a, b, c = (Address.random(n) for n in "ABC")
    v1 = View.create(a, 1, [a, b])
    v2 = View.create(a, 2, [a, c])
    assert v1.coord == a and b in v1 and c not in v1 and len(v1) == 2
    assert v1.left_members(v2) == [b] and v2.new_members(v1) == [c]
    assert v1.view_id < v2.view_id


def test_view_rejects_empty_and_duplicate_members() -> None:
    a = Address.random("A")
    with pytest.raises(ValueError, match="at least one"):
        View.create(a, 1, [])
    with pytest.raises(ValueError, match="unique"):
        View.create(a, 1, [a, a])


def test_merge_view_keeps_subgroups() -> None:
    a, b = Address.random("A"), Address.random("B")
    mv = MergeView(ViewId(3, a), [a, b], [View.create(a, 2, [a]), View.create(b, 2, [b])])
    assert isinstance(mv, View) and len(mv.subgroups) == 2


def test_digest_merge_takes_maximum_and_minimum_takes_minimum() -> None:
    a, b = Address.random("A"), Address.random("B")
    d1 = Digest({a: (3, 5), b: (1, 1)})
    d2 = Digest({a: (4, 4)})
    assert d1.merge(d2)[a] == (4, 5) and d1.merge(d2)[b] == (1, 1)
    assert d1.minimum(d2) == Digest({a: (3, 4)})
    assert d1.highest_delivered(b) == 1 and d1.highest_delivered(Address.random()) is None


def test_digest_rejects_received_below_delivered() -> None:
    with pytest.raises(ValueError, match="delivered <= received"):
        Digest({Address.random("A"): (5, 4)})


def test_merge_view_subgroups_do_not_nest() -> None:
    a, b, c = (Address.random(n) for n in "ABC")
    first = MergeView(ViewId(3, a), [a, b], [View.create(a, 2, [a]), View.create(b, 2, [b])])
    second = MergeView(ViewId(4, a), [a, b, c], [first, View.create(c, 1, [c])])
    assert type(second.subgroups[0]) is View and second.subgroups[0].members == (a, b)
