"""UNICAST2 as a sans-IO object: one test per rule of seed 002, with explicit ``now``.

Two protocol objects are joined by hand (h11 style): what one emits going
down is encoded and decoded with the real wire codec and handed to the
other's ``up``; each test asserts what each side emitted.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from triogroups import Address, Flag, Message, PropertyError, View
from triogroups.extend import Disconnect, ViewChange
from triogroups.protocols import ids
from triogroups.protocols.passthrough import PassThrough
from triogroups.protocols.unicast2 import (
    DATA,
    SEND_FIRST_SEQNO,
    STABLE,
    XMIT_REQ,
    Unicast2,
    Unicast2Header,
)
from triogroups.testing import down_messages, split, started, up_payloads
from triogroups.wire import WireCodec

A = Address(0xA, "A")
B = Address(0xB, "B")
C = Address(0xC, "C")
ID = ids.UNICAST2
CODEC = WireCodec("unit")


def _pair(**props: Any) -> tuple[Unicast2, Unicast2]:
    return started(Unicast2(**props), A), started(Unicast2(**props), B)


def _hdrs(msgs: list[Message]) -> list[Unicast2Header]:
    return [m.headers[ID] for m in msgs]


def _send(p: Unicast2, dest: Address, *payloads: bytes, now: float = 0.0, flags: int = 0) -> None:
    p.down([Message(dest, x, flags=flags) for x in payloads], now)


def _data(msgs: list[Message]) -> list[Message]:
    return [m for m in msgs if m.headers[ID].type == DATA]


def _ctrl(src: Address, header: Unicast2Header, dest: Address = A) -> list[Message]:
    """A control message from ``src`` as it arrives at ``dest``."""
    return [Message(dest, src=src, flags=Flag.OOB, headers={ID: header})]


def _of(msgs: list[Message], kind: int) -> list[Unicast2Header]:
    return [h for h in _hdrs(msgs) if h.type == kind]


# --- the header ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        Unicast2Header(DATA, 7, 4242, True),
        Unicast2Header(XMIT_REQ, conn_id=9, missing=(3, 5, 8)),
        Unicast2Header(SEND_FIRST_SEQNO, 12, 77),
        Unicast2Header(STABLE, 10, 77, high=14),
    ],
)
def test_unicast2_header_roundtrips_through_the_wire_codec(header: Unicast2Header) -> None:
    msg = Message(B, b"x", headers={ID: header})
    (back,) = CODEC.decode(CODEC.encode(B, A, [msg])).messages
    assert back.headers[ID] == header and type(back.headers[ID]) is Unicast2Header


def test_unicast2_data_header_stays_small() -> None:
    """It is on every unicast: a dozen bytes, not more."""
    msg = Message(B, b"", headers={ID: Unicast2Header(DATA, 1000, 30000, False)})
    bare = Message(B, b"")
    assert len(CODEC.encode(B, A, [msg])) - len(CODEC.encode(B, A, [bare])) <= 16


# --- sending: scenario #1 rules ------------------------------------------------------------------


def test_unicast2_first_message_creates_entry_with_conn_id_and_first_flag() -> None:
    """Seed #1: a new entry, send-conn-id set and sent, seqno 1 with first=true."""
    a, _ = _pair()
    _send(a, B, b"m1")
    (h1,) = _hdrs(down_messages(a, wire=True))
    assert h1.type == DATA and h1.seqno == 1 and h1.first and h1.conn_id > 0
    assert a.stats()["send"]["B"] == {
        "conn_id": h1.conn_id,
        "seqno": 1,
        "low": 0,
        "high": 1,
        "size": 1,
    }
    _send(a, B, b"m2", b"m3")
    assert [(h.seqno, h.first, h.conn_id) for h in _hdrs(down_messages(a, wire=True))] == [
        (2, False, h1.conn_id),
        (3, False, h1.conn_id),
    ]


def test_unicast2_multicasts_and_no_reliability_messages_pass_through_untouched() -> None:
    a, b = _pair()
    mcast = Message(None, b"all")
    raw = Message(B, b"raw", flags=Flag.NO_RELIABILITY)
    a.down([mcast, raw], 0.0)
    assert split(a.take_down())[0] == [mcast, raw] and not mcast.headers and not raw.headers
    b.up([Message(None, b"all", src=A), Message(B, b"raw", src=A)], 0.0)
    assert up_payloads(b) == [b"all", b"raw"] and a.stats()["send_connections"] == 0


