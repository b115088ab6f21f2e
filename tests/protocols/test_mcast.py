"""MCAST (seed 004) on the sans-IO object: one test per rule, with explicit ``now``."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from triogroups import Address, Digest, Flag, Message, PropertyError, StackConfig
from triogroups.events import (
    BecomeServer,
    DigestReply,
    Disconnect,
    GetDigest,
    MergeDigest,
    SetDigest,
    StableDigest,
    TmpView,
    ViewChange,
)
from triogroups.protocols import ids
from triogroups.protocols.mcast import (
    ACK,
    MSG,
    PURGED,
    XMIT_REQ,
    XMIT_RSP,
    Mcast,
    McastHeader,
    as_header,
)
from triogroups.testing import addresses, down_messages, split, started, up_messages, view_of
from triogroups.wire import WireCodec

A, B, C, D = addresses("ABCD")


def _mcast(me: Address = A, members: tuple[Address, ...] = (A, B, C), **props: Any) -> Mcast:
    return started(Mcast(**props), me, view=view_of(*members))


def _hdr(msg: Message) -> McastHeader:
    hdr = as_header(msg.headers[ids.MCAST])
    assert isinstance(hdr, McastHeader)
    return hdr


def _data(sender: Address, seqno: int, payload: bytes = b"", *, flags: int = 0) -> Message:
    payload = payload or f"{sender}{seqno}".encode()
    return Message(
        None, payload, src=sender, flags=flags, headers={ids.MCAST: McastHeader(MSG, seqno)}
    )


def _ack(frm: Address, seqno: int, to: Address = A) -> Message:
    return Message(to, src=frm, headers={ids.MCAST: McastHeader(ACK, seqno)})


def _looped_back(sent: list[Message], me: Address = A) -> list[Message]:
    """What the transport hands up for our own multicasts: copies stamped with our address."""
    copies = [m.copy() for m in sent]
    for m in copies:
        m.src = me
    return copies


def _send(proto: Mcast, count: int, now: float = 0.0, *, flags: int = 0) -> list[Message]:
    proto.down([Message(None, f"m{i}".encode(), flags=flags) for i in range(count)], now)
    return down_messages(proto)


# --- sending ------------------------------------------------------------------------


def test_mcast_send_assigns_consecutive_seqnos_and_keeps_each_message_in_the_window() -> None:
    proto = _mcast()
    sent = _send(proto, 5)
    assert [_hdr(m) for m in sent] == [McastHeader(MSG, s) for s in range(1, 6)]
    stats = proto.stats()
    assert stats["seqno"] == 5 and stats["send_window"] == {"low": 0, "high": 5, "size": 5}


def test_mcast_sender_blocks_when_seqno_minus_low_reaches_capacity() -> None:
    """Seed: S - low >= capacity blocks; the rest waits in order and parks the senders."""
    proto = _mcast(capacity=4)
    sent = _send(proto, 6)
    assert [_hdr(m).seqno for m in sent] == [1, 2, 3]
    assert proto.blocks_down()
    stats = proto.stats()
    assert stats["parked_messages"] == 3 and stats["blocked"] and stats["blockings"] == 1
    proto.down([Message(None, b"later")], 0.1)
    assert down_messages(proto) == [] and proto.stats()["parked_messages"] == 4


def test_mcast_parked_lists_the_multicasts_waiting_for_room_oldest_first() -> None:
    """What waits for room was taken but never numbered or sent: `parked` says which, so
    the test kit knows what a killed member's process took with it."""
    proto = _mcast(capacity=4)
    _send(proto, 2)
    assert proto.parked() == ()
    waiting = [Message(None, f"w{i}".encode()) for i in range(3)]
    proto.down(waiting, 0.1)
    assert [m.payload for m in proto.parked()] == [b"w1", b"w2"]
    assert all(ids.MCAST not in m.headers for m in proto.parked())


def test_mcast_unicasts_and_no_reliability_multicasts_pass_through_even_when_blocked() -> None:
    proto = _mcast(capacity=2)
    _send(proto, 2)
    assert proto.blocks_down()
    uni = Message(B, b"u")
    best_effort = Message(None, b"b", flags=Flag.NO_RELIABILITY)
    proto.down([uni, best_effort], 0.0)
    assert down_messages(proto) == [uni, best_effort]
    assert ids.MCAST not in uni.headers and ids.MCAST not in best_effort.headers


def test_mcast_acks_from_all_members_purge_to_the_minimum_and_send_parked_messages() -> None:
    proto = _mcast(capacity=4)
    _send(proto, 6, 0.0)
    up_messages(proto)
    proto.up([_ack(B, 3)], 1.0)
    assert down_messages(proto) == [] and proto.stats()["send_window"]["low"] == 0
    proto.up([_ack(B, 1)], 1.5)  # ack-map[P] = max(ack-map[P], ACK): an old ack changes nothing
    assert proto.stats()["ack_map"]["B"] == 3
    proto.up([_ack(C, 2)], 2.0)
    sent = down_messages(proto)
    assert [_hdr(m).seqno for m in sent] == [4, 5]
    stats = proto.stats()
    assert stats["min_ack"] == 2 and stats["send_window"] == {"low": 2, "high": 5, "size": 3}
    assert stats["ack_map"] == {"B": 3, "C": 2} and proto.blocks_down()
    proto.up([_ack(C, 5), _ack(B, 5)], 3.0)
    assert [_hdr(m).seqno for m in down_messages(proto)] == [6]
    assert not proto.blocks_down() and proto.stats()["time_blocked"] == pytest.approx(3.0)


def test_mcast_acks_from_non_members_are_ignored() -> None:
    proto = _mcast(capacity=4)
    _send(proto, 3)
    proto.up([_ack(D, 3)], 1.0)
    assert proto.stats()["acks_from_non_members"] == 1
    assert proto.stats()["send_window"]["low"] == 0 and "D" not in proto.stats()["ack_map"]


