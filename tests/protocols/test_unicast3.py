"""UNICAST3 (seeds 001 and 000) on the sans-IO object: two peers joined by hand.

Each test drives `Unicast3` objects with explicit ``now`` and asserts what
each one emitted, h11 style. Messages cross the real wire codec, so every
header is also encoded and decoded.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from triogroups import Address, Flag, Message, PropertyError, View
from triogroups.events import FlushDone, FlushRequest
from triogroups.extend import Disconnect
from triogroups.protocols import ids
from triogroups.protocols.unicast3 import Unicast3, Unicast3Header
from triogroups.protocols.unicast3._common import (
    ACK,
    DATA,
    SEND_FIRST_SEQNO,
    XMIT_REQ,
    State,
    next_timestamp,
    timestamp_newer,
)
from triogroups.testing import SansIOMember, SansIONetwork
from triogroups.transports.sim import SimTransport
from triogroups.wire import WireCodec

ID = ids.UNICAST3
_views = iter(range(1, 1_000_000))


class Node(SansIOMember):
    """A test-kit member running one UNICAST3, named as these tests use it: ``proto``,
    payloads in ``delivered``, ``install(*members)``, ticks run by hand (due or not)."""

    def __init__(self, name: str, uuid: int, **props: object) -> None:
        super().__init__(SansIONetwork(), Address(uuid, name), [Unicast3(**props)])

    @property
    def proto(self) -> Unicast3:
        proto = self.top
        assert isinstance(proto, Unicast3)
        return proto

    @property
    def delivered(self) -> list[bytes]:  # type: ignore[override]
        return self.payloads

    def tick(self, now: float | None = None, *, force: bool = True) -> list[Message]:
        return super().tick(now, force=force)

    def install(self, *members: Node, now: float) -> list[Message]:  # type: ignore[override]
        view = View.create(members[0].address, next(_views), [m.address for m in members])
        return super().install(view, now)


def pair(**props: object) -> tuple[Node, Node]:
    return Node("A", 1, **props), Node("B", 2, **props)


def kinds(msgs: Iterable[Message]) -> list[str]:
    """Headers as short strings, e.g. ["DATA(#1, conn_id=0, first)", "ACK(#3, ...)"]."""
    return [repr(m.headers[ID]) for m in msgs]


def of_type(msgs: Iterable[Message], kind: int) -> list[Message]:
    return [m for m in msgs if m.headers[ID].type == kind]


def seqnos(msgs: Iterable[Message]) -> list[int]:
    return [m.headers[ID].seqno for m in msgs]


def payloads(*items: int) -> list[bytes]:
    return [str(i).encode() for i in items]


def send_range(a: Node, b: Node, first: int, last: int, now: float) -> list[Message]:
    return a.send(b, *payloads(*range(first, last + 1)), now=now)


# --- properties ---------------------------------------------------------------------


def test_unicast3_defaults_are_jgroups() -> None:
    p = Unicast3()
    assert (p.xmit_interval, p.ack_threshold, p.sync_min_interval) == (0.5, 100, 2.0)
    assert (p.conn_expiry_timeout, p.conn_close_timeout, p.max_retransmit_time) == (
        120.0,
        240.0,
        60.0,
    )
    assert Unicast3(xmit_interval="200ms").xmit_interval == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("prop", "value"),
    [("xmit_interval", 0), ("ack_threshold", 0), ("conn_close_timeout", -1), ("nope", 1)],
)
def test_unicast3_bad_property_names_protocol_and_property(prop: str, value: object) -> None:
    with pytest.raises(PropertyError, match=f"UNICAST3.*{prop}"):
        Unicast3(**{prop: value})


# --- pass-through, loopback, OOB --------------------------------------------------------


def test_multicasts_and_no_reliability_pass_through_untouched() -> None:
    a, b = pair()
    mcast = Message(None, b"m")
    nrel = Message(b.address, b"n", flags=Flag.NO_RELIABILITY)
    a.proto.down([mcast, nrel], 0.0)
    down = a.proto.take_down()
    assert down == [[mcast, nrel]] and not mcast.headers and not nrel.headers
    up = [
        Message(None, b"m", src=b.address),
        Message(a.address, b"n", src=b.address, flags=Flag.NO_RELIABILITY),
    ]
    assert a.receive(up, 0.0) == [] and a.delivered == [b"m", b"n"]
    assert a.proto.next_deadline() == float("inf")  # no connection, no retransmit task


def test_unicast_to_self_is_delivered_locally_in_order() -> None:
    a, _ = pair()
    out = a.send(a, b"1", b"2", now=0.0)
    out += a.send(a, b"3", now=0.0, flags=Flag.OOB)
    out += a.send(a, b"x", now=0.0, flags=Flag.DONT_LOOPBACK)
    assert out == [] and a.delivered == [b"1", b"2", b"3"]
    assert a.stats()["loopbacks"] == 3 and a.stats()["send_conns"] == {}


def test_oob_is_delivered_once_and_regular_order_is_kept() -> None:
    a, b = pair()
    msgs = a.send(b, b"r1", now=0.0) + a.send(b, b"o2", now=0.0, flags=Flag.OOB)
    msgs += a.send(b, b"r3", now=0.0)
    b.receive([msgs[0], msgs[2]], 0.1)  # r3 waits for #2
    b.receive([msgs[1]], 0.2)
    b.receive([msgs[1]], 0.3)  # a duplicate of the OOB message is not delivered again
    assert b.delivered == [b"r1", b"o2", b"r3"]
    assert b.stats()["duplicates"] == 1


def test_oob_overtakes_a_gap() -> None:
    a, b = pair()
    msgs = send_range(a, b, 1, 2, 0.0) + a.send(b, b"o", now=0.0, flags=Flag.OOB)
    b.receive([msgs[0]], 0.1)
    b.receive([msgs[2]], 0.1)  # #2 lost: the OOB #3 does not wait for it
    assert b.delivered == [b"1", b"o"]
    b.receive([msgs[1]], 0.2)
    assert b.delivered == [b"1", b"o", b"2"]


# --- seed 001: data, acks, retransmission ---------------------------------------------------


def test_data_header_has_seqno_conn_id_and_first_on_seqno_1() -> None:
    a, b = pair()
    c = Node("C", 3)
    assert kinds(send_range(a, b, 1, 2, 0.0)) == [
        "DATA(#1, conn_id=0, first)",
        "DATA(#2, conn_id=0)",
    ]
    assert kinds(send_range(a, c, 1, 1, 0.0)) == ["DATA(#1, conn_id=1, first)"]


def test_acks_are_delayed_to_the_retransmit_task_and_cumulative() -> None:
    """One ack per batch at most, sent by the next run: ack(3) for a batch of #1-#3."""
    a, b = pair()
    assert b.receive(send_range(a, b, 1, 3, 0.0), 0.01) == []
    assert b.delivered == payloads(1, 2, 3)
    assert b.receive(send_range(a, b, 4, 5, 0.1), 0.11) == []
    acks = b.tick(0.5)
    assert kinds(acks) == ["ACK(#5, conn_id=0, ts=1)"]
    assert b.tick(1.0) == []  # nothing new: no ack
    a.receive(acks, 0.6)
    assert a.stats()["unacked"] == 0 and a.stats()["acks_received"] == 1