def test_unicast2_conn_ids_are_unique_and_grow_per_new_connection() -> None:
    a = started(Unicast2(), A)
    ids_seen = []
    for _ in range(3):
        _send(a, B, b"x")
        ids_seen.append(_hdrs(down_messages(a, wire=True))[0].conn_id)
        a.close_connection(B, 0.0)
    assert ids_seen == sorted(set(ids_seen)) and len(ids_seen) == 3
    other = started(Unicast2(), A, now=5.0)
    _send(other, B, b"x")
    assert _hdrs(down_messages(other, wire=True))[0].conn_id != ids_seen[0]


# --- receiving: scenario #2 rules ----------------------------------------------------------------


def test_unicast2_receiver_creates_window_and_takes_conn_id_from_first_message() -> None:
    """Seed #2: B creates the entry and recv window at msg.seqno, recv-conn-id = conn-id."""
    a, b = _pair()
    _send(a, B, b"m1", b"m2")
    wire = down_messages(a, wire=True)
    b.up(wire, 0.0)
    assert up_payloads(b) == [b"m1", b"m2"]
    recv = b.stats()["recv"]["A"]
    assert recv["conn_id"] == wire[0].headers[ID].conn_id and (recv["low"], recv["high"]) == (2, 2)


def test_unicast2_first_message_opens_the_window_at_its_own_seqno() -> None:
    """Seed: 'create a new entry.recv_win with msg.seqno': a first message need not be #1
    (the sender purged what a closed connection had delivered)."""
    _, b = _pair()
    b.up([Message(B, b"m25", src=A, headers={ID: Unicast2Header(DATA, 25, 7, True)})], 0.0)
    assert up_payloads(b) == [b"m25"] and b.stats()["recv"]["A"]["low"] == 25


def test_unicast2_delivers_in_order_despite_reordering_and_duplicates() -> None:
    a, b = _pair()
    _send(a, B, *(bytes([i]) for i in range(6)))
    w = down_messages(a, wire=True)
    b.up([w[0], w[3], w[2], w[3], w[0]], 0.0)
    assert up_payloads(b) == [b"\x00"]
    b.up([w[1], w[5], w[4], w[2]], 0.0)
    assert up_payloads(b) == [bytes([i]) for i in range(1, 6)]
    assert b.stats()["duplicates"] == 3 and b.stats()["msgs_delivered"] == 6


def test_unicast2_first_flag_with_same_conn_id_does_not_reset_the_window() -> None:
    """Seed: first=true on the current recv-conn-id is a NOP (no duplicate establishment)."""
    a, b = _pair()
    _send(a, B, b"m1", b"m2", b"m3")
    w = down_messages(a, wire=True)
    b.up(w[:2], 0.0)
    b.up([w[0]], 0.0)  # a retransmitted first message
    b.up([w[2]], 0.0)
    assert up_payloads(b) == [b"m1", b"m2", b"m3"] and b.stats()["connections_reset"] == 0


def test_unicast2_first_message_with_new_conn_id_resets_the_receive_window() -> None:
    """Seed #4 rule: entry exists but conn-id differs: new recv window at msg.seqno."""
    a, b = _pair()
    _send(a, B, *(b"old%d" % i for i in range(25)))
    b.up(down_messages(a, wire=True), 0.0)
    up_payloads(b)
    a.close_connection(B, 0.0)
    _send(a, B, b"new1")
    (w,) = down_messages(a, wire=True)
    b.up([w], 0.0)
    assert up_payloads(b) == [b"new1"]
    assert b.stats()["recv"]["A"]["conn_id"] == w.headers[ID].conn_id
    assert b.stats()["connections_reset"] == 1


def test_unicast2_message_of_an_older_connection_is_dropped_as_stale() -> None:
    """Decision: conn-ids grow, so a delayed first message of the old connection never
    resets the newer window (the seed's 'Issues' section)."""
    a, b = _pair()
    _send(a, B, b"old1", b"old2")
    old = down_messages(a, wire=True)
    a.close_connection(B, 0.0)
    _send(a, B, b"new1")
    b.up(down_messages(a, wire=True), 0.0)
    b.up(old, 0.0)
    assert up_payloads(b) == [b"new1"] and b.stats()["stale_dropped"] == 2
    assert not b.take_down()  # no SEND_FIRST_SEQNO for a connection that is gone


# --- SEND_FIRST_SEQNO ----------------------------------------------------------------------------