def test_mcast_view_change_recomputes_the_minimum_so_a_member_that_left_cannot_block() -> None:
    proto = _mcast(capacity=4)
    _send(proto, 5)
    proto.up([_ack(B, 3)], 1.0)
    assert proto.blocks_down()  # C never acks: it is dead
    proto.view_changed(view_of(A, B, counter=2), 2.0)
    assert [_hdr(m).seqno for m in down_messages(proto)] == [4, 5]
    assert proto.stats()["ack_map"] == {"B": 3} and not proto.blocks_down()


def test_mcast_alone_in_the_view_purges_at_once() -> None:
    proto = _mcast(members=(A,), capacity=2)
    assert len(_send(proto, 5)) == 5
    assert proto.stats()["send_window"] == {"low": 5, "high": 5, "size": 0}


def test_mcast_purges_nothing_before_the_first_view() -> None:
    """Choice: with no view nobody can ack yet, so the window keeps what was sent."""
    proto = Mcast(capacity=3)
    proto.start(A, "c", 0.0)
    proto.down([Message(None, b"1"), Message(None, b"2"), Message(None, b"3")], 0.0)
    assert len(down_messages(proto)) == 2 and proto.blocks_down()
    proto.view_changed(view_of(A), 1.0)
    assert len(down_messages(proto)) == 1 and not proto.blocks_down()


# --- receiving ----------------------------------------------------------------------------


def test_mcast_receiver_delivers_until_the_first_gap() -> None:
    proto = _mcast()
    proto.up([_data(B, 1), _data(B, 3), _data(B, 4)], 0.0)
    assert [m.payload for m in up_messages(proto)] == [b"B1"]
    proto.up([_data(B, 2)], 0.1)
    assert [m.payload for m in up_messages(proto)] == [b"B2", b"B3", b"B4"]
    assert proto.stats()["receive_windows"]["B"] == {"low": 4, "high": 4, "size": 0}


def test_mcast_receiver_drops_messages_outside_low_to_low_plus_capacity() -> None:
    proto = _mcast(capacity=4)
    proto.up([_data(B, 4), _data(B, 5)], 0.0)  # low=0: [0, 4) holds 1..3 only
    assert up_messages(proto) == [] and proto.stats()["dropped_outside_window"] == 2
    proto.up([_data(B, 3)], 0.0)
    assert up_messages(proto) == [] and proto.stats()["receive_windows"]["B"]["size"] == 1


def test_mcast_duplicates_are_not_delivered_twice_and_are_answered_with_an_ack() -> None:
    proto = _mcast()
    proto.up([_data(B, 1), _data(B, 3)], 0.0)
    up_messages(proto)
    down_messages(proto)
    proto.up([_data(B, 1), _data(B, 3), _data(B, 3)], 0.1)
    assert up_messages(proto) == [] and proto.stats()["duplicates"] == 3
    acks = down_messages(proto)
    assert [(m.dest, _hdr(m)) for m in acks] == [(B, McastHeader(ACK, 1))]


def test_mcast_control_multicast_never_waits_behind_the_applications_in_a_full_window() -> None:
    """A control multicast (INTERNAL: a VIEW, anything GMS sends) is stamped and sent at
    once when the window is full, past ``capacity`` if need be, however many come; the
    application's multicasts wait for room and follow it. (A coordinator whose window
    was full could not leave: its leave VIEW waited behind its parked multicasts.)"""
    proto = _mcast(capacity=4)
    assert [_hdr(m).seqno for m in _send(proto, 5)] == [1, 2, 3]  # two parked
    proto.down([Message(None, b"view", flags=Flag.INTERNAL), Message(None, b"later")], 0.1)
    assert [(m.payload, _hdr(m).seqno) for m in down_messages(proto)] == [(b"view", 4)]
    stats = proto.stats()
    assert stats["parked_messages"] == 3 and stats["controls_past_capacity"] == 1
    assert stats["send_window"] == {"low": 0, "high": 4, "size": 4}
    proto.down([Message(None, b"v%d" % i, flags=Flag.INTERNAL) for i in range(6)], 0.2)
    assert [_hdr(m).seqno for m in down_messages(proto)] == [5, 6, 7, 8, 9, 10]
    proto.up([_xmit_req(B, 4, 10)], 0.3)  # kept for retransmission like any other
    assert [(m.payload, _hdr(m)[:2]) for m in down_messages(proto)] == [
        (b"view", (XMIT_RSP, 4)),
        (b"v5", (XMIT_RSP, 10)),
    ]
    proto.up([_ack(B, 10), _ack(C, 10)], 0.4)
    assert [(m.payload, _hdr(m).seqno) for m in down_messages(proto)] == [
        (b"m3", 11),
        (b"m4", 12),
        (b"later", 13),
    ]
    assert not proto.blocks_down()
    receiver = _mcast(me=B, capacity=4)  # a member that delivered what came before takes it
    receiver.up([_data(A, 1), _data(A, 2), _data(A, 3), _data(A, 4, b"view")], 0.0)
    assert [m.payload for m in up_messages(receiver)][-1] == b"view"