def test_ack_threshold_sends_one_ack_at_once() -> None:
    a, b = pair(ack_threshold=3)
    assert b.receive(send_range(a, b, 1, 2, 0.0), 0.01) == []
    out = b.receive(send_range(a, b, 3, 7, 0.0), 0.01)
    assert kinds(out) == ["ACK(#7, conn_id=0, ts=1)"]  # one ack for the batch
    assert b.tick(0.5) == []  # nothing pending any more


def test_duplicate_data_is_acked_again() -> None:
    """A resent message the receiver already has still earns an ack (else HS resends forever)."""
    a, b = pair()
    msgs = send_range(a, b, 1, 2, 0.0)
    b.receive(msgs, 0.01)
    assert len(b.tick(0.5)) == 1
    b.receive(msgs[1:], 0.6)
    assert kinds(b.tick(1.0)) == ["ACK(#2, conn_id=0, ts=2)"]
    assert b.delivered == payloads(1, 2) and b.stats()["duplicates"] == 1


def test_sender_resends_highest_sent_only_when_ha_hs_unchanged() -> None:
    a, b = pair()
    send_range(a, b, 1, 3, 0.0)
    assert a.tick(0.5) == []  # first run: remembers HA=0/HS=3
    assert kinds(a.tick(1.0)) == ["DATA(#3, conn_id=0)"]
    assert kinds(a.tick(1.5)) == ["DATA(#3, conn_id=0)"]
    send_range(a, b, 4, 4, 1.6)
    assert a.tick(2.0) == []  # HS moved: no resend this run
    assert seqnos(a.tick(2.5)) == [4]
    assert a.stats()["retransmissions"] == 3


def test_unicast3_scenario_seed_example_ha45_hs50() -> None:
    """Seed 001's example: HA=45, HS=50, B misses 46, 48 and 50; A resends 50, B asks for 46, 48."""
    a, b = pair()
    msgs = send_range(a, b, 1, 50, 0.0)
    b.receive([*msgs[:45], msgs[46], msgs[48]], 0.01)
    a.receive(b.tick(0.5), 0.5)  # ack(45)
    assert b.delivered == payloads(*range(1, 46))
    assert a.stats()["send_conns"]["B"]["highest_acked"] == 45
    assert a.tick(0.5) == []  # records HA=45 / HS=50
    resent = a.tick(1.0)
    assert seqnos(resent) == [50]
    b.receive(resent, 1.0)
    req = of_type(b.tick(1.0), XMIT_REQ)
    assert [m.headers[ID].missing for m in req] == [(46, 48)]
    rsp = a.receive(req, 1.0)
    assert seqnos(rsp) == [46, 48]
    b.receive(rsp, 1.01)
    assert b.delivered == payloads(*range(1, 51))
    a.receive(b.tick(1.5), 1.5)
    assert a.stats()["send_conns"]["B"]["highest_acked"] == 50
    assert a.tick(2.0) == [] and a.tick(2.5) == []  # HA == HS: nothing resent


def test_xmit_req_only_for_gaps_known_at_the_previous_run() -> None:
    a, b = pair()
    msgs = send_range(a, b, 1, 6, 0.0)
    b.receive([msgs[0], msgs[2]], 0.01)  # gap: 2
    assert of_type(b.tick(0.5), XMIT_REQ) == []  # first seen: not asked yet
    b.receive([msgs[4]], 0.6)  # new gap: 4
    reqs = of_type(b.tick(1.0), XMIT_REQ)
    assert [m.headers[ID].missing for m in reqs] == [(2,)]
    reqs = of_type(b.tick(1.5), XMIT_REQ)
    assert [m.headers[ID].missing for m in reqs] == [(2, 4)]
    assert b.stats()["xmit_reqs_sent"] == 3 and b.stats()["xmit_req_msgs_sent"] == 2
    assert all(m.flags & Flag.OOB for m in reqs)