def test_unicast2_non_first_message_on_unknown_connection_asks_send_first_seqno() -> None:
    """Seed: recv_win null or conn-id mismatch and not first: drop, send SEND_FIRST_SEQNO."""
    a, b = _pair()
    _send(a, B, b"m1", b"m2", b"m3")
    w = down_messages(a, wire=True)
    b.up(w[1:], 0.0)
    assert up_payloads(b) == []
    (ask,) = _hdrs(down_messages(b, wire=True))
    assert ask == Unicast2Header(SEND_FIRST_SEQNO, 3, w[0].headers[ID].conn_id)
    assert b.stats()["send_first_seqno_sent"] == 1 and b.stats()["dropped_no_connection"] == 2


def test_unicast2_send_first_seqno_resends_lowest_flagged_first_then_up_to_seqno() -> None:
    """Seed: A grabs the first message in its sent window, sets first=true and sends it."""
    a, b = _pair()
    _send(a, B, b"m1", b"m2", b"m3", b"m4")
    w = down_messages(a, wire=True)
    b.up(w[2:3], 0.0)  # #3 arrives alone: ask for the first seqno
    a.up(down_messages(b, wire=True), 0.0)
    again = down_messages(a, wire=True)
    assert [(h.seqno, h.first) for h in _hdrs(again)] == [(1, True), (2, False), (3, False)]
    assert a.stats()["send_first_seqno_received"] == 1 and a.stats()["retransmissions"] == 3
    assert w[0].headers[ID].first and not w[1].headers[ID].first  # the window is unchanged
    b.up(again, 0.0)
    assert up_payloads(b) == [b"m1", b"m2", b"m3"]


def test_unicast2_send_first_seqno_for_another_conn_id_is_dropped() -> None:
    """Seed: if conn-id != send-conn-id: drop message."""
    a, _ = _pair()
    _send(a, B, b"m1")
    conn = _hdrs(down_messages(a, wire=True))[0].conn_id
    a.up([Message(A, src=B, headers={ID: Unicast2Header(SEND_FIRST_SEQNO, 1, conn + 1)})], 0.0)
    assert down_messages(a, wire=True) == [] and a.stats()["stale_dropped"] == 1


def test_unicast2_send_first_seqno_is_coalesced_per_batch_and_rate_limited() -> None:
    a, b = _pair(xmit_interval=0.5)
    _send(a, B, *(b"m%d" % i for i in range(6)))
    w = down_messages(a, wire=True)
    b.up(w[1:3], 0.0)
    b.up(w[3:4], 0.1)
    asks = _of(down_messages(b, wire=True), SEND_FIRST_SEQNO)
    assert [h.seqno for h in asks] == [3]
    b.up(w[4:5], 0.6)
    assert [h.seqno for h in _of(down_messages(b, wire=True), SEND_FIRST_SEQNO)] == [5]