def test_mcast_leaving_drops_the_parked_multicasts_and_blocks_no_sender_any_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A member that left (Disconnect from GMS) is acked by nobody: its parked multicasts
    were never sent and never will be. They are dropped, counted and said, the senders
    above are released, and later multicasts are dropped too instead of filling the
    window again; unicasts still pass. (A send blocked on a full window never returned
    after its member left.)"""
    proto = _mcast(capacity=4)
    _send(proto, 6, 0.0)
    assert proto.blocks_down() and proto.stats()["parked_messages"] == 3
    with caplog.at_level(logging.WARNING, logger="triogroups.protocols.mcast"):
        proto.down_event(Disconnect(), 1.0)
    proto.take_down()
    assert not proto.blocks_down()
    stats = proto.stats()
    assert stats["parked_messages"] == 0 and stats["dropped_after_leave"] == 3
    assert stats["time_blocked"] == pytest.approx(1.0) and stats["blocked_since"] is None
    (line,) = [r.getMessage() for r in caplog.records]
    assert "left the group with 3 multicasts still waiting for room" in line
    up_messages(proto)
    proto.down([Message(None, b"after"), Message(B, b"uni")], 2.0)
    assert [m.payload for m in down_messages(proto)] == [b"uni"]
    assert up_messages(proto) == [] and not proto.blocks_down()
    assert proto.stats()["dropped_after_leave"] == 4


def test_mcast_messages_from_members_without_a_window_are_dropped() -> None:
    proto = _mcast()
    proto.up([_data(D, 1)], 0.0)
    assert up_messages(proto) == [] and proto.stats()["dropped_no_window"] == 1


def test_mcast_oob_is_delivered_on_arrival_and_not_again_when_the_gap_fills() -> None:
    proto = _mcast()
    proto.up([_data(B, 2, flags=Flag.OOB), _data(B, 3)], 0.0)
    assert [m.payload for m in up_messages(proto)] == [b"B2"]  # regular #3 waits for #1
    proto.up([_data(B, 1)], 0.1)
    assert [m.payload for m in up_messages(proto)] == [b"B1", b"B3"]
    proto.up([_data(B, 2, flags=Flag.OOB)], 0.2)
    assert up_messages(proto) == [] and proto.stats()["receive_windows"]["B"]["low"] == 3


def test_mcast_own_multicasts_are_delivered_once_at_send_and_loopbacks_dropped() -> None:
    proto = _mcast(capacity=3)
    sent = _send(proto, 3)
    local = up_messages(proto)
    assert [(m.payload, m.src, m.dest) for m in local] == [(b"m0", A, None), (b"m1", A, None)]
    assert all(a is not b for a, b in zip(local, sent, strict=True))  # copies, not the window's
    assert all(m.flags & Flag.DONT_LOOPBACK for m in sent)  # the transport must not copy them up
    proto.up(_looped_back(sent), 0.0)
    assert up_messages(proto) == [] and proto.stats()["loopbacks_dropped"] == 2
    proto.up([_ack(B, 2), _ack(C, 2)], 0.1)  # the parked #3 is delivered when it is sent
    assert [m.payload for m in up_messages(proto)] == [b"m2"]


def test_mcast_own_dont_loopback_multicast_is_not_delivered_locally() -> None:
    proto = _mcast()
    proto.down([Message(None, b"quiet", flags=Flag.DONT_LOOPBACK), Message(None, b"loud")], 0.0)
    assert [_hdr(m).seqno for m in down_messages(proto)] == [1, 2]
    assert [m.payload for m in up_messages(proto)] == [b"loud"]


# --- acks ---------------------------------------------------------------------------------


def test_mcast_receiver_acks_at_once_after_ack_threshold_deliveries() -> None:
    proto = _mcast(capacity=16)  # default ack_threshold: capacity // 4 = 4
    proto.up([_data(B, s) for s in (1, 2, 3)], 0.0)
    assert down_messages(proto) == []
    proto.up([_data(B, 4)], 0.1)
    assert [(m.dest, _hdr(m)) for m in down_messages(proto)] == [(B, McastHeader(ACK, 4))]
    proto.set_property("ack_threshold", 1, 0.2)
    proto.up([_data(B, 5)], 0.3)
    assert [_hdr(m) for m in down_messages(proto)] == [McastHeader(ACK, 5)]


def test_mcast_receiver_acks_what_it_delivered_every_xmit_interval() -> None:
    proto = _mcast(capacity=64, xmit_interval=0.5)
    proto.up([_data(B, 1), _data(C, 1), _data(C, 2)], 0.1)
    assert down_messages(proto) == []
    assert proto.next_deadline() == pytest.approx(0.5)
    proto.tick(0.5)
    acks = {m.dest: _hdr(m) for m in down_messages(proto) if _hdr(m).type == ACK}
    assert acks == {B: McastHeader(ACK, 1), C: McastHeader(ACK, 2)}
    proto.tick(1.0)
    assert [m for m in down_messages(proto) if _hdr(m).type == ACK] == []  # nothing new delivered
    assert proto.next_deadline() == pytest.approx(1.5)


# --- retransmission -------------------------------------------------------------------------


def test_mcast_receiver_sends_xmit_req_for_missing_seqnos_every_xmit_interval() -> None:
    proto = _mcast(xmit_interval=0.5)
    proto.up([_data(B, 1), _data(B, 4), _data(B, 6)], 0.1)
    down_messages(proto)
    proto.tick(0.5)
    reqs = [m for m in down_messages(proto) if _hdr(m).type == XMIT_REQ]
    assert [(m.dest, _hdr(m).missing) for m in reqs] == [(B, (2, 3, 5))]
    assert proto.stats()["xmit_reqs_sent"] == 1
    proto.up([_data(B, 2), _data(B, 3), _data(B, 5)], 0.6)
    down_messages(proto)
    proto.tick(1.0)
    assert [m for m in down_messages(proto) if _hdr(m).type == XMIT_REQ] == []


def test_mcast_xmit_req_is_answered_with_the_original_message_sent_to_the_requester() -> None:
    proto = _mcast()
    sent = _send(proto, 3)
    req = Message(A, src=B, headers={ids.MCAST: McastHeader(XMIT_REQ, 0, None, (2, 3, 9))})
    proto.up([req], 1.0)
    out = down_messages(proto)
    assert [(m.dest, m.payload, _hdr(m)) for m in out] == [
        (B, b"m1", McastHeader(XMIT_RSP, 2, A)),
        (B, b"m2", McastHeader(XMIT_RSP, 3, A)),
    ]
    assert sent[1].dest is None and _hdr(sent[1]).type == MSG  # the window keeps the original
    stats = proto.stats()
    assert stats["xmit_reqs_received"] == 1 and stats["retransmissions"] == 2
    assert stats["xmit_not_found"] == 1


def test_mcast_retransmission_fills_the_gap_and_is_delivered_as_a_multicast() -> None:
    proto = _mcast(me=B, members=(A, B, C))
    proto.up([_data(A, 2)], 0.0)
    rsp = Message(B, b"A1", src=A, headers={ids.MCAST: McastHeader(XMIT_RSP, 1, A)})
    proto.up([rsp], 0.1)
    delivered = up_messages(proto)
    assert [m.payload for m in delivered] == [b"A1", b"A2"] and delivered[0].dest is None
    assert proto.stats()["xmit_rsps_received"] == 1


def test_mcast_resends_the_last_message_to_members_whose_ack_is_stuck_for_an_interval() -> None:
    """Choice (tail loss, lost acks): the highest message goes again to stuck members."""
    proto = _mcast(xmit_interval=1.0)
    _send(proto, 3, 0.1)
    proto.tick(1.0)  # the messages are younger than one interval: no resend yet
    assert down_messages(proto) == []
    proto.up([_ack(B, 3)], 1.5)
    proto.tick(2.0)
    out = down_messages(proto)
    assert [(m.dest, m.payload, _hdr(m)) for m in out] == [(C, b"m2", McastHeader(XMIT_RSP, 3, A))]
    assert proto.stats()["last_seqno_resends"] == 1


def test_mcast_tick_always_moves_the_deadline_forward() -> None:
    proto = _mcast(xmit_interval=0.25)
    for now in (0.25, 0.5, 0.75):
        assert proto.next_deadline() == pytest.approx(now)
        proto.tick(now)
    assert proto.next_deadline() == pytest.approx(1.0)
    proto.set_property("xmit_interval", "100ms", 0.8)
    assert proto.next_deadline() == pytest.approx(0.9)


# --- views and digests ----------------------------------------------------------------------


def test_mcast_windows_follow_the_views() -> None:
    proto = _mcast()
    proto.up([_data(B, 2), _data(C, 1)], 0.0)
    up_messages(proto)
    proto.view_changed(view_of(A, C, D, counter=2), 1.0)
    windows = proto.stats()["receive_windows"]
    assert set(windows) == {"C", "D"} and windows["C"]["low"] == 1
    assert windows["D"] == {"low": 0, "high": 0, "size": 0}
    assert proto.stats()["ack_map"] == {"C": 0, "D": 0}


def test_mcast_member_that_leaves_and_comes_back_is_not_delivered_twice() -> None:
    """Chaos run udp-mcast seed 1633779744: a partition took D out of the others' view
    and a merge view brought it back; its window reopened at 0 and D's retransmissions
    were delivered a second time (424 messages at each of three members). A sender's
    seqnos never restart within its incarnation: the window comes back where it was,
    OOB seqnos delivered above its low included, and a digest never moves it back."""
    proto = _mcast(members=(A, B))
    oob = _data(B, 4, flags=Flag.OOB)
    proto.up([_data(B, 1), _data(B, 2), oob], 0.0)  # #3 missing: #4 delivered (OOB)
    assert [m.payload for m in up_messages(proto)] == [b"B1", b"B2", b"B4"]
    proto.view_changed(view_of(A, counter=2), 1.0)
    proto.view_changed(view_of(A, B, counter=3), 2.0)
    assert proto.stats()["receive_windows"]["B"] == {"low": 2, "high": 4, "size": 1}
    proto.down_event(MergeDigest(Digest({B: (1, 1)})), 2.0)  # a stale subgroup's digest
    proto.up([_data(B, 1), _data(B, 2), _data(B, 3), oob.copy(), _data(B, 5)], 2.1)
    assert [m.payload for m in up_messages(proto)] == [b"B3", b"B5"]
    assert proto.stats()["receive_windows"]["B"]["low"] == 5
    assert proto.stats()["windows_reopened"] == 1


def test_mcast_window_reopened_by_a_digest_starts_where_it_was_or_further() -> None:
    """A window a digest opens for a member we knew starts at the further of the two."""
    proto = _mcast(members=(A, B))
    proto.up([_data(B, 1), _data(B, 2)], 0.0)
    up_messages(proto)
    proto.view_changed(view_of(A, counter=2), 1.0)
    proto.down_event(MergeDigest(Digest({B: (5, 5)})), 2.0)
    assert proto.stats()["receive_windows"]["B"]["low"] == 5
    proto.view_changed(view_of(A, counter=3), 3.0)
    proto.down_event(MergeDigest(Digest({B: (1, 1)})), 4.0)
    assert proto.stats()["receive_windows"]["B"]["low"] == 5


def test_mcast_new_member_ack_starts_at_our_highest_seqno() -> None:
    """A new member is owed only what we multicast from the view that brings it on."""
    proto = _mcast(members=(A, B))
    _send(proto, 4)
    proto.up([_ack(B, 3)], 1.0)
    proto.view_changed(view_of(A, B, C, counter=2), 2.0)
    assert proto.stats()["ack_map"] == {"B": 3, "C": 4} and proto.stats()["min_ack"] == 3


def test_mcast_a_joiner_does_not_hold_a_full_window_for_seqnos_sent_before_its_view() -> None:
    """Campaign udp-mcast 50322: E's window of 8 was full behind a member killed before it
    acked; the view that removed it also brought a joiner, and the joiner's ack, started at
    the window's ``low``, kept the window full for seqnos it would never deliver (its digest
    starts it past them). Killed too before it acked, it held E's parked multicast until it
    was excluded. The view that replaces the dead member by a joiner now frees the window."""
    proto = _mcast(members=(A, B, C), capacity=4)
    assert len(_send(proto, 4)) == 3  # #1..#3 go, the fourth is parked
    proto.up([_ack(B, 3)], 1.0)  # C, killed, never acks
    assert proto.stats()["parked_messages"] == 1
    proto.view_changed(view_of(A, B, D, counter=2), 2.0)  # C is gone, D joins
    (sent,) = down_messages(proto)
    assert _hdr(sent).seqno == 4 and proto.stats()["parked_messages"] == 0
    assert proto.stats()["ack_map"] == {"B": 3, "D": 3}
    assert proto.stats()["send_window"] == {"low": 3, "high": 4, "size": 1}


def test_mcast_set_digest_creates_windows_at_the_digest_offset() -> None:
    proto = Mcast()
    proto.start(C, "c", 0.0)
    proto.down_event(SetDigest(Digest({A: (7, 9), B: (2, 2), C: (5, 5)})), 0.0)
    assert [type(e) for e in split(proto.take_down())[1]] == [SetDigest]
    proto.view_changed(view_of(A, B, C), 0.0)
    windows = proto.stats()["receive_windows"]
    assert windows == {"A": {"low": 7, "high": 7, "size": 0}, "B": {"low": 2, "high": 2, "size": 0}}
    proto.up([_data(A, 7), _data(A, 8)], 0.1)
    assert [m.payload for m in up_messages(proto)] == [b"A8"]
    assert proto.stats()["seqno"] == 0  # our own seqnos are not taken from the digest


def test_mcast_set_digest_after_the_view_moves_a_window_forward_but_never_back() -> None:
    proto = _mcast(me=C)
    proto.up([_data(A, 1), _data(A, 3)], 0.0)
    up_messages(proto)
    proto.down_event(SetDigest(Digest({A: (2, 2), B: (0, 0)})), 0.1)
    assert [m.payload for m in up_messages(proto)] == [b"A3"]  # #3 follows the digest's offset
    assert proto.stats()["receive_windows"]["A"] == {"low": 3, "high": 3, "size": 0}
    proto.up([_data(A, 2)], 0.2)
    assert up_messages(proto) == []  # 2 lies before the digest: a duplicate now
    proto.down_event(SetDigest(Digest({A: (1, 1)})), 0.3)
    assert proto.stats()["receive_windows"]["A"]["low"] == 3


def test_mcast_joiner_keeps_multicasts_that_come_before_its_digest_and_takes_them_after() -> None:
    """Over UDP multicast the coordinator's VIEW (the first seqno after the joiner's
    digest) reaches the joiner before the JOIN_RSP with its view and digest. The joiner
    keeps it, as NAKACK2's become_server_queue does, opens no window before its digest
    (a window at 0 would take what was multicast in views without it), and receives what
    it kept once the digest came: what lies at or below the digest was sent before it
    joined. (The joiner dropped the VIEW and waited behind that gap for ever once the
    coordinator left.)"""
    proto = started(Mcast(), B)  # no view yet: a joiner
    proto.up([_data(A, 5), _data(C, 1), _data(A, 6, b"view")], 0.0)
    assert up_messages(proto) == [] and proto.stats()["become_server_queue"] == 3
    proto.view_changed(view_of(A, C, B, counter=2), 0.1)  # GMS: the view, then the digest
    assert up_messages(proto) == [] and proto.stats()["receive_windows"] == {}
    proto.down_event(SetDigest(Digest({A: (5, 5), C: (0, 0), B: (0, 0)})), 0.1)
    assert [m.payload for m in up_messages(proto)] == [b"C1", b"view"]
    stats = proto.stats()
    assert stats["become_server_queue_replayed"] == 3 and stats["become_server_queue"] == 0
    assert stats["duplicates"] == 1 and stats["dropped_no_window"] == 0
    assert stats["receive_windows"]["A"] == {"low": 6, "high": 6, "size": 0}
    proto.up([_data(A, 7), _data(D, 1)], 0.2)  # a member now: no more keeping
    assert [m.payload for m in up_messages(proto)] == [b"A7"]
    assert proto.stats()["dropped_no_window"] == 1


def test_mcast_joiner_keeps_only_the_newest_and_a_join_without_digest_starts_at_zero() -> None:
    proto = started(Mcast(become_server_queue_size=2), B)
    proto.up([_data(A, 1), _data(A, 2), _data(A, 3)], 0.0)
    assert proto.stats()["become_server_queue_dropped"] == 1
    proto.view_changed(view_of(A, B, counter=4), 0.1)
    proto.down_event(BecomeServer(), 0.1)  # no digest: every window starts at 0
    assert up_messages(proto) == []  # #1 was pushed out: #2 and #3 wait for it
    assert proto.stats()["receive_windows"]["A"] == {"low": 0, "high": 3, "size": 2}
    proto.up([_data(A, 1)], 0.2)
    assert [m.payload for m in up_messages(proto)] == [b"A1", b"A2", b"A3"]


def test_mcast_first_view_of_the_group_opens_windows_and_receives_what_came_before() -> None:
    """The group's first view (id 1): nobody multicast before it, so windows start at 0
    at once, and a multicast from a member that installed it first is received."""
    proto = started(Mcast(), B)
    proto.up([_data(A, 1)], 0.0)
    proto.view_changed(view_of(A, B), 0.1)
    assert [m.payload for m in up_messages(proto)] == [b"A1"]


def test_mcast_a_window_moved_past_a_gap_delivers_what_it_held_and_says_what_it_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As NAKACK2 since 13bf09b: a digest that moves a window past a gap delivers
    what the window held at or below the new start, in order, instead of dropping it;
    the gap's messages, lost at this member, are counted in ``skipped_by_window_move``
    and said in a warning. A move over seqnos never received says nothing."""
    proto = _mcast()
    proto.up([_data(B, 3), _data(B, 4), _data(B, 7, flags=Flag.OOB), _data(C, 1)], 0.0)
    assert [m.payload for m in up_messages(proto)] == [b"B7", b"C1"]
    with caplog.at_level(logging.WARNING, logger="triogroups.protocols.mcast"):
        proto.down_event(SetDigest(Digest({B: (5, 5), C: (9, 9)})), 0.0)
    assert [m.payload for m in up_messages(proto)] == [b"B3", b"B4"]
    assert proto.stats()["skipped_by_window_move"] == 2
    (line,) = [r.getMessage() for r in caplog.records]
    assert f"MCAST a digest moved the window for {B} from 0 to 5: 2 of its messages" in line
    assert line.endswith("never came and are skipped, 2 held behind them are delivered")
    proto.up([_data(B, 2), _data(B, 6)], 0.1)  # a late one is a duplicate now
    assert [m.payload for m in up_messages(proto)] == [b"B6"]  # #7 was delivered on arrival
    assert proto.stats()["duplicates"] == 1
    assert proto.stats()["receive_windows"]["B"]["low"] == 7
    assert proto.stats()["receive_windows"]["C"]["low"] == 9


