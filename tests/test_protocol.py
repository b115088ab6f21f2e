"""The sans-IO protocol contract: handlers, outboxes, events, PASS and DISCARD."""

from __future__ import annotations

from triogroups import Address, Message, View
from triogroups.events import BecomeServer
from triogroups.extend import Discard, PassThrough, ViewChange

A = Address.random("A")
B = Address.random("B")
C = Address.random("C")


def _started(proto: Discard | PassThrough, me: Address = A) -> Discard | PassThrough:
    proto.start(me, "test", now=0.0)
    return proto


def test_outbox_keeps_emission_order_of_messages_and_events() -> None:
    p = _started(PassThrough())
    m1, m2, m3 = (Message(None, bytes([i])) for i in range(3))
    p.down([m1], 0.0)
    p.down_event(BecomeServer(), 0.0)
    p.down([m2], 0.0)
    p.down([m3], 0.0)
    out = p.take_down()
    assert out == [[m1], BecomeServer(), [m2, m3]]
    assert p.take_down() == []


def test_view_change_event_updates_the_view_both_ways() -> None:
    p = _started(PassThrough())
    v1 = View.create(A, 1, [A, B])
    p.down_event(ViewChange(v1), 0.0)
    assert p.view == v1 and p.take_down() == [ViewChange(v1)]
    v2 = View.create(A, 2, [A])
    p.up_event(ViewChange(v2), 0.0)
    assert p.view == v2 and p.take_up() == [ViewChange(v2)]


def test_passthrough_counts_and_forwards_unchanged() -> None:
    p = _started(PassThrough())
    batch = [Message(B, b"x"), Message(None, b"y")]
    p.down(batch, 0.0)
    p.up([Message(A, b"z", src=B)], 0.0)
    assert p.take_down() == [batch] and len(p.take_up()[0]) == 1
    assert p.stats() == {"msgs_down": 2, "msgs_up": 1}


def _payloads(items: list[object]) -> list[bytes]:
    return [m.payload for item in items if isinstance(item, list) for m in item]


def test_discard_drops_the_next_n_unicasts_and_multicasts_going_down() -> None:
    d = _started(Discard(drop_down_unicasts=1, drop_down_multicasts=2))
    d.down([Message(B, b"u1"), Message(None, b"m1"), Message(B, b"u2")], 0.0)
    d.down([Message(None, b"m2"), Message(None, b"m3")], 0.0)
    assert _payloads(d.take_down()) == [b"u2", b"m3"]
    assert d.stats()["dropped_down"] == 3


def test_discard_ignore_drops_everything_from_a_member_until_reset() -> None:
    d = _started(Discard())
    d.ignore(B)
    d.up([Message(A, b"b", src=B), Message(A, b"c", src=C)], 0.0)
    assert _payloads(d.take_up()) == [b"c"]
    d.reset()
    d.up([Message(A, b"b2", src=B)], 0.0)
    assert _payloads(d.take_up()) == [b"b2"]


def test_discard_drop_to_drops_unicasts_to_a_member() -> None:
    d = _started(Discard())
    d.drop_to(B)
    d.down([Message(B, b"b"), Message(C, b"c"), Message(None, b"all")], 0.0)
    assert _payloads(d.take_down()) == [b"c", b"all"]


def test_discard_probability_is_seeded_and_repeatable() -> None:
    def run(seed: int) -> list[bytes]:
        d = _started(Discard(up_loss=0.5, seed=seed))
        d.up([Message(A, bytes([i]), src=B) for i in range(200)], 0.0)
        return _payloads(d.take_up())

    first = run(7)
    assert first == run(7)
    assert 60 < len(first) < 140
    assert first != run(8)


def test_discard_all_spares_messages_to_itself_by_default() -> None:
    d = _started(Discard(discard_all=True))
    d.down([Message(A, b"self"), Message(B, b"other")], 0.0)
    d.up([Message(A, b"own", src=A), Message(A, b"theirs", src=B)], 0.0)
    assert _payloads(d.take_down()) == [b"self"]
    assert _payloads(d.take_up()) == [b"own"]


def test_discard_drop_if_drops_only_the_matching_messages_count_times() -> None:
    d = _started(Discard())
    d.drop_if(lambda m: m.payload.startswith(b"x"), count=2)
    d.drop_if(lambda m: m.payload == b"in", direction="up", count=None)
    d.down([Message(B, p) for p in (b"x1", b"y", b"x2", b"x3")], 0.0)
    d.up([Message(A, b"in", src=B), Message(A, b"ok", src=B), Message(A, b"in", src=B)], 0.0)
    assert _payloads(d.take_down()) == [b"y", b"x3"]
    assert _payloads(d.take_up()) == [b"ok"]
    d.reset()
    d.up([Message(A, b"in", src=B)], 0.0)
    assert _payloads(d.take_up()) == [b"in"]