def test_xmit_req_is_capped_to_fit_one_datagram() -> None:
    transport = SimTransport(max_bundle_size=1024)
    a, b = pair()
    b.proto.check_stack([transport], [])
    assert b.proto.xmit_req_cap == (1024 - 128) // 9  # what a peer's request may hold
    cap = b.proto.request_cap(a.address)
    assert 0 < cap < b.proto.xmit_req_cap
    msgs = send_range(a, b, 1, 2000, 0.0)
    b.receive([msgs[0], msgs[-1]], 0.01)
    b.tick(0.5)
    (req,) = of_type(b.tick(1.0), XMIT_REQ)
    assert req.headers[ID].missing == tuple(range(2, 2 + cap))
    WireCodec("test", max_size=1024).encode(a.address, b.address, [req])  # fits
    assert Unicast3(max_xmit_req_size=10).xmit_req_cap == 10


def test_largest_xmit_req_fits_one_bundle_with_long_names_and_huge_seqnos() -> None:
    """JGRP-1868 for UNICAST3: the request is capped by its encoded size, so it fits
    a bundle even with a 255-byte cluster name, long member names and 9-byte seqnos."""
    cluster, size = "c" * 255, 4096
    a = Address(1, "sender-" + "a" * 100)
    b = Address(2, "receiver-" + "b" * 100)
    proto = Unicast3()
    proto.start(b, cluster, 0.0)
    proto.check_stack([SimTransport(max_bundle_size=size)], [])
    base = 2**40
    data = [
        Message(b, b"x", src=a, headers={ID: Unicast3Header(DATA, s, 0, first=s == base + 1)})
        for s in (base + 1, base + 5000)
    ]
    proto.up(data, 0.0)
    proto.tick(1.0)
    proto.tick(2.0)
    reqs = [m for item in proto.take_down() if isinstance(item, list) for m in item]
    (req,) = [m for m in reqs if m.headers[ID].type == XMIT_REQ]
    encoded = WireCodec(cluster, max_size=size).encode(a, b, [req])  # ValueError if too big
    assert len(encoded) <= size
    assert len(req.headers[ID].missing) == proto.request_cap(a) > 300


def _answer(a: Node, b: Node, reqs: list[Message], now: float) -> None:
    """``a`` answers ``b``'s XMIT_REQs and ``b`` receives the retransmissions."""
    b.receive(a.receive(reqs, now), now)


def test_capped_xmit_req_is_never_followed_by_an_empty_one() -> None:
    """Issue 12 item 3: every other message lost, requests capped at 10 seqnos.

    Each run after the first asks for the next 10 old gaps; JGroups' rule (keep
    only the capped list's highest seqno) made every other run ask for nothing.
    """
    a, b = pair(max_xmit_req_size=10)
    msgs = send_range(a, b, 1, 101, 0.0)
    b.receive(msgs[::2], 0.01)  # 1, 3, ... 101: 50 gaps
    assert of_type(b.tick(0.5), XMIT_REQ) == []  # first seen
    asked: list[tuple[int, ...]] = []
    t = 0.5
    while b.stats()["undelivered"] and t < 10:
        t += 0.5
        reqs = of_type(b.tick(t), XMIT_REQ)
        asked.extend(m.headers[ID].missing for m in reqs)
        _answer(a, b, reqs, t)
    assert b.delivered == payloads(*range(1, 102))
    assert [len(m) for m in asked] == [10] * 5
    assert b.stats()["xmit_req_msgs_sent"] == 5


def test_capped_xmit_req_asks_the_gaps_left_out_at_the_next_run() -> None:
    """A capped request is not lost: unanswered, the next runs ask the gaps after it,
    then wrap round to the lowest; only gaps seen at the previous run are asked."""
    a, b = pair(max_xmit_req_size=10)
    msgs = send_range(a, b, 1, 61, 0.0)
    b.receive(msgs[:41:2], 0.01)  # 1, 3, ... 41: 20 gaps
    b.tick(0.5)
    b.receive(msgs[42::2], 0.6)  # 43, ... 61: 10 new gaps, 42 ... 60
    runs = [[m.headers[ID].missing for m in of_type(b.tick(t), XMIT_REQ)] for t in (1.0, 1.5)]
    evens = tuple(range(2, 62, 2))
    assert runs == [[evens[:10]], [evens[10:20]]]  # 42.. were not seen at 0.5
    runs = [[m.headers[ID].missing for m in of_type(b.tick(t), XMIT_REQ)] for t in (2.0, 2.5)]
    assert runs == [[evens[20:30]], [evens[:10]]]


def test_xmit_req_for_unknown_seqnos_and_connections_is_harmless() -> None:
    a, b = pair()
    send_range(a, b, 1, 3, 0.0)
    req = Message(a.address, src=b.address, headers={ID: Unicast3Header(XMIT_REQ, missing=(2, 9))})
    assert seqnos(a.receive([req], 0.1)) == [2]
    c = Node("C", 3)
    req.src = c.address
    assert a.receive([req], 0.1) == []


# --- seed 001: connection states -------------------------------------------------------------


def test_idle_connections_go_closing_after_conn_expiry_timeout() -> None:
    a, b = pair(conn_expiry_timeout=10, conn_close_timeout=20)
    b.receive(send_range(a, b, 1, 1, 0.0), 0.0)
    a.receive(b.tick(0.5), 0.5)
    a.tick(9.5)
    b.tick(9.5)
    assert a.stats()["connections"] == {"OPEN": 1, "CLOSING": 0}
    a.tick(10.0)
    b.tick(10.5)
    assert a.stats()["send_conns"]["B"]["state"] == "CLOSING"
    assert b.stats()["recv_conns"]["A"]["state"] == "CLOSING"