def test_mcast_merge_digest_never_moves_the_window_of_a_member_of_our_own_view() -> None:
    """Issue 37 (campaign udp-mcast 2145, 5013): a merge digest arrives before the merge
    view, while B is still in our view: B keeps what we did not ack, so the window for
    B stays where it is (``merge_windows_kept``) and the gap is asked for and filled by
    retransmission, never skipped; a sender that really purged answers PURGED."""
    proto = _mcast()
    proto.up([_data(B, 3), _data(B, 4)], 0.0)
    assert up_messages(proto) == []
    proto.down_event(MergeDigest(Digest({B: (5, 5)})), 0.0)
    assert up_messages(proto) == []
    assert proto.stats()["skipped_by_window_move"] == 0
    assert proto.stats()["merge_windows_kept"] == 1
    proto.up([_data(B, 1), _data(B, 2), _data(B, 5)], 0.1)
    assert [m.payload for m in up_messages(proto)] == [b"B1", b"B2", b"B3", b"B4", b"B5"]


def _xmit_req(frm: Address, *seqnos: int, to: Address = A) -> Message:
    return Message(to, src=frm, headers={ids.MCAST: McastHeader(XMIT_REQ, 0, None, seqnos)})


def test_mcast_digest_at_the_view_is_the_one_of_its_installation() -> None:
    """GetDigest naming the installed view answers with the digest taken when it was
    installed (what GMS gives a joiner already in it, whose JOIN_RSP was lost); any other
    GetDigest with the digest as it is now. Leaving forgets it."""
    proto = _mcast()
    proto.up([_data(B, s) for s in (1, 2, 3)], 0.0)
    view = view_of(A, B, C, D, counter=2)
    proto.view_changed(view, 0.0)
    proto.up([_data(B, s) for s in (4, 5)], 0.1)

    def digest(event: GetDigest) -> Digest:
        proto.down_event(event, 0.2)
        (reply,) = split(proto.take_up())[1]
        assert isinstance(reply, DigestReply)
        return reply.digest

    assert digest(GetDigest("GMS", view.view_id))[B] == (3, 3)
    assert digest(GetDigest("GMS"))[B] == (5, 5)
    assert digest(GetDigest("GMS", view_of(A, B, C).view_id))[B] == (5, 5)
    proto.down_event(Disconnect(), 0.3)
    proto.take_down()
    assert B not in digest(GetDigest("GMS", view.view_id))


