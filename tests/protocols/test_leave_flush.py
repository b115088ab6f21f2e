"""Graceful leave flushes (issue 37), rule by rule on the sans-IO objects.

GMS sends `FlushRequest` down on `Disconnect` and leaves (LEAVE_REQ, or as coordinator
the view without itself) only once NAKACK2 / MCAST and UNICAST3 answered `FlushDone`, or
``leave_timeout`` ran out; each of those answers only once what its member sent is stable
at the members of the view; STABLE runs quick rounds for a leaving member.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest

from triogroups import Address, Digest, Message, View, ViewId
from triogroups.events import (
    Connect,
    Disconnect,
    Disconnected,
    FlushDone,
    FlushRequest,
    GetDigest,
    StableDigest,
)
from triogroups.protocols import ids
from triogroups.protocols.gms import LEAVE_REQ, LEAVE_RSP, VIEW, VIEW_ACK, Gms, GmsHeader
from triogroups.protocols.mcast import ACK, XMIT_RSP, Mcast, McastHeader, as_header
from triogroups.protocols.nakack2 import HIGHEST_SEQNO, Nakack2
from triogroups.protocols.sequencer import Sequencer
from triogroups.protocols.stable import FLUSH_GOSSIP_INTERVAL, GOSSIP_NOW, Stable
from triogroups.protocols.unicast3 import Unicast3
from triogroups.protocols.unicast3._common import ACK as ACK_U3
from triogroups.protocols.unicast3._common import ID as U3
from triogroups.protocols.unicast3._common import Unicast3Header
from triogroups.testing import addresses, split, started, view_of

A, B, C = addresses("ABC")


# --- GMS --------------------------------------------------------------------------------------


def _gms(me: Address, view: View, **props: Any) -> Gms:
    """A GMS at ``me`` above NAKACK2, UNICAST3 and STABLE, with ``view`` installed."""
    gms = Gms(**props)
    gms.check_stack([Nakack2(), Unicast3(), Stable()], [])
    gms.start(me, "test", 0.0)
    gms.down_event(Connect(), 0.0)
    gms.install(view, 0.0)
    gms.take_down()
    gms.take_up()
    return gms


def _gms_out(gms: Gms) -> tuple[list[tuple[Address | None, int]], list[Any]]:
    """What GMS sent down: (dest, GMS header type) per message, and the events."""
    msgs, events = split(gms.take_down())
    return [(m.dest, m.headers[ids.GMS].type) for m in msgs], events


def _run_timers(gms: Gms, until: float) -> None:
    now = gms.next_deadline()
    while now <= until:
        gms.tick(now)
        assert gms.next_deadline() > now, f"tick at {now} left next_deadline() due"
        now = gms.next_deadline()


def _rsp(dest: Address, src: Address, kind: int, view: View | None = None) -> Message:
    return Message(dest, src=src, headers={ids.GMS: GmsHeader(kind, view)})


def test_gms_leaving_participant_sends_leave_req_only_once_every_layer_flushed() -> None:
    """Disconnect sends FlushRequest down and no LEAVE_REQ; one answer is not enough;
    the second sends LEAVE_REQ to the coordinator; LEAVE_RSP ends the leave, flushed."""
    gms = _gms(B, View(ViewId(3, A), [A, B, C]))
    gms.down_event(Disconnect(), 0.0)
    sent, events = _gms_out(gms)
    assert sent == [] and events == [FlushRequest()]
    assert gms.state == "leaving" and gms.stats()["flushing"] == ["NAKACK2", "UNICAST3"]
    _run_timers(gms, until=0.5)
    gms.up_event(FlushDone("NAKACK2"), 0.5)
    assert _gms_out(gms) == ([], [])
    gms.up([_rsp(B, A, LEAVE_RSP)], 0.6)  # a stray LEAVE_RSP does not end the flush
    assert gms.state == "leaving"
    gms.up_event(FlushDone("UNICAST3"), 0.7)
    assert _gms_out(gms)[0] == [(A, LEAVE_REQ)]
    gms.up([_rsp(B, A, LEAVE_RSP)], 0.8)
    assert gms.state == "left"
    assert Disconnected(flushed=True) in split(gms.take_up())[1]
    stats = gms.stats()
    assert stats["leave_flushed"] is True and stats["leaves_unflushed"] == 0


def test_gms_leaving_coordinator_installs_the_view_without_itself_only_after_the_flush() -> None:
    """The coordinator hands over (VIEW without itself) only once its layers flushed, sends
    no LEAVE_RSP to itself (that ended its leave 0.05 s after disconnect, before anyone
    had the view), and leaves once the others acked the view."""
    view = View(ViewId(3, A), [A, B, C])
    gms = _gms(A, view, max_bundling_time=0.05)
    gms.down_event(Disconnect(), 0.0)
    assert _gms_out(gms) == ([], [FlushRequest()])
    _run_timers(gms, until=1.0)
    assert _gms_out(gms)[0] == [] and gms.state == "leaving"
    gms.up_event(FlushDone("UNICAST3"), 1.0)
    gms.up_event(FlushDone("NAKACK2"), 1.0)
    _run_timers(gms, until=1.05)
    sent, _ = _gms_out(gms)
    assert sent == [(None, VIEW)]  # the view [B, C]; no LEAVE_RSP, to itself or anyone
    after = View(ViewId(4, A), [B, C])
    _run_timers(gms, until=1.5)
    assert gms.state == "leaving"
    gms.up([_rsp(A, B, VIEW_ACK, after)], 1.5)
    assert gms.state == "leaving"
    gms.up([_rsp(A, C, VIEW_ACK, after)], 1.6)
    assert gms.state == "left" and gms.stats()["leave_flushed"] is True


def test_gms_leave_goes_on_unflushed_at_leave_timeout_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """UNICAST3 never answers: at leave_timeout GMS sends LEAVE_REQ anyway, logs at WARNING
    who did not flush, counts it, and its Disconnected says flushed=False."""
    gms = _gms(B, View(ViewId(3, A), [A, B, C]), leave_timeout=1.0)
    gms.down_event(Disconnect(), 0.0)
    gms.take_down()
    gms.up_event(FlushDone("NAKACK2"), 0.2)
    with caplog.at_level(logging.WARNING, logger="triogroups.protocols.gms"):
        _run_timers(gms, until=0.99)
        assert _gms_out(gms)[0] == []
        _run_timers(gms, until=1.0)
    assert _gms_out(gms)[0] == [(A, LEAVE_REQ)]
    assert any("UNICAST3 did not flush" in r.getMessage() for r in caplog.records)
    gms.up([_rsp(B, A, LEAVE_RSP)], 1.1)
    assert gms.state == "left"
    assert Disconnected(flushed=False) in split(gms.take_up())[1]
    stats = gms.stats()
    assert stats["leave_flushed"] is False and stats["leaves_unflushed"] == 1
    assert gms.next_deadline() == math.inf


def test_gms_does_not_wait_for_nakack2_without_stable_below() -> None:
    """Only STABLE tells NAKACK2 that its multicasts are stable: without it the flush
    would always run into leave_timeout, so GMS waits for UNICAST3 alone."""
    gms = Gms()
    gms.check_stack([Nakack2(), Unicast3()], [])
    gms.start(B, "test", 0.0)
    gms.down_event(Connect(), 0.0)
    gms.install(View(ViewId(3, A), [A, B]), 0.0)
    gms.take_down()
    gms.down_event(Disconnect(), 0.0)
    assert gms.stats()["flushing"] == ["UNICAST3"]
    gms.take_down()
    gms.up_event(FlushDone("UNICAST3"), 0.1)
    assert _gms_out(gms)[0] == [(A, LEAVE_REQ)]


# --- NAKACK2 --------------------------------------------------------------------------------


def _highest_seqnos(msgs: list[Message]) -> list[int]:
    return [
        m.headers[ids.NAKACK2].seqno
        for m in msgs
        if not isinstance(m.headers[ids.NAKACK2], int)
        and m.headers[ids.NAKACK2].type == HIGHEST_SEQNO
    ]


def test_nakack2_answers_the_flush_once_stable_and_announces_its_highest_seqno_meanwhile() -> None:
    """With resend_last_seqno off, a flushing NAKACK2 still announces HIGHEST_SEQNO (at
    once, and at every retransmit run, new traffic or not): a lost last multicast is
    otherwise invisible and the flush would wait for leave_timeout. FlushDone only once
    a stability digest shows every member delivered the highest seqno."""
    nak = started(Nakack2(resend_last_seqno=False), A, view=view_of(A, B, C))
    nak.down([Message(None, b"1"), Message(None, b"2")], 0.0)
    nak.take_down(), nak.take_up()
    nak.down_event(FlushRequest(), 0.1)
    msgs, events = split(nak.take_down())
    assert _highest_seqnos(msgs) == [2] and events == [FlushRequest()]
    assert split(nak.take_up())[1] == []
    nak.tick(0.5)
    assert _highest_seqnos(split(nak.take_down())[0]) == [2]
    nak.down_event(StableDigest(Digest({A: (1, 2), B: (0, 0), C: (0, 0)})), 0.6)
    assert split(nak.take_up())[1] == []
    nak.down_event(StableDigest(Digest({A: (2, 2), B: (0, 0), C: (0, 0)})), 0.7)
    assert split(nak.take_up())[1] == [FlushDone("NAKACK2")]
    nak.tick(1.0)
    assert _highest_seqnos(split(nak.take_down())[0]) == []  # stable: no more announcements


def test_nakack2_answers_the_flush_at_once_when_it_sent_nothing() -> None:
    nak = started(Nakack2(), A, view=view_of(A, B))
    nak.down_event(FlushRequest(), 0.0)
    assert split(nak.take_up())[1] == [FlushDone("NAKACK2")]


# --- MCAST ----------------------------------------------------------------------------------


def _mcast_ack(src: Address, seqno: int) -> Message:
    return Message(A, src=src, headers={ids.MCAST: McastHeader(ACK, seqno)})


def test_mcast_answers_the_flush_once_every_member_acked_its_highest_seqno() -> None:
    """A flushing MCAST sends its highest message to every member behind it (at once, a
    receiver that had it acks) and answers FlushDone only once every other member acked it."""
    mc = started(Mcast(), A, view=view_of(A, B, C))
    mc.down([Message(None, b"1"), Message(None, b"2")], 0.0)
    mc.take_down(), mc.take_up()
    mc.down_event(FlushRequest(), 0.1)
    msgs, _ = split(mc.take_down())
    probes = [(m.dest, as_header(m.headers[ids.MCAST])) for m in msgs]
    assert probes == [(B, McastHeader(XMIT_RSP, 2, A)), (C, McastHeader(XMIT_RSP, 2, A))]
    assert split(mc.take_up())[1] == []
    mc.up([_mcast_ack(B, 2), _mcast_ack(C, 1)], 0.2)
    assert split(mc.take_up())[1] == []
    mc.up([_mcast_ack(C, 2)], 0.3)
    assert split(mc.take_up())[1] == [FlushDone("MCAST")]


def test_mcast_flush_sends_what_waits_for_room_at_once_and_what_comes_down_during_it() -> None:
    """Campaign udp-mcast 5135: a multicast parked behind a full window (a member that does
    not ack) was dropped at the leave, never delivered even by its sender, whose send had
    returned. When the flush begins, what waits goes at once, past ``capacity``, and so
    does a multicast that comes down during the flush; FlushDone once all are acked."""
    mc = started(Mcast(capacity=4), A, view=view_of(A, B, C))
    mc.down([Message(None, f"{i}".encode()) for i in range(1, 7)], 0.0)
    assert mc.blocks_down() and mc.stats()["parked_messages"] == 3
    mc.take_down(), mc.take_up()
    mc.down_event(FlushRequest(), 0.1)
    msgs, _ = split(mc.take_down())
    firsts = [as_header(m.headers[ids.MCAST]) for m in msgs if m.dest is None]
    assert firsts == [McastHeader(0, s) for s in (4, 5, 6)]
    assert [m.payload for m in split(mc.take_up())[0]] == [b"4", b"5", b"6"]
    assert not mc.blocks_down() and mc.stats()["sent_past_capacity_at_flush"] == 3
    mc.down([Message(None, b"7")], 0.2)
    msgs, _ = split(mc.take_down())
    assert [as_header(m.headers[ids.MCAST]) for m in msgs] == [McastHeader(0, 7)]
    mc.up([_mcast_ack(B, 7), _mcast_ack(C, 7)], 0.3)
    assert FlushDone("MCAST") in split(mc.take_up())[1]


# --- UNICAST3 --------------------------------------------------------------------------------


def test_unicast3_answers_the_flush_once_every_unicast_to_a_member_is_acked() -> None:
    u3 = started(Unicast3(), A, view=view_of(A, B))
    u3.down([Message(B, b"1"), Message(B, b"2")], 0.0)
    (_, second), _ = split(u3.take_down())
    conn_id = second.headers[U3].conn_id
    u3.down_event(FlushRequest(), 0.1)
    assert split(u3.take_up())[1] == []
    ack = Unicast3Header(ACK_U3, 1, conn_id, timestamp=1)
    u3.up([Message(A, src=B, headers={U3: ack})], 0.2)
    assert split(u3.take_up())[1] == []
    ack = Unicast3Header(ACK_U3, 2, conn_id, timestamp=2)
    u3.up([Message(A, src=B, headers={U3: ack})], 0.3)
    assert split(u3.take_up())[1] == [FlushDone("UNICAST3")]


# --- STABLE ----------------------------------------------------------------------------------


def test_stable_of_a_leaving_member_asks_for_quick_rounds_until_nakack2_flushed() -> None:
    """From FlushRequest on, a leaving member's STABLE gossips every FLUSH_GOSSIP_INTERVAL
    and multicasts GOSSIP_NOW with it; a member that gets GOSSIP_NOW sends its digest at
    once (it asks NAKACK2 for it); NAKACK2's FlushDone ends the quick rounds."""
    view = view_of(A, B, C)
    leaver = started(Stable(), B, view=view)
    leaver.down_event(FlushRequest(), 1.0)
    assert leaver.next_deadline() == 1.0
    leaver.tick(1.0)
    msgs, events = split(leaver.take_down())
    assert events == [FlushRequest(), GetDigest("STABLE")]
    (ask,) = msgs
    assert ask.dest is None and ask.headers[ids.STABLE].type == GOSSIP_NOW
    assert leaver.next_deadline() == 1.0 + FLUSH_GOSSIP_INTERVAL
    coord = started(Stable(), A, view=view)
    ask.src = B
    coord.up([ask], 1.01)
    assert split(coord.take_down())[1] == [GetDigest("STABLE")]
    leaver.up_event(FlushDone("NAKACK2"), 1.1)
    assert leaver.next_deadline() > 1.1 + 5 * FLUSH_GOSSIP_INTERVAL  # back to its usual pace


def test_stable_of_a_leaving_member_keeps_quick_rounds_until_sequencer_flushed_too() -> None:
    """Campaign udp-total 298: SEQUENCER's leave flush waits for its ordered messages to be
    stable, as NAKACK2's waits for its own; a member of a total-order stack sends its
    multicasts through the coordinator, so NAKACK2 answers at once. STABLE keeps its quick
    rounds until every layer below whose flush waits for stability answered; UNICAST3's
    answer does not count."""
    leaver = Stable()
    leaver.check_stack([Nakack2(), Unicast3(), Sequencer()], [])
    leaver = started(leaver, B, view=view_of(A, B, C))
    leaver.down_event(FlushRequest(), 1.0)
    leaver.tick(1.0)
    leaver.up_event(FlushDone("NAKACK2"), 1.1)
    leaver.up_event(FlushDone("UNICAST3"), 1.1)
    assert leaver.next_deadline() == 1.0 + FLUSH_GOSSIP_INTERVAL  # SEQUENCER still waits
    leaver.up_event(FlushDone("SEQUENCER"), 1.2)
    assert leaver.next_deadline() > 1.2 + 5 * FLUSH_GOSSIP_INTERVAL