def test_closing_send_connection_is_removed_with_close_and_receiver_removes_its_entry() -> None:
    a, b = pair(conn_expiry_timeout=10, conn_close_timeout=20)
    b.receive(send_range(a, b, 1, 2, 0.0), 0.0)
    a.receive(b.tick(0.5), 0.5)
    a.tick(10.0)  # -> CLOSING
    assert a.tick(29.5) == []
    close = a.tick(30.0)  # CLOSING for conn_close_timeout: CLOSED and removed, CLOSE sent
    assert kinds(close) == ["CLOSE(conn_id=0)"]
    assert a.stats()["send_conns"] == {} and a.stats()["send_conns_removed"] == 1
    assert b.receive(close, 30.0) == []
    assert b.stats()["recv_conns"] == {} and b.stats()["recv_conns_removed"] == 1
    # the next message opens a new connection (new conn id, first again)
    msgs = send_range(a, b, 3, 3, 31.0)
    assert kinds(msgs) == ["DATA(#1, conn_id=1, first)"]
    b.receive(msgs, 31.0)
    assert b.delivered == payloads(1, 2, 3)


def test_close_with_another_conn_id_does_not_remove_the_receiver_entry() -> None:
    a, b = pair()
    b.receive(send_range(a, b, 1, 1, 0.0), 0.0)
    close = Message(b.address, src=a.address, headers={ID: Unicast3Header(4, conn_id=7)})
    b.receive([close], 1.0)
    assert b.stats()["recv_conns"]["A"]["conn_id"] == 0


def test_unicast3_closed_receiver_entry_counts_as_missing() -> None:
    """Seed 001, receiver: "we also check for a CLOSED connection entry (counts the same as
    a null entry)". A's idle connection is reaped and its CLOSE sets B's entry to CLOSED
    (and removes it). A's next connection loses its first message, so B gets non-first
    messages while its entry for A is CLOSED: they are kept and the SEND_FIRST_SEQNO flag
    is set, exactly as at C, which never had an entry for A. A's answer, a first message,
    opens a new entry."""
    a, b = pair(conn_expiry_timeout=10, conn_close_timeout=20)
    c = Node("C", 3)
    b.receive(send_range(a, b, 1, 2, 0.0), 0.0)
    a.receive(b.tick(0.5), 0.5)
    entry = b.proto.receiver.entries[a.address]
    a.tick(10.0)
    close = a.tick(30.0)
    assert kinds(close) == ["CLOSE(conn_id=0)"]
    b.receive(close, 30.0)
    assert entry.state is State.CLOSED and a.address not in b.proto.receiver.entries
    new = send_range(a, b, 3, 5, 31.0)
    assert kinds(new[:1]) == ["DATA(#1, conn_id=1, first)"]
    for node in (b, c):  # #1 is lost: #2, #3 of the new connection arrive
        assert node.receive([m.copy() for m in new[1:]], 31.0) == []
        assert node.proto.receiver.sync_wanted == {a.address}  # the SEND_FIRST_SEQNO flag
        assert node.stats()["cached"] == 2 and node.stats()["recv_conns"] == {}
    assert b.delivered == payloads(1, 2) and c.delivered == []
    assert [m.headers[ID].type for m in c.tick(31.5)] == [SEND_FIRST_SEQNO]
    sync = b.tick(31.5)
    assert [m.headers[ID].type for m in sync] == [SEND_FIRST_SEQNO]
    answer = a.receive(sync, 31.5)
    assert kinds(answer) == ["DATA(#1, conn_id=1, first)"]
    b.receive(answer, 31.5)
    assert b.delivered == payloads(1, 2, 3, 4, 5)
    recv = b.stats()["recv_conns"]["A"]
    assert (recv["conn_id"], recv["state"]) == (1, "OPEN")
    assert b.stats()["recv_conns_opened"] == 2


def test_send_on_closing_connection_reopens_it() -> None:
    a, b = pair(conn_expiry_timeout=10, conn_close_timeout=20)
    b.receive(send_range(a, b, 1, 1, 0.0), 0.0)
    a.receive(b.tick(0.5), 0.5)
    a.tick(10.0)
    assert a.stats()["send_conns"]["B"]["state"] == "CLOSING"
    assert kinds(send_range(a, b, 2, 2, 15.0)) == ["DATA(#2, conn_id=0)"]  # same connection
    assert a.stats()["send_conns"]["B"]["state"] == "OPEN"
    assert a.tick(30.0) == [] and a.stats()["send_conns_reopened"] == 1


def test_data_on_closing_receive_entry_reopens_it() -> None:
    a, b = pair(conn_expiry_timeout=10, conn_close_timeout=20)
    b.receive(send_range(a, b, 1, 1, 0.0), 0.0)
    b.tick(10.0)
    assert b.stats()["recv_conns"]["A"]["state"] == "CLOSING"
    b.receive(send_range(a, b, 2, 2, 12.0), 12.0)
    assert b.stats()["recv_conns"]["A"]["state"] == "OPEN"


def test_closing_connection_to_a_member_is_flushed_before_removal() -> None:
    """CLOSING keeps resending HS while HA < HS; removal waits until everything is acked."""
    a, b = pair(conn_expiry_timeout=10, conn_close_timeout=20)
    a.install(a, b, now=0.0)
    msgs = send_range(a, b, 1, 2, 0.0)
    a.tick(10.0)  # -> CLOSING with #1-#2 unacked
    out: list[Message] = []
    for t in (30.0, 30.5, 31.0):
        out += a.tick(t)
    assert set(seqnos(out)) == {2} and a.stats()["send_conns"]["B"]["window"] == 2
    b.receive(msgs, 31.0)
    a.receive(b.tick(31.5), 31.5)
    assert kinds(a.tick(32.0)) == ["CLOSE(conn_id=0)"]
    assert a.stats()["msgs_given_up"] == 0


def test_view_change_closes_connections_of_members_that_left() -> None:
    a, b = pair()
    c = Node("C", 3)
    b.receive(send_range(a, b, 1, 1, 0.0), 0.0)
    send_range(b, a, 1, 1, 0.0)
    send_range(b, c, 1, 1, 0.0)
    b.install(b, c, now=1.0)
    st = b.stats()
    assert (
        st["send_conns"]["A"]["state"] == "CLOSING" and st["recv_conns"]["A"]["state"] == "CLOSING"
    )
    assert st["send_conns"]["C"]["state"] == "OPEN"
    b.install(a, b, c, now=2.0)
    assert b.stats()["connections"] == {"OPEN": 3, "CLOSING": 0}