@pytest.mark.parametrize("later_batch", [False, True], ids=["same-batch", "later-batch"])
def test_mcast_view_digest_stops_at_the_view_s_view_multicast(later_batch: bool) -> None:
    """Campaign udp-mcast 40480: the digest a rejoiner gets for a view (GetDigest naming it)
    holds what was delivered up to the view's VIEW multicast, not what MCAST had received
    when the view reached it: C's multicasts of the new view, delivered after A's VIEW
    (in the same batch, or in a batch before GMS installed the view), are owed to the
    rejoiner D. They used to count as delivered before the view: D never got them."""
    proto = _mcast(me=B, members=(A, B, C))
    view = view_of(A, B, C, D, counter=2)
    the_view = _data(A, 1, b"VIEW", flags=int(Flag.INTERNAL))
    sent_in_view = [_data(C, s) for s in (1, 2, 3)]
    if later_batch:
        proto.up([the_view], 0.0)
        proto.up(sent_in_view, 0.05)
    else:
        proto.up([the_view, *sent_in_view], 0.0)
    assert [m.payload for m in up_messages(proto)] == [b"VIEW", b"C1", b"C2", b"C3"]
    proto.view_changed(view, 0.1)
    proto.down_event(GetDigest("GMS", view.view_id), 0.2)
    (reply,) = split(proto.take_up())[1]
    assert isinstance(reply, DigestReply)
    assert reply.digest[A][0] == 1  # the VIEW itself came before the view
    assert reply.digest[C][0] == 0
    proto.down_event(GetDigest("GMS"), 0.2)  # the digest now (a new joiner's) counts them
    (now,) = split(proto.take_up())[1]
    assert isinstance(now, DigestReply)
    assert now.digest[C] == (3, 3)


