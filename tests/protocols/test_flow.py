"""UFC and MFC (credit-based flow control) on the sans-IO objects, with explicit ``now``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Address, Flag, Message, PropertyError
from triogroups.events import Disconnect, Disconnected
from triogroups.protocols import ids
from triogroups.protocols._flow import CREDIT_REQUEST, REPLENISH, FcHeader, FlowControl
from triogroups.protocols.gms import Gms
from triogroups.protocols.mfc import Mfc
from triogroups.protocols.ufc import Ufc
from triogroups.testing import addresses, down_messages, started, up_messages, view_of
from triogroups.wire import WireCodec

A, B, C, D = addresses("ABCD")


def _fc(
    cls: type[FlowControl], me: Address = A, members: tuple[Address, ...] = (A, B, C), **props: Any
) -> Any:
    props = {"max_credits": 1000, "min_threshold": 0.4, "max_block_time": 0.5, **props}
    return started(cls(**props), me, view=view_of(*members))


def _msg(dest: Address | None, size: int, name: str = "", *, flags: int = 0) -> Message:
    payload = name.encode().ljust(size, b".") if size else b""
    return Message(dest, payload, flags=flags)


def _names(msgs: list[Message]) -> list[bytes]:
    return [m.payload.rstrip(b".") for m in msgs]


def _control(frm: Address, to: Address, pid: int, kind: int, credits: int) -> Message:
    return Message(to, src=frm, headers={pid: FcHeader(kind, credits)})


def _controls(msgs: list[Message], pid: int) -> list[tuple[Address | None, FcHeader]]:
    return [(m.dest, m.headers[pid]) for m in msgs if pid in m.headers]


# --- UFC: sender ---------------------------------------------------------------------------


def test_ufc_sender_spends_the_payload_length_from_the_destination_credits() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 300, "b1"), _msg(C, 100, "c1"), _msg(B, 200, "b2")], 0.0)
    assert _names(down_messages(ufc)) == [b"b1", b"c1", b"b2"]
    stats = ufc.stats()
    assert stats["sender_credits"] == {"A": 1000, "B": 500, "C": 900}
    assert stats["bytes_sent"] == 600 and not ufc.blocks_down()


def test_ufc_sender_without_credits_queues_in_order_and_blocks_the_senders_above() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 600, "b1"), _msg(B, 600, "b2"), _msg(B, 10, "b3")], 0.0)
    assert _names(down_messages(ufc)) == [b"b1"]
    assert ufc.blocks_down()
    stats = ufc.stats()
    assert stats["blocked"] and stats["blockings"] == 1
    assert stats["queued_messages"] == 2 and stats["queued_bytes"] == 610


def test_ufc_replenish_from_the_receiver_sends_what_waited() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 600, "b1"), _msg(B, 600, "b2"), _msg(B, 300, "b3")], 0.0)
    down_messages(ufc)
    ufc.up([_control(B, A, ids.UFC, REPLENISH, 600)], 2.0)
    assert _names(down_messages(ufc)) == [b"b2", b"b3"] and not ufc.blocks_down()
    stats = ufc.stats()
    assert stats["sender_credits"]["B"] == 100 and stats["replenishments_received"] == 1
    assert stats["time_blocked"] == pytest.approx(2.0)
    assert up_messages(ufc) == []  # control messages are consumed


def test_ufc_replenished_credits_never_exceed_max_credits() -> None:
    ufc = _fc(Ufc)
    ufc.up([_control(B, A, ids.UFC, REPLENISH, 5000)], 0.0)
    assert ufc.stats()["sender_credits"]["B"] == 1000


def test_ufc_messages_to_other_destinations_go_while_one_destination_waits() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 900, "b1"), _msg(B, 900, "b2"), _msg(C, 900, "c1")], 0.0)
    assert _names(down_messages(ufc)) == [b"b1", b"c1"] and ufc.blocks_down()


def test_ufc_multicasts_and_empty_messages_are_not_flow_controlled() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 1000, "b1"), _msg(None, 5000, "all"), _msg(B, 0)], 0.0)
    assert len(down_messages(ufc)) == 3 and not ufc.blocks_down()


def test_ufc_destinations_outside_the_view_are_not_flow_controlled() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(D, 5000, "d1"), _msg(D, 5000, "d2")], 0.0)
    assert _names(down_messages(ufc)) == [b"d1", b"d2"] and not ufc.blocks_down()


def test_ufc_dont_block_messages_are_dropped_and_counted_instead_of_blocking() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 900, "b1"), _msg(B, 900, "nb", flags=Flag.DONT_BLOCK)], 0.0)
    assert _names(down_messages(ufc)) == [b"b1"] and not ufc.blocks_down()
    ufc.down([_msg(B, 50, "ok", flags=Flag.DONT_BLOCK)], 0.1)
    assert _names(down_messages(ufc)) == [b"ok"]
    assert ufc.stats()["dont_block_drops"] == 1


def test_ufc_no_fc_messages_spend_nothing_but_keep_their_place_behind_a_queue() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 2000, "free", flags=Flag.NO_FC)], 0.0)
    assert _names(down_messages(ufc)) == [b"free"] and ufc.stats()["sender_credits"]["B"] == 1000
    ufc.down([_msg(B, 900, "b1"), _msg(B, 900, "b2"), _msg(B, 2000, "nofc", flags=Flag.NO_FC)], 0.1)
    assert _names(down_messages(ufc)) == [b"b1"]
    ufc.up([_control(B, A, ids.UFC, REPLENISH, 900)], 0.2)
    assert _names(down_messages(ufc)) == [b"b2", b"nofc"]


def test_ufc_oob_messages_spend_credits_but_may_overtake_waiting_messages() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 800, "b1"), _msg(B, 800, "b2"), _msg(B, 100, "oob", flags=Flag.OOB)], 0.0)
    assert _names(down_messages(ufc)) == [b"b1", b"oob"]
    assert ufc.stats()["sender_credits"]["B"] == 100 and ufc.blocks_down()
    ufc.down([_msg(B, 800, "oob2", flags=Flag.OOB)], 0.1)
    assert (
        down_messages(ufc) == [] and ufc.stats()["queued_messages"] == 2
    )  # no credits: it waits too


def test_ufc_message_larger_than_max_credits_goes_once_credits_are_full() -> None:
    """Choice: JGroups would block it forever; here it needs full credits and takes them all."""
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 100, "small"), _msg(B, 3000, "huge")], 0.0)
    assert _names(down_messages(ufc)) == [b"small"]
    ufc.up([_control(B, A, ids.UFC, REPLENISH, 100)], 0.1)
    assert _names(down_messages(ufc)) == [b"huge"] and ufc.stats()["sender_credits"]["B"] == 0


def test_ufc_blocked_sender_sends_credit_request_after_max_block_time_and_repeats() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 700, "b1"), _msg(B, 700, "b2")], 1.0)
    down_messages(ufc)
    assert ufc.next_deadline() == pytest.approx(1.5)
    ufc.tick(1.5)
    assert _controls(down_messages(ufc), ids.UFC) == [(B, FcHeader(CREDIT_REQUEST, 700))]
    assert ufc.next_deadline() == pytest.approx(2.0)
    ufc.tick(2.0)
    assert len(_controls(down_messages(ufc), ids.UFC)) == 1
    ufc.up([_control(B, A, ids.UFC, REPLENISH, 700)], 2.1)
    assert _names(down_messages(ufc)) == [b"b2"]
    assert ufc.next_deadline() == float("inf") and ufc.stats()["credit_requests_sent"] == 2


def test_ufc_max_block_time_zero_never_sends_credit_requests() -> None:
    ufc = _fc(Ufc, max_block_time=0)
    ufc.down([_msg(B, 700, "b1"), _msg(B, 700, "b2")], 1.0)
    assert ufc.blocks_down() and ufc.next_deadline() == float("inf")


def test_ufc_view_change_that_removes_the_slow_member_releases_blocked_messages() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 900, "b1"), _msg(B, 900, "b2"), _msg(B, 900, "b3")], 0.0)
    down_messages(ufc)
    ufc.view_changed(view_of(A, C, D, counter=2), 3.0)
    assert _names(down_messages(ufc)) == [b"b2", b"b3"] and not ufc.blocks_down()
    stats = ufc.stats()
    assert stats["sender_credits"] == {"A": 1000, "C": 1000, "D": 1000}
    assert set(stats["receiver_credits"]) == {"A", "C", "D"}
    assert stats["time_blocked"] == pytest.approx(3.0)


# --- UFC/MFC: receiver ------------------------------------------------------------------------


def test_ufc_receiver_replenishes_once_the_senders_credits_fall_to_min_credits() -> None:
    """JGroups: credits left <= max_credits * min_threshold -> REPLENISH with what was used."""
    ufc = _fc(Ufc, me=B)
    ufc.up([Message(B, b"x" * 500, src=A), Message(B, b"x" * 50, src=A)], 0.0)
    assert len(up_messages(ufc)) == 2 and _controls(down_messages(ufc), ids.UFC) == []
    assert ufc.stats()["receiver_credits"]["A"] == 450
    ufc.up([Message(B, b"x" * 60, src=A)], 0.1)
    assert _controls(down_messages(ufc), ids.UFC) == [(A, FcHeader(REPLENISH, 610))]
    stats = ufc.stats()
    assert stats["receiver_credits"]["A"] == 1000 and stats["replenishments_sent"] == 1
    assert stats["bytes_received"] == 610


def test_mfc_receiver_spends_each_senders_credits_in_a_batch_that_interleaves_senders() -> None:
    """A batch is counted per run of one sender; interleaved runs still add up per sender."""
    mfc = _fc(Mfc, me=C)
    batch = [
        Message(None, b"x" * size, src=src)
        for src, size in [(A, 100), (A, 50), (B, 200), (A, 25), (B, 1), (B, 2), (A, 5)]
    ]
    mfc.up(batch, 0.0)
    assert len(up_messages(mfc)) == 7 and _controls(down_messages(mfc), ids.MFC) == []
    stats = mfc.stats()
    assert stats["receiver_credits"] == {"A": 820, "B": 797, "C": 1000}
    assert stats["bytes_received"] == 383


def test_mfc_receiver_batch_with_replenish_in_the_middle_passes_the_data_in_order() -> None:
    """Control messages amid a data batch are consumed (collected and handled after the
    counting loop); the data goes up in its order, every run counted, NO_FC and empty skipped."""
    mfc = _fc(Mfc, me=C)
    mfc.down([_msg(None, 1000, "m1"), _msg(None, 10, "m2")], 0.0)
    assert _names(down_messages(mfc)) == [b"m1"] and mfc.blocks_down()
    batch = [
        Message(None, b"a1" + b"." * 98, src=A),
        _control(A, C, ids.MFC, REPLENISH, 1000),
        Message(None, b"a2" + b"." * 48, src=A),
        Message(None, b"b1" + b"." * 198, src=B, flags=Flag.NO_FC),
        Message(None, b"", src=B),
        _control(B, C, ids.MFC, REPLENISH, 1000),
        Message(None, b"b2" + b"." * 8, src=B),
        Message(None, b"a3" + b"." * 8, src=A),
        _control(C, C, ids.MFC, REPLENISH, 1000),
    ]
    mfc.up(batch, 0.1)
    assert _names(up_messages(mfc)) == [b"a1", b"a2", b"b1", b"", b"b2", b"a3"]
    stats = mfc.stats()
    assert stats["receiver_credits"] == {"A": 840, "B": 990, "C": 1000}
    assert stats["bytes_received"] == 170 and stats["replenishments_received"] == 3
    assert _names(down_messages(mfc)) == [b"m2"] and not mfc.blocks_down()


def test_flow_min_credits_overrides_max_credits_times_min_threshold() -> None:
    ufc = _fc(Ufc, me=B, min_credits=900)
    ufc.up([Message(B, b"x" * 100, src=A)], 0.0)
    assert _controls(down_messages(ufc), ids.UFC) == [(A, FcHeader(REPLENISH, 100))]


def test_ufc_receiver_counts_unicasts_only_and_skips_no_fc() -> None:
    ufc = _fc(Ufc, me=B, min_threshold=1.0)
    ufc.up(
        [
            Message(None, b"x" * 500, src=A),
            Message(B, b"x" * 500, src=A, flags=Flag.NO_FC),
            Message(B, b"", src=A),
            Message(B, b"x" * 5, src=D),
        ],
        0.0,
    )
    assert len(up_messages(ufc)) == 4 and _controls(down_messages(ufc), ids.UFC) == []


def test_ufc_receiver_answers_a_credit_request_with_replenish_at_once() -> None:
    ufc = _fc(Ufc, me=B)
    ufc.up([Message(B, b"x" * 300, src=A)], 0.0)
    ufc.up([_control(A, B, ids.UFC, CREDIT_REQUEST, 800)], 0.1)
    assert _controls(down_messages(ufc), ids.UFC) == [(A, FcHeader(REPLENISH, 800))]
    stats = ufc.stats()
    assert stats["credit_requests_received"] == 1 and stats["receiver_credits"]["A"] == 1000
    ufc.up([_control(D, B, ids.UFC, CREDIT_REQUEST, 800)], 0.2)  # not a member: no credits
    assert _controls(down_messages(ufc), ids.UFC) == []


def test_flow_control_messages_with_negative_credits_are_ignored() -> None:
    ufc = _fc(Ufc)
    ufc.up([_control(B, A, ids.UFC, REPLENISH, -5), _control(B, A, ids.UFC, 7, 5)], 0.0)
    assert ufc.stats()["sender_credits"]["B"] == 1000 and up_messages(ufc) == []


# --- MFC ---------------------------------------------------------------------------------------


def test_mfc_multicast_needs_credits_from_every_member() -> None:
    mfc = _fc(Mfc)
    mfc.down([_msg(None, 400, "m1"), _msg(None, 400, "m2"), _msg(None, 400, "m3")], 0.0)
    assert _names(down_messages(mfc)) == [b"m1", b"m2"] and mfc.blocks_down()
    stats = mfc.stats()
    assert stats["sender_credits"] == {"A": 200, "B": 200, "C": 200}
    assert stats["min_credits_left"] == 200
    mfc.up([_control(B, A, ids.MFC, REPLENISH, 800), _control(A, A, ids.MFC, REPLENISH, 800)], 1.0)
    assert down_messages(mfc) == []  # C has not replenished: the minimum is still 200
    mfc.up([_control(C, A, ids.MFC, REPLENISH, 300)], 2.0)
    assert _names(down_messages(mfc)) == [b"m3"]
    assert mfc.stats()["sender_credits"] == {"A": 600, "B": 600, "C": 100}


def test_mfc_unicasts_pass_and_the_receiver_counts_only_multicasts() -> None:
    mfc = _fc(Mfc, me=B, min_threshold=1.0)
    mfc.down([_msg(C, 5000, "u")], 0.0)
    assert _names(down_messages(mfc)) == [b"u"]
    mfc.up([Message(B, b"x" * 500, src=A)], 0.0)
    assert _controls(down_messages(mfc), ids.MFC) == []
    mfc.up([Message(None, b"x" * 5, src=A)], 0.0)
    assert _controls(down_messages(mfc), ids.MFC) == [(A, FcHeader(REPLENISH, 5))]


def test_mfc_credit_request_goes_only_to_the_members_short_of_credits() -> None:
    mfc = _fc(Mfc)
    mfc.down([_msg(None, 700, "m1")], 0.0)
    mfc.up([_control(B, A, ids.MFC, REPLENISH, 700), _control(A, A, ids.MFC, REPLENISH, 700)], 0.1)
    mfc.down([_msg(None, 700, "m2")], 0.2)
    assert _names(down_messages(mfc)) == [b"m1"]
    mfc.tick(0.7)
    assert _controls(down_messages(mfc), ids.MFC) == [(C, FcHeader(CREDIT_REQUEST, 700))]


def test_mfc_view_change_that_removes_the_slow_member_releases_blocked_multicasts() -> None:
    mfc = _fc(Mfc)
    mfc.down([_msg(None, 700, "m1"), _msg(None, 700, "m2")], 0.0)
    mfc.up([_control(B, A, ids.MFC, REPLENISH, 700), _control(A, A, ids.MFC, REPLENISH, 700)], 0.1)
    assert _names(down_messages(mfc)) == [b"m1"] and mfc.blocks_down()
    mfc.view_changed(view_of(A, B, D, counter=2), 1.0)
    assert _names(down_messages(mfc)) == [b"m2"] and not mfc.blocks_down()
    assert mfc.stats()["sender_credits"] == {"A": 300, "B": 300, "D": 300}  # m2 reached D too


def test_mfc_dont_loopback_multicasts_are_accounted_at_once() -> None:
    """JGroups: a DONT_LOOPBACK multicast never comes back, so we count it as received."""
    mfc = _fc(Mfc, min_threshold=1.0)
    mfc.down([_msg(None, 100, "quiet", flags=Flag.DONT_LOOPBACK)], 0.0)
    out = down_messages(mfc)
    assert _names([m for m in out if ids.MFC not in m.headers]) == [b"quiet"]
    assert _controls(out, ids.MFC) == [(A, FcHeader(REPLENISH, 100))]


def test_mfc_without_a_view_does_not_block() -> None:
    mfc = Mfc(max_credits=100)
    mfc.start(A, "c", 0.0)
    mfc.down([_msg(None, 500, "m")], 0.0)
    assert len(down_messages(mfc)) == 1 and not mfc.blocks_down()


# --- configuration and wire ----------------------------------------------------------------------


@pytest.mark.parametrize("cls", [Ufc, Mfc])
def test_flow_properties_are_validated_and_keep_the_jgroups_names(cls: type[FlowControl]) -> None:
    proto = cls()
    assert proto.properties() == {
        "max_credits": 5_000_000,
        "min_threshold": 0.4,
        "min_credits": 0,
        "max_block_time": 0.5,
    }
    assert cls(max_credits="2MB", max_block_time="100ms").max_credits == 2 << 20
    with pytest.raises(PropertyError, match=rf"{cls.name}\.max_credits must be > 0"):
        cls(max_credits=0)
    with pytest.raises(PropertyError, match=rf"{cls.name}\.min_threshold must be in \[0, 1\]"):
        cls(min_threshold=1.5)
    with pytest.raises(PropertyError, match=rf"{cls.name}\.max_block_time must be >= 0"):
        cls(max_block_time=-1)


def test_flow_headers_roundtrip_through_the_wire_codec() -> None:
    codec = WireCodec("c")
    msgs = [
        Message(B, headers={ids.UFC: FcHeader(REPLENISH, 123)}),
        Message(B, headers={ids.MFC: FcHeader(CREDIT_REQUEST, 4_000_000)}),
    ]
    decoded = codec.decode(codec.encode(B, A, msgs))
    assert [m.headers for m in decoded.messages] == [m.headers for m in msgs]
    assert all(m.flags == 0 for m in decoded.messages)


def test_flow_credit_messages_are_oob_and_internal() -> None:
    ufc = _fc(Ufc, me=B, min_threshold=1.0)
    ufc.up([Message(B, b"x", src=A)], 0.0)
    (replenish,) = down_messages(ufc)
    assert replenish.flags == Flag.OOB | Flag.INTERNAL and replenish.payload == b""


# --- a batch at once, or one message at a time ---------------------------------------------


def test_mfc_batch_its_credits_cover_goes_at_once_and_spends_exactly_its_total() -> None:
    mfc = _fc(Mfc)
    mfc.down([_msg(None, 100, f"m{i}") for i in range(10)], 0.0)
    assert len(down_messages(mfc)) == 10 and not mfc.blocks_down()
    assert mfc.stats()["min_credits_left"] == 0 and mfc.stats()["bytes_sent"] == 1000
    mfc.down([_msg(None, 1, "late")], 0.1)
    assert down_messages(mfc) == [] and mfc.blocks_down()


def test_ufc_batch_just_over_the_credits_sends_up_to_the_first_message_that_lacks_them() -> None:
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 600, "b1"), _msg(C, 10, "c1"), _msg(B, 401, "b2"), _msg(B, 1, "b3")], 0.0)
    assert _names(down_messages(ufc)) == [b"b1", b"c1"] and ufc.blocks_down()
    assert ufc.stats()["sender_credits"]["B"] == 400 and ufc.stats()["queued_messages"] == 2
    ufc = _fc(Ufc)
    ufc.down([_msg(B, 600, "b1"), _msg(B, 401, "b2")], 0.0)  # one destination: one check
    assert _names(down_messages(ufc)) == [b"b1"] and ufc.stats()["sender_credits"]["B"] == 400


_dests = st.sampled_from([None, B, C, D])  # D is outside the view
_flag_sets = st.sampled_from([0, 0, 0, Flag.OOB, Flag.NO_FC, Flag.DONT_BLOCK, Flag.DONT_LOOPBACK])
_batches = st.lists(st.tuples(_dests, st.integers(0, 400), _flag_sets), min_size=1, max_size=12)
_steps = st.lists(st.one_of(_batches, st.integers(1, 600)), min_size=1, max_size=12)


@settings(max_examples=examples(150), deadline=None)
@given(cls=st.sampled_from([Ufc, Mfc]), steps=_steps)
def test_flow_batch_at_once_sends_what_one_message_at_a_time_sends(
    cls: type[FlowControl], steps: list[Any]
) -> None:
    """`down` lets a whole batch go with one credit check when nothing waits, one
    destination is flow controlled and its credits cover the batch. Driven with random
    batches (destinations, sizes, OOB, NO_FC, DONT_BLOCK, DONT_LOOPBACK) and replenishments,
    it sends, queues, drops and counts exactly what the one-message-at-a-time path does."""
    fast, slow = _fc(cls), _fc(cls)
    slow._down_at_once = lambda batch, now: False  # type: ignore[method-assign]
    for t, step in enumerate(steps):
        now = t * 0.1
        if isinstance(step, int):  # every member replenishes ``step`` bytes
            for proto in (fast, slow):
                proto.up([_control(m, A, cls.id, REPLENISH, step) for m in (A, B, C)], now)
        else:
            for proto in (fast, slow):
                proto.down(
                    [_msg(d, size, str(i), flags=f) for i, (d, size, f) in enumerate(step)], now
                )
        sent_fast, sent_slow = fast.take_down(), slow.take_down()
        assert [[(m.dest, m.payload, m.flags) for m in item] for item in sent_fast] == [
            [(m.dest, m.payload, m.flags) for m in item] for item in sent_slow
        ]
        fast.take_up()
        slow.take_up()
        assert fast.stats() == slow.stats()


@pytest.mark.parametrize(("cls", "dest"), [(Ufc, B), (Mfc, None)])
def test_flow_leaving_releases_what_waits_for_credits_and_holds_back_nothing_any_more(
    cls: type[FlowControl], dest: Address | None
) -> None:
    """Once the member has left the group (`Disconnected` from GMS below) nobody grants
    credits any more: what waited goes on, later messages pass without credits, and no
    sender stays blocked. A `Disconnect` going down only asks GMS to leave: credits may
    still come meanwhile. (A send blocked on credits never returned after its member
    left.)"""
    fc = _fc(cls)
    fc.check_stack([Gms()], [])  # GMS below: a Disconnect going down asks it to leave
    fc.down([_msg(dest, 600, "1"), _msg(dest, 600, "2"), _msg(dest, 300, "3")], 0.0)
    assert _names(down_messages(fc)) == [b"1"] and fc.blocks_down()
    fc.down_event(Disconnect(), 0.5)
    assert down_messages(fc) == [] and fc.blocks_down()
    fc.up_event(Disconnected(), 1.0)
    assert _names(down_messages(fc)) == [b"2", b"3"] and not fc.blocks_down()
    stats = fc.stats()
    assert stats["released_at_leave"] == 2 and stats["time_blocked"] == pytest.approx(1.0)
    assert fc.next_deadline() == float("inf")
    fc.down([_msg(dest, 900, "4"), _msg(dest, 900, "5")], 2.0)
    assert _names(down_messages(fc)) == [b"4", b"5"] and not fc.blocks_down()


@pytest.mark.parametrize(("cls", "dest"), [(Ufc, B), (Mfc, None)])
def test_flow_without_gms_below_a_disconnect_going_down_releases_the_senders(
    cls: type[FlowControl], dest: Address | None
) -> None:
    fc = _fc(cls)
    fc.check_stack([], [Gms()])
    fc.down([_msg(dest, 600, "1"), _msg(dest, 600, "2")], 0.0)
    down_messages(fc)
    fc.down_event(Disconnect(), 1.0)
    assert _names(down_messages(fc)) == [b"2"] and not fc.blocks_down()