def test_messages_to_a_non_member_that_never_answers_are_given_up() -> None:
    a, b = pair(conn_close_timeout=0)
    a.install(a, now=0.0)  # B is not a member
    send_range(a, b, 1, 3, 0.0)
    t = 0.5
    while t < 59.9:
        a.tick(t)
        t += 0.5
    assert a.stats()["send_conns"]["B"]["window"] == 3
    assert a.tick(60.0) == []  # no CLOSE to a non-member
    assert a.stats()["send_conns"] == {} and a.stats()["msgs_given_up"] == 3


def test_messages_to_a_member_are_never_given_up() -> None:
    """The rule "messages to a member that never answers are given up after
    max_retransmit_time, and the connection is removed", for a peer in the view. As in
    JGroups, max_retransmit_time is the timeout of UNICAST3's age-out cache, which holds
    only peers outside the installed view: UNICAST3 never gives up on a view member,
    however long it stays silent. A member that never answers is removed from the view
    by failure detection; from then on it is a non-member and what is still unacked is
    given up (here at the next run, as it has been silent longer than
    max_retransmit_time). For a peer outside the view see
    test_messages_to_a_non_member_that_never_answers_are_given_up and, in a whole stack,
    test_unicast3_scenario_member_that_never_answers_is_given_up."""
    a, b = pair()
    a.install(a, b, now=0.0)
    send_range(a, b, 1, 3, 0.0)
    for i in range(1, 200):
        a.tick(i * 0.5)
    assert a.stats()["send_conns"]["B"]["window"] == 3 and a.stats()["msgs_given_up"] == 0
    a.install(a, now=100.0)  # what failure detection and GMS do with a silent member
    assert a.tick(100.0) == []  # no CLOSE to a non-member
    assert a.stats()["send_conns"] == {} and a.stats()["msgs_given_up"] == 3


def test_unicast3_member_that_left_the_view_is_not_resent_to_and_its_window_is_dropped() -> None:
    """Issue 38: C was in A's view and left it (a graceful leave, or an exclusion) with
    #1-#3 unacked. The view without C drops A's send connection to C at once: the three
    messages are given up (counted), no CLOSE goes to C, and over the next 70 s (longer than
    max_retransmit_time) the retransmit task sends C nothing; B's connection is untouched."""
    a, b = pair()
    c = Node("C", 3)
    a.install(a, b, c, now=0.0)
    send_range(a, c, 1, 3, 0.0)
    send_range(a, b, 1, 1, 0.0)
    assert a.install(a, b, now=1.0) == []  # no CLOSE to the departed member
    st = a.stats()
    assert "C" not in st["send_conns"] and st["send_conns"]["B"]["state"] == "OPEN"
    assert st["msgs_given_up"] == 3 and st["send_conns_departed"] == 1
    out: list[Message] = []
    t = 1.5
    while t < 72.0:
        out += a.tick(t)
        t += 0.5
    assert [m for m in out if m.dest == c.address] == []
    assert a.stats()["retransmissions"] == len([m for m in out if m.dest == b.address]) > 0


def test_unicast3_member_excluded_then_merged_back_gets_a_new_connection() -> None:
    """C is excluded from A's view with #1-#2 unacked (they never reached it), then merged
    back: A's next unicast opens a new connection (a new conn_id, first) that C accepts and
    delivers, acks purge it, and nothing of the dropped window is ever resent."""
    a = Node("A", 1)
    c = Node("C", 3)
    a.install(a, c, now=0.0)
    c.install(a, c, now=0.0)
    old = send_range(a, c, 1, 2, 0.0)  # lost on the way
    a.install(a, now=1.0)
    a.install(a, c, now=5.0)  # the merge
    (msg,) = send_range(a, c, 3, 3, 5.0)
    hdr = msg.headers[ID]
    assert hdr.seqno == 1 and hdr.first and hdr.conn_id != old[0].headers[ID].conn_id
    c.receive([msg], 5.0)
    assert c.delivered == [b"3"]
    a.receive(c.tick(5.5), 5.5)
    assert a.stats()["unacked"] == 0
    assert [seqnos([m]) for m in a.tick(6.0) + a.tick(6.5) if m.dest == c.address] == []


def test_unicast3_leave_flush_is_answered_when_the_unacked_member_leaves_the_view() -> None:
    """Issue 37's flush beside issue 38's drop: a leaving A waits for B's ack only while B is
    a member; the view without B drops B's window, and the flush is answered (FlushDone)."""
    a, b = pair()
    c = Node("C", 3)
    a.install(a, b, c, now=0.0)
    send_range(a, b, 1, 1, 0.0)
    a.event_down(FlushRequest(), now=0.1)
    assert not [e for e in a.events if isinstance(e, FlushDone)]
    a.install(a, c, now=0.2)
    assert [e for e in a.events if isinstance(e, FlushDone)] == [FlushDone("UNICAST3")]


# --- seed 001: SEND_FIRST_SEQNO and first messages ----------------------------------------------


def test_send_first_seqno_is_a_flag_sent_by_the_retransmit_task() -> None:
    """First message lost: B asks (on its next run, not at once) and A resends #1 marked first."""
    a, b = pair()
    msgs = send_range(a, b, 1, 3, 0.0)
    assert b.receive(msgs[1:], 0.01) == []  # no window: cached, flag set, nothing sent
    assert b.delivered == []
    sync = b.tick(0.5)
    assert kinds(sync) == ["SEND_FIRST_SEQNO(ts=1)"] and sync[0].flags & Flag.OOB
    first = a.receive(sync, 0.5)
    assert kinds(first) == ["DATA(#1, conn_id=0, first)"]
    b.receive(first, 0.51)
    assert b.delivered == payloads(1, 2, 3)  # the cached #2, #3 joined the new window
    assert b.stats()["send_first_seqno_sent"] == 1 and a.stats()["send_first_seqno_received"] == 1