def test_mcast_joiner_window_matches_sender_buffer() -> None:
    """Issue 12: the coordinator alone takes a joiner's digest, then multicasts the VIEW.

    GMS sends TmpView, takes the digest (ours: 0), multicasts the view (#1)
    while MCAST's view is still the singleton, then installs the view. The
    joiner's window starts at the digest and asks for #1: it must still be
    there (it used to be purged at once, as nobody was left to ack it).
    """
    proto = _mcast(members=(A,))
    proto.down_event(TmpView(view_of(A, B, counter=2)), 0.0)
    assert [type(e) for e in split(proto.take_down())[1]] == [TmpView]  # the transport needs it
    proto.down_event(GetDigest("GMS"), 0.0)
    (reply,) = split(proto.take_up())[1]
    assert isinstance(reply, DigestReply) and reply.digest[A] == (0, 0)
    _send(proto, 1)  # GMS's VIEW, stamped while the view is still {A}
    proto.view_changed(view_of(A, B, counter=2), 0.0)
    assert proto.stats()["send_window"] == {"low": 0, "high": 1, "size": 1}
    proto.up([_xmit_req(B, 1)], 1.0)
    (rsp,) = down_messages(proto)
    assert rsp.dest == B and _hdr(rsp)[:3] == (XMIT_RSP, 1, A)
    assert proto.stats()["xmit_not_found"] == 0
    proto.up([_ack(B, 1)], 1.1)
    assert proto.stats()["send_window"] == {"low": 1, "high": 1, "size": 0}