def test_unicast2_unanswered_send_first_seqno_is_asked_again_each_xmit_interval() -> None:
    """The missing first message is a gap too: asked once per xmit_interval, five times
    at most; the sender's next message starts over."""
    a, b = _pair(xmit_interval=0.5, stable_interval=100, conn_expiry_timeout=0)
    _send(a, B, b"m1", b"m2", b"m3")
    w = down_messages(a, wire=True)
    b.up([w[1]], 0.0)
    asks = [len(_of(down_messages(b, wire=True), SEND_FIRST_SEQNO))]
    for t in (0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
        b.tick(t)
        asks.append(len(_of(down_messages(b, wire=True), SEND_FIRST_SEQNO)))
    assert asks == [1, 0, 1, 1, 1, 1, 0, 0]
    b.up([w[2]], 3.1)
    (again,) = _of(down_messages(b, wire=True), SEND_FIRST_SEQNO)
    assert again.seqno == 3
    a.up(_ctrl(B, again), 3.2)
    b.up(down_messages(a, wire=True), 3.2)
    assert up_payloads(b) == [b"m1", b"m2", b"m3"]
    b.tick(3.5)
    b.tick(4.0)
    assert _of(down_messages(b, wire=True), SEND_FIRST_SEQNO) == []


# --- XMIT_REQ ------------------------------------------------------------------------------------


def test_unicast2_xmit_req_at_most_once_per_gap_per_xmit_interval() -> None:
    """Receiver-driven retransmission: a gap is asked for once per xmit_interval,
    and not at the first run that sees it (it may be reordering)."""
    a, b = _pair(xmit_interval=0.5, stable_interval=100)
    _send(a, B, *(b"m%d" % i for i in range(1, 6)))
    w = down_messages(a, wire=True)
    b.up([w[0], w[2], w[4]], 0.0)
    assert up_payloads(b) == [b"m1"] and down_messages(b, wire=True) == []
    assert b.next_deadline() == 0.5
    b.tick(0.5)
    assert down_messages(b, wire=True) == [] and b.next_deadline() == 1.0
    b.tick(0.7)  # early: nothing is due
    assert down_messages(b, wire=True) == []
    b.tick(1.0)
    (req,) = _of(down_messages(b, wire=True), XMIT_REQ)
    assert req.missing == (2, 4) and req.conn_id == w[0].headers[ID].conn_id
    b.tick(1.5)
    assert _of(down_messages(b, wire=True), XMIT_REQ)[0].missing == (2, 4)
    assert b.stats()["xmit_reqs_sent"] == 4
    b.up([w[1], w[3]], 1.6)
    b.tick(2.0)
    assert up_payloads(b) == [b"m2", b"m3", b"m4", b"m5"]
    assert _of(down_messages(b, wire=True), XMIT_REQ) == []


def test_unicast2_sender_answers_xmit_req_from_its_window_and_ignores_other_conns() -> None:
    a, b = _pair(xmit_interval=0.5, stable_interval=100)
    _send(a, B, b"m1", b"m2", b"m3")
    w = down_messages(a, wire=True)
    b.up([w[0], w[2]], 0.0)
    b.tick(0.5)
    b.tick(1.0)
    req = down_messages(b, wire=True)
    a.up(req, 1.0)
    again = down_messages(a, wire=True)
    assert [m.payload for m in again] == [b"m2"] and a.stats()["retransmissions"] == 1
    assert a.stats()["xmit_reqs_received"] == 1
    a.close_connection(B, 1.0)
    _send(a, B, b"n1")
    down_messages(a, wire=True)
    a.up(req, 1.1)
    assert down_messages(a, wire=True) == [] and a.stats()["stale_dropped"] == 1


# --- STABLE --------------------------------------------------------------------------------------


def test_unicast2_stable_every_interval_purges_sender_window() -> None:
    """Periodic STABLE from receiver to sender (stable_interval) lets the sender purge."""
    a, b = _pair(stable_interval=1.0, xmit_interval=10)
    _send(a, B, b"m1", b"m2", b"m3")
    b.up(down_messages(a, wire=True), 0.0)
    assert b.next_deadline() == 1.0
    b.tick(1.0)
    (st,) = _of(down_messages(b, wire=True), STABLE)
    assert (st.seqno, st.high) == (3, 3)
    a.up(_ctrl(B, st), 1.0)
    assert a.stats()["send"]["B"]["size"] == 0 and a.stats()["send"]["B"]["low"] == 3
    assert a.stats()["stable_received"] == 1 and b.stats()["stable_sent"] == 1


def test_unicast2_stable_repeats_at_most_max_stable_msgs_for_the_same_state() -> None:
    a, b = _pair(stable_interval=1.0, max_stable_msgs=3, xmit_interval=10)
    _send(a, B, b"m1")
    b.up(down_messages(a, wire=True), 0.0)
    sent = []
    for t in range(1, 7):
        b.tick(float(t))
        sent.append(len(_of(down_messages(b, wire=True), STABLE)))
    assert sent == [1, 1, 1, 0, 0, 0]
    _send(a, B, b"m2")
    b.up(down_messages(a, wire=True), 6.5)
    b.tick(7.0)
    assert len(_of(down_messages(b, wire=True), STABLE)) == 1  # progress restores the budget


def test_unicast2_duplicate_data_restores_the_stable_budget() -> None:
    """Decision: a duplicate shows the sender has not purged, so STABLE is due again."""
    a, b = _pair(stable_interval=1.0, max_stable_msgs=1, xmit_interval=10)
    _send(a, B, b"m1")
    w = down_messages(a, wire=True)
    b.up(w, 0.0)
    b.tick(1.0)
    b.tick(2.0)
    assert len(_of(down_messages(b, wire=True), STABLE)) == 1
    b.up(w, 2.5)
    b.tick(3.0)
    assert len(_of(down_messages(b, wire=True), STABLE)) == 1 and b.stats()["duplicates"] == 1


def test_unicast2_stable_after_max_bytes_received() -> None:
    a, b = _pair(max_bytes=100, stable_interval=100, xmit_interval=100)
    _send(a, B, b"x" * 60)
    b.up(down_messages(a, wire=True), 0.0)
    assert down_messages(b, wire=True) == []
    _send(a, B, b"y" * 60)
    b.up(down_messages(a, wire=True), 0.0)
    (st,) = _of(down_messages(b, wire=True), STABLE)
    assert (st.seqno, st.high) == (2, 2)


def test_unicast2_stable_resends_the_tail_sent_before_the_previous_stable() -> None:
    """The sender resends what is above the receiver's hr, but not what may be in flight."""
    a, _ = _pair()
    _send(a, B, b"m1", b"m2", b"m3")
    conn = _hdrs(down_messages(a, wire=True))[0].conn_id
    a.up(_ctrl(B, Unicast2Header(STABLE, 1, conn, high=1)), 1.0)
    assert down_messages(a, wire=True) == []  # m2, m3 may still be in flight
    assert a.stats()["send"]["B"]["low"] == 1
    _send(a, B, b"m4")
    down_messages(a, wire=True)
    a.up(_ctrl(B, Unicast2Header(STABLE, 1, conn, high=2)), 2.0)
    # m4 was sent after the first STABLE
    assert [m.payload for m in down_messages(a, wire=True)] == [b"m3"]


def test_unicast2_stable_with_another_conn_id_or_beyond_sent_is_harmless() -> None:
    a, _ = _pair()
    _send(a, B, b"m1", b"m2")
    conn = _hdrs(down_messages(a, wire=True))[0].conn_id
    a.up(_ctrl(B, Unicast2Header(STABLE, 2, conn + 5, high=2)), 1.0)
    assert a.stats()["send"]["B"]["size"] == 2 and a.stats()["stale_dropped"] == 1
    a.up(_ctrl(B, Unicast2Header(STABLE, 99, conn, high=99)), 1.0)
    assert a.stats()["send"]["B"]["low"] == 2  # clamped to what was sent
    _send(a, B, b"m3")
    assert _hdrs(down_messages(a, wire=True))[0].seqno == 3


def test_unicast2_probe_resends_highest_when_no_stable_is_heard() -> None:
    """Decision: if every STABLE is lost, the sender probes with its highest message."""
    a, b = _pair(stable_interval=1.0, max_stable_msgs=2, xmit_interval=0.5)
    _send(a, B, b"m0")
    b.up(down_messages(a, wire=True), 0.0)
    b.tick(1.0)
    a.up(down_messages(b, wire=True), 1.0)  # a STABLE: b has the connection open
    _send(a, B, b"m1", b"m2", now=1.0)
    down_messages(a, wire=True)  # all lost, and every STABLE after them
    for t in (1.5, 2.0, 2.5, 3.0, 3.5):
        a.tick(t)
    assert down_messages(a, wire=True) == []
    a.tick(4.0)
    (probe,) = down_messages(a, wire=True)
    assert probe.payload == b"m2" and a.stats()["probes"] == 1
    a.tick(4.5)
    assert down_messages(a, wire=True) == []
    b.up([probe], 4.5)
    assert _of(down_messages(b, wire=True), SEND_FIRST_SEQNO) == []
    b.tick(5.0)
    b.tick(5.5)
    (req,) = _of(down_messages(b, wire=True), XMIT_REQ)  # the gap it now sees: m1
    assert req.missing == (2,)


def test_unicast2_probe_of_unacknowledged_connection_resends_first() -> None:
    """Campaign unicast2 seed 2275: C's first unicasts to A were lost in a partition, and
    no STABLE ever came. The probe comes after two ``stable_interval``s (a receiver that
    opened the connection acknowledges within one) and resends the lowest message flagged
    first with the highest, so A opens the connection at once: no SEND_FIRST_SEQNO round
    trip, which a lossy link had lost twice before the next partition."""
    a, b = _pair(stable_interval=1.0, max_stable_msgs=5, xmit_interval=0.5)
    _send(a, B, b"m1", b"m2", b"m3")
    down_messages(a, wire=True)  # all lost
    a.tick(1.5)
    assert down_messages(a, wire=True) == []
    a.tick(2.0)
    probe = down_messages(a, wire=True)
    assert [m.payload for m in probe] == [b"m1", b"m3"] and a.stats()["probes"] == 1
    assert [(h.seqno, h.first) for h in _hdrs(probe)] == [(1, True), (3, False)]
    b.up(probe, 2.0)
    assert up_payloads(b) == [b"m1"]
    assert _of(down_messages(b, wire=True), SEND_FIRST_SEQNO) == []
    b.tick(2.5)
    b.tick(3.0)
    (req,) = _of(down_messages(b, wire=True), XMIT_REQ)
    assert req.missing == (2,)


# --- OOB and self --------------------------------------------------------------------------------


def test_unicast2_oob_is_delivered_at_once_and_not_again_in_order() -> None:
    """OOB: reliable, may overtake regular messages, delivered exactly once."""
    a, b = _pair()
    _send(a, B, b"r1", b"r2")
    _send(a, B, b"o3", flags=Flag.OOB)
    _send(a, B, b"r4")
    w = down_messages(a, wire=True)
    b.up([w[0], w[2], w[3]], 0.0)
    assert up_payloads(b) == [b"r1", b"o3"]
    b.up([w[2], w[1]], 0.0)
    assert up_payloads(b) == [b"r2", b"r4"]


def test_unicast2_unicast_to_self_is_sequenced_and_delivered_in_order() -> None:
    a = started(Unicast2(), A)
    _send(a, A, b"s1", b"s2", b"s3")
    loop = down_messages(a, wire=True)
    assert [h.seqno for h in _hdrs(loop)] == [1, 2, 3]
    a.up(loop, 0.0)
    assert up_payloads(a) == [b"s1", b"s2", b"s3"]


# --- closing -------------------------------------------------------------------------------------


def test_unicast2_view_change_removes_entries_of_peers_that_left() -> None:
    """Seed #3: on a view change both sides remove the entry for a peer that left."""
    a, b = _pair()
    _send(a, B, b"m1")
    b.up(down_messages(a, wire=True), 0.0)
    _send(b, A, b"r1")
    a.up(down_messages(b, wire=True), 0.0)
    a.down_event(ViewChange(View.create(A, 2, [A, C])), 1.0)
    b.up_event(ViewChange(View.create(B, 2, [B])), 1.0)
    for p in (a, b):
        s = p.stats()
        assert s["send_connections"] == 0 and s["recv_connections"] == 0
    assert isinstance(a.take_down()[-1], ViewChange)


def test_unicast2_close_connection_abandons_unacked_and_reopens_with_a_new_conn_id() -> None:
    a, _ = _pair()
    _send(a, B, b"m1", b"m2")
    first = _hdrs(down_messages(a, wire=True))[0].conn_id
    assert [m.payload for m in a.pending(B)] == [b"m1", b"m2"]
    a.close_connection(B, 1.0)
    assert a.pending(B) == [] and a.stats()["abandoned"] == 2 and a.take_down() == []
    _send(a, B, b"m3")
    (h,) = _hdrs(down_messages(a, wire=True))
    assert h.seqno == 1 and h.first and h.conn_id > first


def test_unicast2_receiver_close_keeps_a_tombstone_so_nothing_is_delivered_twice() -> None:
    """Decision for seed #5/#9: the reopened window starts past what was delivered."""
    a, b = _pair(max_retransmit_time=10.0)
    _send(a, B, b"m1", b"m2")
    _send(a, B, b"o3", flags=Flag.OOB)
    _send(a, B, b"m4", b"m5")
    w = down_messages(a, wire=True)
    b.up([w[0], w[2]], 0.0)  # m2 is late: the OOB o3 overtakes it
    assert up_payloads(b) == [b"m1", b"o3"]
    b.close_connection(A, 1.0)
    assert b.stats()["tombstones"] == 1
    b.up([w[4]], 2.0)  # #5: no entry, so SEND_FIRST_SEQNO
    a.up(down_messages(b, wire=True), 2.0)
    b.up(down_messages(a, wire=True), 2.0)  # #1 (first) .. #5 again
    assert up_payloads(b) == [b"m2", b"m4", b"m5"]
    assert b.stats()["recv"]["A"]["conn_id"] == w[0].headers[ID].conn_id
    assert b.stats()["tombstones"] == 0


def test_unicast2_tombstone_expires_after_max_retransmit_time() -> None:
    _, b = _pair(max_retransmit_time=10.0, xmit_interval=100, stable_interval=100)
    b.up([Message(B, b"m1", src=A, headers={ID: Unicast2Header(DATA, 1, 5, True)})], 0.0)
    b.close_connection(A, 1.0)
    b.tick(10.9)
    assert b.stats()["tombstones"] == 1
    b.tick(11.0)
    assert b.stats()["tombstones"] == 0 and b.next_deadline() == 100.0
    b.tick(100.0)
    assert b.next_deadline() == math.inf


def test_unicast2_ages_out_connections_to_non_members_after_max_retransmit_time() -> None:
    """Goal #3: connections to non-members are closed max_retransmit_time after opening."""
    a = started(Unicast2(max_retransmit_time=5.0, conn_expiry_timeout=0, xmit_interval=1.0), A)
    _send(a, C, b"before-view")  # no view yet: nobody is a non-member
    assert a.stats()["age_out"] == 0
    a.down_event(ViewChange(View.create(A, 1, [A, B])), 0.0)  # C is not a member: closed
    assert a.stats()["abandoned"] == 1
    _send(a, B, b"member", now=1.0)
    _send(a, C, b"talk-to-non-member", now=1.0)
    assert a.stats()["age_out"] == 1
    for t in (2.0, 3.0, 4.0, 5.0):
        a.tick(t)
    assert "C" in a.stats()["send"]
    a.tick(6.0)
    assert "C" not in a.stats()["send"] and "B" in a.stats()["send"]
    assert a.stats()["aged_out"] == 1 and a.stats()["abandoned"] == 2


def test_unicast2_a_member_joining_the_view_stops_aging_out() -> None:
    a = started(Unicast2(max_retransmit_time=5.0, conn_expiry_timeout=0), A)
    a.down_event(ViewChange(View.create(A, 1, [A])), 0.0)
    _send(a, B, b"x", now=1.0)
    assert a.stats()["age_out"] == 1
    a.up_event(ViewChange(View.create(A, 2, [A, B])), 2.0)
    a.tick(10.0)
    assert a.stats()["age_out"] == 0 and "B" in a.stats()["send"]


def test_unicast2_idle_connections_are_reaped_but_never_with_unacked_messages() -> None:
    """conn_expiry_timeout: an idle receive entry goes (here one stuck behind a gap its
    sender abandoned); a send entry stays while it holds unacked messages."""
    a, b = _pair(conn_expiry_timeout=3.0, xmit_interval=1.0, stable_interval=100)
    _send(a, B, b"m1", b"m2", b"m3")
    w = down_messages(a, wire=True)
    b.up([w[0], w[2]], 0.0)
    assert up_payloads(b) == [b"m1"]
    a.close_connection(B, 0.0)
    _send(a, B, b"n1")
    down_messages(a, wire=True)  # lost
    for t in (1.0, 2.0, 3.0):
        a.tick(t)
        b.tick(t)
    assert b.stats()["recv_connections"] == 0 and b.stats()["reaped"] == 1
    assert b.stats()["tombstones"] == 1
    assert a.stats()["send_connections"] == 1 and a.stats()["reaped"] == 0
    b.up([w[1]], 3.5)  # the old connection's gap, far too late: not delivered
    assert up_payloads(b) == []


def test_unicast2_disconnect_closes_every_connection() -> None:
    a, _ = _pair()
    _send(a, B, b"x")
    _send(a, C, b"y")
    a.down_event(Disconnect(), 1.0)
    assert a.stats()["send_connections"] == 0 and a.take_down()[-1] == Disconnect()


# --- timers, properties, hostile input, stats ----------------------------------------------------


def test_unicast2_has_no_deadline_when_idle_and_ticks_move_it_forward() -> None:
    a, b = _pair(xmit_interval=0.5, stable_interval=2.0)
    assert a.next_deadline() == math.inf
    _send(a, B, b"x")
    b.up(down_messages(a, wire=True), 0.0)
    assert a.next_deadline() == 0.5 and b.next_deadline() == 0.5
    for t in (0.5, 1.0, 1.5, 2.0):
        before = b.next_deadline()
        b.tick(t)
        assert b.next_deadline() > before
    a.close_connection(B, 2.0)
    a.tick(2.0)
    assert a.next_deadline() == math.inf


def test_unicast2_property_changes_reschedule_the_timers() -> None:
    a, b = _pair(xmit_interval=0.5)
    _send(a, B, b"x")
    b.up(down_messages(a, wire=True), 0.0)
    b.set_property("xmit_interval", "200ms", 0.1)
    b.set_property("stable_interval", 5, 0.1)
    assert b.xmit_interval == pytest.approx(0.2) and b.next_deadline() == pytest.approx(0.3)
    b.tick(b.next_deadline())
    assert b.next_deadline() == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("prop", "value"),
    [
        ("xmit_interval", 0),
        ("stable_interval", -1),
        ("max_stable_msgs", 0),
        ("max_bytes", 0),
        ("max_retransmit_time", -1),
        ("conn_expiry_timeout", "soon"),
    ],
)
def test_unicast2_bad_property_values_name_the_property(prop: str, value: Any) -> None:
    with pytest.raises(PropertyError, match=f"UNICAST2.{prop}"):
        Unicast2(**{prop: value})