def test_send_first_seqno_answer_is_the_lowest_unacked_marked_first() -> None:
    a, b = pair()
    msgs = send_range(a, b, 1, 5, 0.0)
    b.receive(msgs[:2], 0.01)
    a.receive(b.tick(0.5), 0.5)  # ack(2)
    sync = Message(a.address, src=b.address, headers={ID: Unicast3Header(2, timestamp=9)})
    answer = a.receive([sync], 1.0)
    assert kinds(answer) == ["DATA(#3, conn_id=0, first)"]
    stored = a.proto.sender.entries[b.address].table.get(3)
    assert stored is not None and not stored.headers[ID].first  # the window copy is unchanged


def test_batch_with_a_first_message_adds_it_before_the_others() -> None:
    a, b = pair()
    msgs = send_range(a, b, 1, 3, 0.0)
    b.receive([msgs[1], msgs[2], msgs[0]], 0.01)
    assert b.delivered == payloads(1, 2, 3)
    assert of_type(b.tick(0.5), SEND_FIRST_SEQNO) == []
    assert b.stats()["cached"] == 0


def test_first_message_of_a_newer_connection_replaces_the_window() -> None:
    a, b = pair()
    b.receive(send_range(a, b, 1, 2, 0.0), 0.0)
    a.proto.sender.entries.clear()  # A lost its connection state: the next send opens conn 1
    new = send_range(a, b, 3, 4, 1.0)
    assert kinds(new) == ["DATA(#1, conn_id=1, first)", "DATA(#2, conn_id=1)"]
    b.receive(new, 1.0)
    assert b.delivered == payloads(1, 2, 3, 4) and b.stats()["recv_conns"]["A"]["conn_id"] == 1


def test_data_of_a_newer_connection_without_first_wants_a_sync() -> None:
    a, b = pair()
    b.receive(send_range(a, b, 1, 2, 0.0), 0.0)
    a.proto.sender.entries.clear()
    new = send_range(a, b, 3, 4, 1.0)
    b.receive(new[1:], 1.0)  # conn 1 #2: B's window is conn 0
    assert kinds(of_type(b.tick(1.5), SEND_FIRST_SEQNO)) == ["SEND_FIRST_SEQNO(ts=2)"]


def test_late_first_message_of_an_older_connection_is_ignored() -> None:
    a, b = pair()
    old = send_range(a, b, 1, 1, 0.0)
    b.receive(old, 0.0)
    a.proto.sender.entries.clear()
    b.receive(send_range(a, b, 2, 2, 1.0), 1.0)  # conn 1 opens
    b.receive(old, 1.1)  # a late duplicate of conn 0's first message
    assert b.stats()["recv_conns"]["A"]["conn_id"] == 1 and b.delivered == payloads(1, 2)


# --- seed 000: timestamps --------------------------------------------------------------------


def test_timestamps_come_from_one_counter_starting_at_1() -> None:
    a, b = pair()
    c = Node("C", 3)
    b.receive(send_range(a, b, 2, 3, 0.0)[1:], 0.0)  # no window from A: sync wanted
    b.receive(send_range(c, b, 1, 1, 0.0), 0.0)
    out = b.tick(0.5)
    stamps = sorted(m.headers[ID].timestamp for m in out)
    assert stamps == [1, 2] and {m.headers[ID].type for m in out} == {ACK, SEND_FIRST_SEQNO}


def test_timestamp_comparison_is_safe_across_wraparound() -> None:
    top = 2**32 - 1
    assert next_timestamp(0) == 1 and next_timestamp(1) == 2 and next_timestamp(top) == 1
    assert timestamp_newer(2, 1) and not timestamp_newer(1, 2) and not timestamp_newer(5, 5)
    assert timestamp_newer(1, top) and timestamp_newer(3, top - 2)
    assert not timestamp_newer(top, 1) and not timestamp_newer(top - 2, 3)


def test_sender_drops_ack_whose_timestamp_is_not_newer() -> None:
    a, b = pair(ack_threshold=1)
    msgs = send_range(a, b, 1, 4, 0.0)
    ack2 = b.receive(msgs[:2], 0.0)
    ack4 = b.receive(msgs[2:], 0.0)
    assert kinds(ack2 + ack4) == ["ACK(#2, conn_id=0, ts=1)", "ACK(#4, conn_id=0, ts=2)"]
    a.receive(ack4, 0.1)
    a.receive(ack2, 0.1)  # reordered: older timestamp
    a.receive(ack4, 0.1)  # duplicated: same timestamp
    st = a.stats()
    assert st["acks_received"] == 1 and st["acks_dropped_stale"] == 2
    assert st["send_conns"]["B"]["last_timestamp"] == 2


def test_sender_drops_send_first_seqno_whose_timestamp_is_not_newer() -> None:
    a, b = pair()
    send_range(a, b, 1, 2, 0.0)

    def sync(ts: int) -> Message:
        return Message(a.address, src=b.address, headers={ID: Unicast3Header(2, timestamp=ts)})

    assert len(a.receive([sync(5)], 0.1)) == 1
    assert a.receive([sync(5)], 0.2) == [] and a.receive([sync(4)], 0.2) == []
    assert a.stats()["send_first_seqno_dropped"] == 2