def test_mcast_tmp_view_holds_what_follows_the_digest_until_the_joiner_acks() -> None:
    """With members already there, their acks alone no longer purge past the joiner's digest."""
    proto = _mcast(members=(A, B))
    _send(proto, 2)
    proto.up([_ack(B, 2)], 0.1)
    proto.down_event(TmpView(view_of(A, B, C, counter=2)), 0.2)
    _send(proto, 3)  # #3..#5 follow the digest C is given (A: 2)
    proto.up([_ack(B, 5)], 0.3)  # B acks before A's MCAST installs the view with C
    assert proto.stats()["send_window"] == {"low": 2, "high": 5, "size": 3}
    proto.view_changed(view_of(A, B, C, counter=2), 0.4)
    assert proto.stats()["ack_map"] == {"B": 5, "C": 2}
    proto.up([_xmit_req(C, 3, 4, 5)], 0.5)
    assert [_hdr(m).seqno for m in down_messages(proto)] == [3, 4, 5]


def test_mcast_joiner_that_never_joins_stops_holding_the_window_at_the_next_view() -> None:
    proto = _mcast(members=(A, B))
    proto.down_event(TmpView(view_of(A, B, C, counter=2)), 0.0)
    _send(proto, 2)
    proto.up([_ack(B, 2)], 0.1)
    proto.view_changed(view_of(A, B, counter=3), 0.2)
    assert proto.stats()["send_window"] == {"low": 2, "high": 2, "size": 0}


def test_mcast_xmit_req_for_purged_seqnos_is_answered_with_purged() -> None:
    """A digest entry for another sender can lie below what that sender still holds."""
    proto = _mcast(members=(A, B))
    _send(proto, 3)
    proto.up([_ack(B, 3)], 0.1)  # purged: #1..#3 were sent in a view without C
    proto.view_changed(view_of(A, B, C, counter=2), 0.2)
    _send(proto, 1)  # #4, in the view with C
    proto.up([_xmit_req(C, 1, 2, 4)], 0.3)
    out = down_messages(proto)
    assert [(m.dest, *_hdr(m)[:2]) for m in out] == [(C, XMIT_RSP, 4), (C, PURGED, 3)]
    assert proto.stats()["purged_sent"] == 1 and proto.stats()["xmit_not_found"] == 0


def test_mcast_purged_moves_the_window_forward_and_delivers_what_follows() -> None:
    proto = _mcast(me=C)
    proto.up([_data(A, 4), _data(A, 5)], 0.0)  # our digest said A: 0; A purged #1..#3
    assert up_messages(proto) == []
    purged = Message(C, src=A, headers={ids.MCAST: McastHeader(PURGED, 3)})
    proto.up([purged], 0.1)
    assert [m.payload for m in up_messages(proto)] == [b"A4", b"A5"]
    (ack,) = down_messages(proto)
    assert ack.dest == A and _hdr(ack)[:2] == (ACK, 5)
    assert proto.stats()["windows_moved_by_purged"] == 1
    proto.up([Message(C, src=A, headers={ids.MCAST: McastHeader(PURGED, 2)})], 0.2)
    assert proto.stats()["receive_windows"]["A"]["low"] == 5  # never back


def test_mcast_message_past_the_window_makes_it_ask_for_its_empty_slots() -> None:
    """Issue 37 (campaign udp-mcast 2145): a merge digest taken seconds before the merge
    view opens our window for C at 0, while C's own subgroup acked and C purged up to 14.
    C's multicasts (15, 16, its last-message resends) all land past a window of 8: each
    one says C sent everything below it, so the window's empty slots become gaps that
    the next tick asks for; C answers PURGED(14) and what follows is delivered."""
    proto = _mcast(members=(A, B), capacity=8)
    proto.down_event(MergeDigest(Digest({C: (0, 0)})), 0.0)
    proto.view_changed(view_of(A, B, C, counter=9), 0.0)
    proto.take_down()
    proto.up([_data(C, 15), _data(C, 16)], 0.1)
    assert up_messages(proto) == [] and proto.stats()["dropped_outside_window"] == 2
    proto.tick(proto.next_deadline())
    reqs = [m for m in down_messages(proto) if _hdr(m).type == XMIT_REQ]
    assert [(m.dest, _hdr(m).missing) for m in reqs] == [(C, tuple(range(1, 8)))]
    proto.up([Message(A, src=C, headers={ids.MCAST: McastHeader(PURGED, 14)})], 1.1)
    assert proto.stats()["receive_windows"]["C"]["low"] == 14
    proto.up([_data(C, 16), _data(C, 15)], 1.2)
    assert [m.payload for m in up_messages(proto)] == [b"C15", b"C16"]


def test_mcast_merge_digest_moves_the_other_subgroups_windows_to_their_offsets() -> None:
    """After a merge, windows for the other subgroup start where its digest says, not at 0."""
    proto = _mcast(members=(A, B))
    proto.down_event(MergeDigest(Digest({C: (6, 6), D: (2, 3)})), 0.0)
    assert [type(e) for e in split(proto.take_down())[1]] == [MergeDigest]
    proto.view_changed(view_of(A, B, C, D, counter=5), 0.0)
    proto.up([_data(C, 7), _data(D, 3)], 0.1)
    assert [m.payload for m in up_messages(proto)] == [b"C7", b"D3"]
    assert proto.stats()["receive_windows"]["C"] == {"low": 7, "high": 7, "size": 0}


def test_mcast_member_that_left_falls_silent_but_still_answers_for_what_it_sent() -> None:
    """After Disconnect (GMS left): no acks, XMIT_REQs or last-message resends to the
    old view and no timer, but a late XMIT_REQ for our own messages is answered."""
    proto = _mcast(members=(A, B))
    _send(proto, 2)  # B never acks: #2 would be resent to B at every run
    proto.up([_data(B, 1), _data(B, 3)], 0.0)  # B's #2 is missing: a gap to ask for
    proto.take_down()
    proto.take_up()
    proto.down_event(Disconnect(), 0.1)
    proto.take_down()
    assert proto.next_deadline() == float("inf")
    proto.tick(10.0)
    assert down_messages(proto) == []
    proto.up([_xmit_req(B, 2)], 10.1)
    assert [(m.dest, *_hdr(m)[:2]) for m in down_messages(proto)] == [(B, XMIT_RSP, 2)]


