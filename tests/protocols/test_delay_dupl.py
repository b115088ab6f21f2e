"""DELAY and DUPL: the layers the chaos runs switch on at run time for late, reordered and
duplicated messages."""

from __future__ import annotations

import math
from collections.abc import Sequence

from triogroups import Address, Message
from triogroups.protocols import Delay, Dupl

A = Address.random("A")
B = Address.random("B")


def _payloads(items: Sequence[object]) -> list[bytes]:
    return [m.payload for item in items if isinstance(item, list) for m in item]


def test_delay_holds_each_message_until_its_release_time_then_ticks_it_up() -> None:
    d = Delay(in_delay=1.0, seed=3)
    d.start(A, "test", now=0.0)
    d.up([Message(A, bytes([i]), src=B) for i in range(20)], 0.0)
    released: list[bytes] = _payloads(d.take_up())
    assert len(released) < 20 and d.next_deadline() > 0.0
    while d.next_deadline() != math.inf:
        now = d.next_deadline()
        assert now <= 1.0
        d.tick(now)
        released += _payloads(d.take_up())
    assert sorted(released) == [bytes([i]) for i in range(20)]
    assert released != sorted(released), "a random delay reorders messages"
    assert d.stats() == {"delayed": 20, "held": 0}


def test_delay_zero_passes_through_and_a_run_time_change_applies_to_later_messages() -> None:
    d = Delay()
    d.start(A, "test", now=0.0)
    d.up([Message(A, b"now", src=B)], 0.0)
    assert _payloads(d.take_up()) == [b"now"] and d.next_deadline() == math.inf
    d.set_property("in_delay", 0.5, 0.0)
    d.up([Message(A, b"late", src=B)], 0.0)
    d.tick(0.0)
    held = _payloads(d.take_up())
    d.tick(0.5)
    assert held + _payloads(d.take_up()) == [b"late"]


def test_dupl_adds_copies_that_are_separate_message_objects() -> None:
    d = Dupl(incoming_copies=2)
    d.start(A, "test", now=0.0)
    original = Message(A, b"x", src=B)
    d.up([original], 0.0)
    out = d.take_up()[0]
    assert isinstance(out, list) and [m.payload for m in out] == [b"x"] * 3
    assert out[0] is original and len({id(m) for m in out}) == 3
    assert d.stats() == {"copies": 2}


def test_dupl_probability_copies_a_seeded_share_and_zero_copies_pass_through() -> None:
    d = Dupl(incoming_copies=1, probability=0.5, seed=1)
    d.start(A, "test", now=0.0)
    d.up([Message(A, bytes([i]), src=B) for i in range(100)], 0.0)
    assert 20 < d.stats()["copies"] < 80
    d.set_property("incoming_copies", 0, 0.0)
    d.take_up()
    d.up([Message(A, b"y", src=B)], 0.0)
    assert _payloads(d.take_up()) == [b"y"]