def test_timestamps_survive_the_counter_wrapping() -> None:
    a, b = pair(ack_threshold=1)
    b.proto.receiver.timestamper = 2**32 - 2
    msgs = send_range(a, b, 1, 3, 0.0)
    acks = [b.receive([m], 0.0)[0] for m in msgs]
    assert [m.headers[ID].timestamp for m in acks] == [2**32 - 1, 1, 2]
    a.receive(acks, 0.1)
    assert a.stats()["acks_received"] == 3 and a.stats()["unacked"] == 0
    a.receive(acks[:1], 0.2)
    assert a.stats()["acks_dropped_stale"] == 1


# --- seed 000: sync_min_interval and last-sync-sent ----------------------------------------------


def test_at_most_one_send_first_seqno_per_sync_min_interval() -> None:
    a, b = pair()
    msgs = send_range(a, b, 1, 40, 0.0)
    sent_at = []
    t = 0.0
    for i in range(1, 13):  # the answers never come; A's messages keep arriving
        b.receive([msgs[i]], t + 0.01)
        t = i * 0.5
        if of_type(b.tick(t), SEND_FIRST_SEQNO):
            sent_at.append(t)
    assert sent_at == [0.5, 2.5, 4.5]
    st = b.stats()
    assert st["send_first_seqno_sent"] == 3 and st["send_first_seqno_suppressed"] > 0


def test_last_sync_sent_entries_expire() -> None:
    a, b = pair()
    b.receive(send_range(a, b, 1, 2, 0.0)[1:], 0.0)
    b.tick(0.5)
    assert a.address in b.proto.receiver.last_sync_sent
    b.tick(2.5)
    assert b.proto.receiver.last_sync_sent == {} and b.stats()["cache_size"] == 0
    assert b.proto.next_deadline() == float("inf")  # nothing left: the task stops


def _split_and_forget(a: Node, b: Node, t: float) -> float:
    """B installs a view without A (asymmetric split); its window for A is reaped and forgotten."""
    b.install(b, now=t)
    for _ in range(4):  # CLOSING -> removed after conn_close_timeout, floor expires after another
        t += 2.0
        b.tick(t)
    assert b.stats()["recv_conns"] == {} and b.stats()["floors"] == 0
    return t


def test_unicast3_scenario_jgrp1873_delayed_ack_after_resync() -> None:
    """Seed 000 bug #2: a delayed ACK arriving after a resync must not purge unseen messages.

    B acks #1-#5 but the ACK is delayed. B drops A (asymmetric split) and forgets its
    window. A sends #6-#8; B syncs (SEND_FIRST_SEQNO) and A answers with its lowest
    unacked, #1, from which B's new window starts. Then the old ACK(5) arrives: its
    timestamp is older than the SEND_FIRST_SEQNO's, so A drops it and still has #2-#5
    when B asks for them. Without the timestamp, A would purge #1-#5 and B would ask
    for #2-#5 forever.

    B delivers #1-#5 a second time, deliberately and as in JGroups. B removed its window
    for A, and A being a non-member then, its floor expired too: B keeps no record that
    it delivered #1-#5. A never took an ack for them (the only one is the delayed ACK,
    which must be dropped), so its lowest unacked message is #1, and B's new window
    starts there. A's connection is the same (conn_id 0); only B's receive window is
    new. The seed asks that every message is delivered and that retransmission ends,
    both asserted at the end; exactly-once cannot hold across B forgetting A's window.
    """
    a, b = pair(conn_close_timeout=2.0)
    b.receive(send_range(a, b, 1, 5, 0.0), 0.0)
    delayed_ack = b.tick(0.5)
    assert kinds(delayed_ack) == ["ACK(#5, conn_id=0, ts=1)"]
    t = _split_and_forget(a, b, 1.0)
    b.install(a, b, now=t)  # the split heals
    b.receive(send_range(a, b, 6, 8, t), t)
    sync = b.tick(t + 0.5)
    assert kinds(sync) == ["SEND_FIRST_SEQNO(ts=2)"]
    answer = a.receive(sync, t + 0.5)
    assert kinds(answer) == ["DATA(#1, conn_id=0, first)"]
    a.receive(delayed_ack, t + 0.5)  # the delayed ack arrives after the resync
    assert a.stats()["acks_dropped_stale"] == 1 and a.stats()["unacked"] == 8
    b.receive(answer, t + 0.5)
    wire: list[Message] = []
    for i in range(2, 8):  # let the two run against each other
        now = t + i * 0.5
        wire = a.receive(b.tick(now), now)
        b.receive(wire, now)
        b.receive(a.tick(now), now)
    assert b.delivered == payloads(1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 6, 7, 8)
    assert of_type(b.tick(t + 5), XMIT_REQ) == [] and a.stats()["unacked"] == 0


# --- floors: a reaped window resumes where it stopped ---------------------------------------------


def test_reaped_receive_window_resumes_from_its_floor_without_duplicates() -> None:
    """B reaps its window for A (a member) while A still resends #3, whose ack was lost."""
    a, b = pair(conn_expiry_timeout=5, conn_close_timeout=5)
    a.install(a, b, now=0.0)
    b.install(a, b, now=0.0)
    msgs = send_range(a, b, 1, 3, 0.0)
    b.receive(msgs, 0.0)
    b.tick(0.5)  # the ACK(3) is lost
    for t in (5.0, 10.0):
        b.tick(t)
    assert b.stats()["recv_conns"] == {} and b.stats()["floors"] == 1
    b.receive([msgs[2]], 10.5)  # A's HS resend: revives the window at #3, no sync
    ack = b.tick(11.0)
    assert kinds(ack) == ["ACK(#3, conn_id=0, ts=2)"] and b.delivered == payloads(1, 2, 3)
    a.receive(ack, 11.0)
    assert a.stats()["unacked"] == 0 and b.stats()["send_first_seqno_sent"] == 0