def test_unicast2_refuses_a_stack_with_unicast3() -> None:
    other = PassThrough()
    other.name = "UNICAST3"  # type: ignore[misc]
    with pytest.raises(PropertyError, match="UNICAST3"):
        Unicast2().check_stack([], [other])
    Unicast2().check_stack([PassThrough()], [])


def test_unicast2_malformed_headers_are_counted_and_dropped() -> None:
    _, b = _pair()
    bad = [
        Message(B, b"", src=A, headers={ID: Unicast2Header(9)}),
        Message(B, b"", src=A, headers={ID: Unicast2Header(DATA, 0, 1, True)}),
        Message(B, b"", headers={ID: Unicast2Header(DATA, 1, 1, True)}),
    ]
    b.up(bad, 0.0)
    assert up_payloads(b) == [] and b.stats()["malformed"] == 3


def test_unicast2_huge_seqno_does_not_stall_stats_or_timers() -> None:
    _, b = _pair(xmit_interval=0.5, max_receive_window=10**13)
    b.up([Message(B, b"1", src=A, headers={ID: Unicast2Header(DATA, 1, 1, True)})], 0.0)
    b.up([Message(B, b"x", src=A, headers={ID: Unicast2Header(DATA, 10**12, 1)})], 0.0)
    assert b.stats()["recv"]["A"]["missing"] == 10**12 - 2
    b.tick(0.5)
    b.tick(1.0)
    assert len(_of(down_messages(b, wire=True), XMIT_REQ)[0].missing) == 512