def test_mcast_get_digest_is_answered_with_a_digest_reply_going_up() -> None:
    proto = _mcast()
    _send(proto, 3)
    proto.up([_data(B, 1), _data(B, 2), _data(B, 4)], 0.0)
    up_messages(proto)
    proto.down_event(GetDigest("STABLE"), 0.1)
    assert split(proto.take_down())[1] == []
    (reply,) = split(proto.take_up())[1]
    assert reply == DigestReply("STABLE", Digest({A: (3, 3), B: (2, 4), C: (0, 0)}))


def test_mcast_view_change_and_stable_digest_events_travel_on() -> None:
    proto = _mcast()
    view = view_of(A, B, counter=2)
    proto.down_event(ViewChange(view), 0.0)
    proto.down_event(StableDigest(Digest({A: (0, 0)})), 0.0)
    assert [type(e) for e in split(proto.take_down())[1]] == [ViewChange, StableDigest]
    assert proto.view == view


# --- configuration, wire, hostile input ------------------------------------------------------


def test_mcast_properties_are_validated_and_capacity_is_fixed_at_run_time() -> None:
    with pytest.raises(PropertyError, match=r"MCAST.capacity must be >= 2, got 1"):
        Mcast(capacity=1)
    with pytest.raises(PropertyError, match=r"MCAST.xmit_interval must be > 0"):
        Mcast(xmit_interval=0)
    assert Mcast(xmit_interval="250ms").xmit_interval == pytest.approx(0.25)
    proto = _mcast()
    with pytest.raises(PropertyError, match="capacity cannot change at run time"):
        proto.set_property("capacity", 8, 0.0)


def test_mcast_refuses_a_stack_that_also_has_nakack2() -> None:
    from triogroups.protocol import Protocol

    class _FakeNakack2(Protocol):
        """Named after creation, so it never enters the protocol registry."""

    _FakeNakack2.name = "NAKACK2"
    with pytest.raises(PropertyError, match="MCAST replaces NAKACK2"):
        Mcast().check_stack([_FakeNakack2()], [])
    with pytest.raises(PropertyError, match="MCAST replaces NAKACK2"):
        Mcast().check_stack([], [_FakeNakack2()])
    StackConfig.of("SIM", "MCAST").validate()


def test_mcast_header_roundtrips_through_the_wire_codec() -> None:
    codec = WireCodec("c")
    headers = [
        McastHeader(MSG, 7),
        McastHeader(ACK, 12),
        McastHeader(XMIT_REQ, 0, None, (3, 4, 9)),
        McastHeader(XMIT_RSP, 5, A),
        McastHeader(PURGED, 4),
    ]
    msgs = [Message(None, b"x", headers={ids.MCAST: h}) for h in headers]
    decoded = codec.decode(codec.encode(None, B, msgs))
    assert [m.headers[ids.MCAST] for m in decoded.messages] == headers


def test_mcast_bad_headers_are_counted_and_dropped() -> None:
    proto = _mcast()
    bad_type = Message(None, b"x", src=B, headers={ids.MCAST: McastHeader(9, 1)})
    bad_seqno = Message(None, b"y", src=B, headers={ids.MCAST: McastHeader(MSG, 0)})
    proto.up([bad_type, bad_seqno], 0.0)
    assert up_messages(proto) == [] and proto.stats()["bad_headers"] == 2


def test_mcast_xmit_req_answers_at_most_capacity_seqnos() -> None:
    proto = _mcast(capacity=4)
    _send(proto, 3)
    huge = tuple(range(1, 100_000))
    proto.up([Message(A, src=B, headers={ids.MCAST: McastHeader(XMIT_REQ, 0, None, huge)})], 0.0)
    assert len(down_messages(proto)) == 3 and proto.stats()["xmit_not_found"] == 1


# --- limits against abuse (issue 18) -----------------------------------------------------


def test_mcast_serves_at_most_max_xmits_per_interval_to_one_member() -> None:
    """A member asking for the whole window again and again gets
    ``max_xmits_per_interval`` messages per xmit_interval; another member's requests
    have their own budget."""
    proto = _mcast(max_xmits_per_interval=4, xmit_interval=1.0)
    _send(proto, 6)

    def resent(requester: Address, now: float) -> int:
        hdr = McastHeader(XMIT_REQ, 0, None, tuple(range(1, 7)))
        proto.up([Message(A, src=requester, headers={ids.MCAST: hdr})], now)
        return len(down_messages(proto))

    assert [resent(B, t) for t in (1.0, 1.5)] == [4, 0]
    assert resent(C, 1.5) == 4
    assert resent(B, 2.0) == 4
    assert proto.stats()["xmits_capped"] == 2 + 6 + 2 + 2


def test_mcast_msg_as_bare_seqno_or_as_header_is_delivered_alike() -> None:
    """A MSG travels as its bare seqno (an int, see `McastHeader`); the tuple form still
    means the same. One sender's mix, with a gap and a duplicate: each delivered once, in
    seqno order; and what MCAST sends crosses the real codec as bare seqnos."""
    m = _mcast(me=B)

    def msg(seqno: int) -> Message:
        if seqno % 2:
            return Message(None, b"%d" % seqno, src=A, headers={ids.MCAST: seqno})
        return _data(A, seqno, b"%d" % seqno)

    m.up([msg(1), msg(2), msg(4), msg(5)], 0.0)  # 3 missing: 4 and 5 wait for it
    assert [x.payload for x in up_messages(m)] == [b"1", b"2"]
    m.up([msg(2), msg(3), msg(6)], 0.0)
    assert [x.payload for x in up_messages(m)] == [b"3", b"4", b"5", b"6"]
    assert m.stats()["duplicates"] == 1
    sender = _mcast()
    sender.down([Message(None, b"w%d" % i) for i in range(3)], 0.0)
    wire = [x for x in down_messages(sender, wire=True) if ids.MCAST in x.headers]
    assert [x.headers[ids.MCAST] for x in wire] == [1, 2, 3]
    receiver = _mcast(me=C)
    receiver.up(wire, 0.0)
    assert [x.payload for x in up_messages(receiver)] == [b"w0", b"w1", b"w2"]