def test_floor_remembers_oob_messages_delivered_above_a_gap() -> None:
    """A window reaped with a gap keeps its delivered OOB seqnos: no second delivery on revival."""
    a, b = pair(conn_expiry_timeout=5, conn_close_timeout=5)
    a.install(a, b, now=0.0)
    b.install(a, b, now=0.0)
    msgs = send_range(a, b, 1, 2, 0.0) + a.send(b, b"o", now=0.0, flags=Flag.OOB)
    b.receive([msgs[0]], 0.0)
    b.receive([msgs[2]], 0.0)  # #2 lost, the OOB #3 is delivered at once
    for t in (5.0, 10.0):
        b.tick(t)
    assert b.stats()["recv_conns"] == {}
    b.receive([msgs[2]], 10.5)  # A's HS resend revives the window
    b.receive([msgs[1]], 10.6)
    assert b.delivered == [b"1", b"o", b"2"]


def test_close_leaves_a_floor_that_drops_late_messages_of_that_connection() -> None:
    a, b = pair()
    msgs = send_range(a, b, 1, 1, 0.0)
    b.receive(msgs, 0.0)
    close = Message(b.address, src=a.address, headers={ID: Unicast3Header(4, conn_id=0)})
    b.receive([close], 1.0)
    b.receive(msgs, 1.1)  # a late duplicate of the closed connection's first message
    assert b.delivered == payloads(1) and b.stats()["recv_conns"] == {}
    assert b.stats()["stale"] == 1


# --- robustness, events, stats ------------------------------------------------------------------


@pytest.mark.parametrize(
    "hdr",
    [
        Unicast3Header(DATA, 0),
        Unicast3Header(DATA, 1, conn_id=70_000),
        Unicast3Header(ACK, 1, timestamp=0),
        Unicast3Header(ACK, -1, timestamp=1),
        Unicast3Header(SEND_FIRST_SEQNO, timestamp=2**32),
        Unicast3Header(XMIT_REQ, missing=(0,)),
        Unicast3Header(XMIT_REQ, missing=tuple(range(1, 10_000))),
        Unicast3Header(9),
    ],
)
def test_malformed_headers_are_dropped_and_counted(hdr: Unicast3Header) -> None:
    a, b = pair()
    send_range(a, b, 1, 1, 0.0)
    assert a.receive([Message(a.address, src=b.address, headers={ID: hdr})], 0.0) == []
    assert a.delivered == [] and a.stats()["malformed"] == 1


def test_disconnect_sends_pending_acks() -> None:
    a, b = pair()
    b.receive(send_range(a, b, 1, 2, 0.0), 0.0)
    b.proto.down_event(Disconnect(), 0.1)
    down = b.proto.take_down()
    assert isinstance(down[0], list) and kinds(down[0]) == ["ACK(#2, conn_id=0, ts=1)"]
    assert down[1] == Disconnect()


def test_retransmit_task_runs_every_xmit_interval_while_there_is_state() -> None:
    a, b = pair(xmit_interval=0.25)
    assert a.proto.next_deadline() == float("inf")
    send_range(a, b, 1, 1, 1.0)
    assert a.proto.next_deadline() == 1.25
    a.tick(1.25)
    assert a.proto.next_deadline() == 1.5
    a.proto.set_property("xmit_interval", 1.0, 1.3)
    assert a.proto.next_deadline() == 2.3


def test_stats_show_connections_windows_and_counters() -> None:
    a, b = pair()
    msgs = send_range(a, b, 1, 3, 0.0)
    b.receive([msgs[0], msgs[2]], 0.0)
    st = b.stats()
    assert st["recv_conns"]["A"] == {
        "conn_id": 0,
        "state": "OPEN",
        "highest_delivered": 1,
        "highest_received": 3,
        "window": 1,
        "missing": 1,
        "ack_pending": True,
    }
    assert a.stats()["send_conns"]["B"] == {
        "conn_id": 0,
        "state": "OPEN",
        "highest_acked": 0,
        "highest_sent": 3,
        "window": 3,
        "last_timestamp": 0,
    }
    assert st["connections"] == {"OPEN": 1, "CLOSING": 0}
    for key in (
        "acks_sent",
        "acks_received",
        "xmit_reqs_sent",
        "xmit_reqs_received",
        "send_first_seqno_sent",
        "send_first_seqno_received",
        "send_first_seqno_dropped",
        "retransmissions",
        "msgs_given_up",
    ):
        assert key in st


# --- limits against abuse (issue 18) -----------------------------------------------------


def test_unicast3_serves_at_most_max_xmits_per_interval_to_one_peer() -> None:
    """A peer asking for its whole window again and again gets ``max_xmits_per_interval``
    messages per xmit_interval; the rest is counted as ``xmits_capped``."""
    a, b = pair(max_xmits_per_interval=3, xmit_interval=0.5)
    send_range(a, b, 1, 5, 0.0)
    hdr = Unicast3Header(XMIT_REQ, missing=(1, 2, 3, 4, 5))
    req = Message(a.address, src=b.address, headers={ID: hdr})
    assert [len(a.receive([req], t)) for t in (0.1, 0.2, 0.6)] == [3, 0, 3]
    assert a.stats()["xmits_capped"] == 2 + 5 + 2


def test_unicast3_drops_messages_beyond_max_receive_window() -> None:
    """A sender that skips far ahead cannot make the receiver buffer more than
    ``max_receive_window`` seqnos of its connection."""
    a, b = pair(max_receive_window=10)
    msgs = send_range(a, b, 1, 21, 0.0)
    b.receive(msgs[:1] + msgs[2:], 0.01)  # 2 lost: 3..11 are kept, 12..21 are beyond
    assert b.stats()["dropped_beyond_window"] == 10
    b.receive(msgs[1:2], 0.02)
    assert b.delivered == payloads(*range(1, 12))