def test_unicast2_drops_messages_beyond_max_receive_window() -> None:
    """A sender that never fills its gaps (issue 18): B keeps at most
    ``max_receive_window`` seqnos of the connection ahead of the next one to deliver;
    what lies beyond is dropped and counted, and the window still fills and delivers."""
    a, b = _pair(max_receive_window=10)
    _send(a, B, *(b"m%d" % i for i in range(1, 21)))
    w = down_messages(a, wire=True)
    b.up([w[0]], 0.0)
    b.up(w[2:], 0.0)  # m2 lost: m3..m11 are kept, m12..m20 are beyond the window
    s = b.stats()
    assert s["dropped_beyond_window"] == 9 and s["recv_window_size"] == 9
    b.up([w[1]], 0.1)
    assert up_payloads(b) == [b"m%d" % i for i in range(1, 12)]
    b.up(w[11:], 0.2)
    assert up_payloads(b) == [b"m%d" % i for i in range(12, 21)]


def test_unicast2_serves_at_most_max_xmits_per_interval_to_one_peer() -> None:
    """XMIT_REQs from one peer are served for at most ``max_xmits_per_interval`` seqnos
    per ``xmit_interval``; the rest is counted as ``xmits_capped``, and a new interval
    brings a new budget (issue 18: a peer asking for everything again and again)."""
    a, _ = _pair(max_xmits_per_interval=5, xmit_interval=1.0)
    _send(a, B, *(b"m%d" % i for i in range(1, 9)))
    conn_id = down_messages(a, wire=True)[0].headers[ID].conn_id
    req = _ctrl(B, Unicast2Header(XMIT_REQ, conn_id=conn_id, missing=tuple(range(1, 9))))
    a.up(req, 0.0)
    assert [m.payload for m in down_messages(a, wire=True)] == [b"m%d" % i for i in range(1, 6)]
    a.up(req, 0.5)
    assert down_messages(a, wire=True) == []
    assert a.stats()["xmits_capped"] == 3 + 8 and a.stats()["retransmissions"] == 5
    a.up(req, 1.0)
    assert len(down_messages(a, wire=True)) == 5


def test_unicast2_stats_report_connections_windows_and_counters() -> None:
    a, b = _pair()
    _send(a, B, b"m1", b"m2", b"m3")
    w = down_messages(a, wire=True)
    b.up([w[0], w[2]], 0.0)
    s = b.stats()
    assert s["recv"]["A"] == {
        "conn_id": w[0].headers[ID].conn_id,
        "low": 1,
        "high": 3,
        "size": 1,
        "missing": 1,
    }
    assert s["recv_connections"] == 1 and s["recv_window_size"] == 1
    assert a.stats()["msgs_sent"] == 3 and a.stats()["send_window_size"] == 3
    for key in (
        "xmit_reqs_sent",
        "xmit_reqs_received",
        "retransmissions",
        "stable_sent",
        "stable_received",
        "send_first_seqno_sent",
        "send_first_seqno_received",
        "connections_opened",
        "dropped_beyond_window",
        "xmits_capped",
    ):
        assert key in s
