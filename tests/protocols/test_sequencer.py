"""SEQUENCER's rules, one protocol object driven by hand (sans-IO).

Forwarding to the coordinator, the coordinator's one order, duplicates dropped by the
highest seqno per forwarder, the forward table re-forwarded (FLUSH) after the
coordinator changes, the tail hand-over to a new coordinator, the leave flush, and the
log trimmed by STABLE's digests.
"""

from __future__ import annotations

import pytest

from triogroups import Address, Message
from triogroups.config import StackConfig
from triogroups.events import (
    FlushDone,
    FlushRequest,
    StableDigest,
    Suspect,
    ViewChange,
)
from triogroups.message import Flag
from triogroups.properties import PropertyError
from triogroups.protocols import ids
from triogroups.protocols.gms._header import VIEW as GMS_VIEW
from triogroups.protocols.gms._header import GmsHeader
from triogroups.protocols.sequencer import (
    BCAST,
    FLUSH,
    FORWARD,
    TAIL,
    TAIL_END,
    Sequencer,
    SequencerHeader,
)
from triogroups.protocols.sequencer._header import as_header
from triogroups.protocols.sequencer._log import Log, Logged
from triogroups.protocols.sequencer._recovery import ENDS_IN_ORDER, OTHER_ORDER
from triogroups.testing import addresses, split, started, view_of
from triogroups.view import Digest, MergeView, View, ViewId

A, B, C, D, E, H = addresses("ABCDEH")
_ID = ids.SEQUENCER


def _hdr(msg: Message) -> SequencerHeader:
    """The message's SEQUENCER header as the NamedTuple (a FORWARD travels as its seqno)."""
    return as_header(msg.headers[_ID])


def _down(proto: Sequencer) -> list[Message]:
    return split(proto.take_down())[0]


def _bcast(coord: Address, sender: Address, seqno: int, payload: bytes, nak: int) -> Message:
    """The coordinator's multicast of ``sender``'s ``seqno`` as NAKACK2 hands it up."""
    return Message(
        None,
        payload,
        src=coord,
        headers={_ID: SequencerHeader(BCAST, seqno, sender), ids.NAKACK2: nak},
    )


def _forward(src: Address, seqno: int, payload: bytes, kind: int = FORWARD) -> Message:
    return Message(A, payload, src=src, headers={_ID: SequencerHeader(kind, seqno)})


def test_sequencer_participant_forwards_each_multicast_to_the_coordinator() -> None:
    """A regular multicast becomes a FORWARD unicast to the coordinator, with the
    member's next seqno; unicasts and OOB or INTERNAL multicasts go down untouched."""
    seq = started(Sequencer(), B, view=view_of(A, B, C))
    uni, oob = Message(C, b"u"), Message(None, b"o", flags=Flag.OOB)
    seq.down([Message(None, b"1"), uni, oob, Message(None, b"2")], 0.0)
    out = _down(seq)
    assert [(m.dest, m.payload) for m in out] == [(A, b"1"), (C, b"u"), (None, b"o"), (A, b"2")]
    assert out[1] is uni and out[2] is oob
    assert [_hdr(out[i]) for i in (0, 3)] == [
        SequencerHeader(FORWARD, 1),
        SequencerHeader(FORWARD, 2),
    ]
    assert seq.stats()["forward_table"] == 2
    assert not seq.take_up()  # nothing is delivered before the coordinator's multicast


def test_sequencer_coordinator_multicasts_forwards_in_arrival_order() -> None:
    """The coordinator multicasts each forward (and its own multicasts) as BCAST naming
    the forwarder and its seqno, in the order they reach it: that is the one order."""
    seq = started(Sequencer(), A, view=view_of(A, B, C))
    seq.up([_forward(B, 1, b"b1"), _forward(C, 1, b"c1"), _forward(B, 2, b"b2")], 0.0)
    seq.down([Message(None, b"a1")], 0.0)
    out = _down(seq)
    assert [m.dest for m in out] == [None] * 4
    assert [(_hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [
        (B, 1, b"b1"),
        (C, 1, b"c1"),
        (B, 2, b"b2"),
        (A, 1, b"a1"),
    ]
    assert all(_hdr(m).type == BCAST for m in out)


def test_sequencer_coordinator_keeps_forwards_from_non_members_until_it_steps_down() -> None:
    """A forward from a non-member is not multicast; it waits while this member
    coordinates (see the merge tests below) and is dropped when it stops."""
    seq = started(Sequencer(), A, view=view_of(A, B))
    seq.up([_forward(D, 1, b"d1")], 0.0)
    assert _down(seq) == []
    seq.down_event(ViewChange(view_of(A, B, C, counter=2)), 0.0)
    assert _down(seq) == []
    assert seq.stats()["non_member_kept"] == 2  # kept again at the view without D
    seq.down_event(ViewChange(view_of(B, A, C, counter=3)), 0.0)
    assert [m for m in _down(seq) if _hdr(m).type == BCAST] == []
    assert seq.stats()["early_dropped"] == 1


def test_sequencer_member_merged_back_under_the_same_coordinator_reforwards() -> None:
    """Chaos udp-total seed 4242, campaign udp-total seed 2: B, paused, was left out of A's
    view 2; resumed, still in view 1, it forwarded b1, which A dropped as a non-member's.
    The merge view took B back under the same coordinator A, so nothing re-forwarded b1:
    no member ever delivered it, and it stayed in B's forward table for good. A merge
    view now makes a forwarder send its forward table again (FLUSH), as a new
    coordinator does; what was delivered already is dropped as a duplicate."""
    seq = started(Sequencer(), B, view=view_of(A, B))
    seq.down([Message(None, b"b1")], 0.0)
    assert [_hdr(m).type for m in _down(seq)] == [FORWARD]
    merged = MergeView(ViewId(3, A), [A, B], [view_of(A, counter=2), view_of(A, B)])
    seq.down_event(ViewChange(merged), 0.0)
    out = _down(seq)
    assert [(m.dest, _hdr(m).type, _hdr(m).seqno, m.payload) for m in out] == [
        (A, TAIL_END, 0, b""),  # the merge view's coordinator may await our tail
        (A, FLUSH, 1, b"b1"),
    ]


def test_sequencer_coordinator_keeps_a_non_members_forward_for_its_merge_view() -> None:
    """The other half of the merge (campaign udp-total seed 2): A's views left B out
    for two views while B, paused, still forwarded; A dropped those forwards, and B's
    next forward, after A's merge view took it back, was ordered and delivered, so B
    forgot the dropped ones as delivered and every member skipped them. A now keeps a
    non-member's forwards in arrival order and orders them first once B is back."""
    seq = started(Sequencer(), A, view=view_of(A, counter=2))
    seq.up([_forward(B, 1, b"b1"), _forward(B, 2, b"b2")], 0.0)
    assert _down(seq) == []
    seq.down_event(ViewChange(view_of(A, C, counter=3)), 0.0)  # B still out: they wait
    assert _down(seq) == []
    merged = MergeView(ViewId(4, A), [A, B, C], [view_of(A, C, counter=3), view_of(A, B)])
    seq.down_event(ViewChange(merged), 0.0)
    seq.up([_forward(B, 3, b"b3")], 0.0)  # B's next forward comes after them
    out = _down(seq)
    assert [(m.dest, _hdr(m).type, _hdr(m).sender, m.payload) for m in out] == [
        (None, BCAST, B, b"b1"),
        (None, BCAST, B, b"b2"),
        (None, BCAST, B, b"b3"),
    ]


def test_sequencer_delivers_with_the_forwarder_as_source_and_drops_duplicates() -> None:
    """A BCAST is delivered with its forwarder as source; one whose seqno is not above
    the forwarder's highest delivered is a duplicate (a re-forward, a tail resent)."""
    seq = started(Sequencer(), C, view=view_of(A, B, C))
    seq.up([_bcast(A, B, 1, b"b1", 1), _bcast(A, B, 2, b"b2", 2)], 0.0)
    seq.up([_bcast(A, B, 1, b"b1", 3), _bcast(A, B, 2, b"b2", 4), _bcast(A, B, 3, b"b3", 5)], 0.0)
    delivered = split(seq.take_up())[0]
    assert [(m.src, m.payload) for m in delivered] == [(B, b"b1"), (B, b"b2"), (B, b"b3")]
    assert seq.stats()["duplicates"] == 2


def test_sequencer_drops_bcasts_of_a_coordinator_no_longer_in_charge() -> None:
    """Once the view names a new coordinator, a late multicast of the old one is not
    delivered: the members' tails decide what of the old order everyone gets."""
    seq = started(Sequencer(), C, view=view_of(A, B, C))
    seq.down_event(ViewChange(view_of(B, C, counter=2)), 0.0)
    seq.take_down()
    seq.up([_bcast(A, B, 1, b"late", 7)], 0.0)
    assert split(seq.take_up())[0] == []
    assert seq.stats()["bcasts_not_from_coord"] == 1


def test_sequencer_keeps_a_bcast_stamped_with_a_view_to_come_until_that_view() -> None:
    """Campaign udp-total 257: E and G, in G's merge view 10, got F's BCASTs of F's view 11
    before they installed it (F, a member of their view, was not their coordinator yet):
    dropped as not from the coordinator, and consumed below, D's and F's messages of view
    11 never reached them. A BCAST stamped with a later view than ours is now kept until
    the next view, and delivered if that view makes its sender our coordinator; one of an
    earlier order (stamped below the view where our coordinator changed) is dropped."""
    seq = started(Sequencer(), E, view=view_of(C, E, B, counter=10))

    def bcast(seqno: int, view: int) -> Message:
        hdr = SequencerHeader(BCAST, seqno, D, 0, view)
        return Message(None, b"d%d" % seqno, src=B, headers={_ID: hdr, ids.NAKACK2: seqno})

    seq.up([bcast(1, 10), bcast(2, 11), bcast(3, 11)], 0.0)
    assert split(seq.take_up())[0] == []
    assert seq.stats()["bcasts_held_for_view"] == 2  # counted: nothing goes unsaid
    seq.down_event(ViewChange(view_of(B, C, E, counter=11)), 0.0)
    delivered = split(seq.take_up())[0]
    assert [(m.src, m.payload) for m in delivered] == [(D, b"d2"), (D, b"d3")]
    assert seq.stats()["bcasts_not_from_coord"] == 1  # d1, stamped with our own view


def _stamped(coord: Address, sender: Address, seqno: int, view: int) -> Message:
    """``coord``'s BCAST of ``sender``'s ``seqno``, stamped with ``view``."""
    hdr = SequencerHeader(BCAST, seqno, sender, 0, view)
    return Message(None, b"%d" % seqno, src=coord, headers={_ID: hdr, ids.NAKACK2: seqno})


def test_sequencer_holds_its_coordinator_s_bcasts_behind_one_of_a_view_to_come() -> None:
    """Campaign udp-total 71059: C, the coordinator, and E were paused; B took over in
    views 5 and 6 and ordered B12 before G4 (D4 here). C, resumed, ordered the forwards it
    had queued, G4 first, and E, resumed while still in C's view 4, delivered C's order
    from the same batch as B's BCASTs stamped with view 6. A BCAST of a view to come says our
    coordinator may be stale: our coordinator's BCASTs now wait behind it for the next
    view, and are dropped if that view made another member our coordinator (or
    delivered if it kept ours). Only until that view: a BCAST held past it holds
    nothing behind it (the protocol fuzzer's forged stamp stalled every delivery)."""
    seq = started(Sequencer(), E, view=view_of(C, B, E, D, counter=4))
    seq.up([_stamped(B, B, 12, 6), _stamped(B, D, 4, 6), _stamped(C, D, 4, 4)], 0.0)
    seq.up([_stamped(C, B, 12, 4)], 0.0)
    assert split(seq.take_up())[0] == []
    assert seq.stats()["bcasts_held_for_view"] == 4
    seq.down_event(ViewChange(view_of(B, E, D, counter=6)), 0.0)
    delivered = split(seq.take_up())[0]
    assert [(m.src, m.payload) for m in delivered] == [(B, b"12"), (D, b"4")]  # B's order
    assert seq.stats()["bcasts_not_from_coord"] == 2  # C's, after the view without it

    kept = started(Sequencer(), E, view=view_of(C, B, E, counter=4))
    kept.up([_stamped(B, B, 12, 5), _stamped(C, D, 4, 4)], 0.0)
    kept.down_event(ViewChange(view_of(C, E, counter=5)), 0.0)  # C stays ours
    assert [(m.src, m.payload) for m in split(kept.take_up())[0]] == [(D, b"4")]

    # a stamp no view reaches (forged, or a view never installed) holds ours one view only
    forged = started(Sequencer(), E, view=view_of(C, B, E, counter=4))
    forged.up([_stamped(B, B, 1, 99), _stamped(C, D, 4, 4)], 0.0)
    forged.down_event(ViewChange(view_of(C, B, E, counter=5)), 0.0)
    assert [(m.src, m.payload) for m in split(forged.take_up())[0]] == [(D, b"4")]
    forged.up([_stamped(C, D, 5, 5)], 0.0)
    assert [(m.src, m.payload) for m in split(forged.take_up())[0]] == [(D, b"5")]


def test_sequencer_holds_its_coordinator_s_bcasts_behind_a_view_in_the_same_batch() -> None:
    """Campaign tcp-total-blocks 71012: H, the coordinator, and D were paused; B took over
    in views 4 and 5 and its recovery ordered B1-7 before A1-4. H, resumed, ordered its
    queued forwards, A1-4 first, in view 3; the others had view 4 and dropped them. D,
    resumed in view 3, got one batch: B's VIEW 4, then H's BCASTs, then B's. SEQUENCER,
    below GMS, judged the whole batch by view 3 and delivered H's order; GMS installed
    view 4 only after. A VIEW that GMS installs after the batch and that changes our
    coordinator now holds our coordinator's BCASTs after it until that view, which drops
    them; a VIEW that keeps our coordinator, or one GMS would not install, holds nothing."""
    view3, view4 = view_of(H, B, D, A, counter=3), view_of(B, D, A, counter=4)

    def view_msg(view: View, src: Address, ref: ViewId = view3.view_id) -> Message:
        hdr = GmsHeader(GMS_VIEW, view, ref_view_id=ref)
        return Message(None, src=src, headers={ids.GMS: hdr})

    seq = started(Sequencer(), D, view=view3)
    vmsg = view_msg(view4, B)
    seq.up([_stamped(H, A, 3, 2), vmsg, _stamped(H, A, 4, 3), _stamped(H, B, 6, 3)], 0.0)
    up = split(seq.take_up())[0]
    assert [(m.src, m.payload) for m in up[:1]] == [(A, b"3")] and up[1] is vmsg
    assert len(up) == 2 and seq.stats()["bcasts_held_for_view"] == 2
    seq.down_event(ViewChange(view4), 0.0)
    assert split(seq.take_up())[0] == []  # H's, after the view without it: dropped
    assert seq.stats()["bcasts_not_from_coord"] == 2
    seq.up([_stamped(B, B, 6, 4), _stamped(B, A, 4, 4)], 0.0)  # B's recovery
    assert [(m.src, m.payload) for m in split(seq.take_up())[0]] == [(B, b"6"), (A, b"4")]

    for vmsg in (
        view_msg(view_of(H, D, A, counter=4), H),  # keeps our coordinator
        view_msg(view_of(B, A, counter=4), B),  # without us: GMS ignores it
        view_msg(view_of(B, D, A, counter=3), B),  # not newer than ours
        view_msg(view4, B, ViewId(3, B)),  # made from a view not ours: GMS ignores it
    ):
        kept = started(Sequencer(), D, view=view3)
        kept.up([vmsg, _stamped(H, A, 4, 3)], 0.0)
        assert [(m.src, m.payload) for m in split(kept.take_up())[0][1:]] == [(A, b"4")]


def test_sequencer_keeps_what_it_forwarded_until_delivered_then_forgets_it() -> None:
    seq = started(Sequencer(), B, view=view_of(A, B, C))
    seq.down([Message(None, b"1"), Message(None, b"2")], 0.0)
    seq.take_down()
    seq.up([_bcast(A, B, 1, b"1", 1)], 0.0)
    assert seq.stats()["forward_table"] == 1
    seq.up([_bcast(A, B, 2, b"2", 2)], 0.0)
    assert seq.stats()["forward_table"] == 0


def test_sequencer_dont_loopback_multicast_is_ordered_but_not_delivered_to_its_sender() -> None:
    seq = started(Sequencer(), B, view=view_of(A, B, C))
    seq.down([Message(None, b"x", flags=Flag.DONT_LOOPBACK)], 0.0)
    (fwd,) = _down(seq)
    assert fwd.dest == A and not fwd.flags & Flag.DONT_LOOPBACK
    seq.up([_bcast(A, B, 1, b"x", 1)], 0.0)
    assert split(seq.take_up())[0] == []
    assert seq.stats()["forward_table"] == 0


def test_sequencer_after_the_coordinator_crashed_hands_its_tail_then_reforwards() -> None:
    """C delivered B's 1 and its own 1 from A, forwarded its 2 and 3; A crashes and B
    coordinates: C sends B its log (TAIL each, then TAIL_END), then its forward table
    again in seqno order (FLUSH), before anything new."""
    seq = started(Sequencer(), C, view=view_of(A, B, C))
    seq.down([Message(None, b"c1"), Message(None, b"c2"), Message(None, b"c3")], 0.0)
    seq.take_down()
    seq.up([_bcast(A, B, 1, b"b1", 1), _bcast(A, C, 1, b"c1", 2)], 0.0)
    seq.take_up()
    seq.down_event(ViewChange(view_of(B, C, counter=2)), 0.0)
    seq.down([Message(None, b"c4")], 0.0)
    out = _down(seq)
    assert all(m.dest == B for m in out)
    assert [(_hdr(m).type, _hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [
        (TAIL, B, 1, b"b1"),
        (TAIL, C, 1, b"c1"),
        (TAIL_END, None, 2, b""),
        (FLUSH, None, 2, b"c2"),
        (FLUSH, None, 3, b"c3"),
        (FORWARD, None, 4, b"c4"),
    ]
    assert ids.NAKACK2 not in out[0].headers  # only the upper layers' headers travel


def test_sequencer_new_coordinator_multicasts_the_furthest_tail_then_what_waited() -> None:
    """B takes over from A. It delivered A's order up to b1; C got further (b1, c1, d1);
    D less. B waits for every tail, multicasts C's (the furthest: it holds the others'
    last messages) and only then the forwards it received meanwhile, in order."""
    seq = started(Sequencer(), B, view=view_of(A, B, C, D))
    seq.down([Message(None, b"b1"), Message(None, b"b2")], 0.0)
    seq.take_down()
    seq.up([_bcast(A, B, 1, b"b1", 1)], 0.0)
    seq.take_up()
    seq.down_event(ViewChange(view_of(B, C, D, counter=2)), 0.0)
    assert _down(seq) == [] and seq.stats()["recovering"]

    def tail(src: Address, entries: list[tuple[Address, int, bytes]]) -> list[Message]:
        msgs = [
            Message(B, p, src=src, headers={_ID: SequencerHeader(TAIL, n, s)})
            for s, n, p in entries
        ]
        end = SequencerHeader(TAIL_END, len(msgs), view=1)  # its coordinator changed
        return [*msgs, Message(B, src=src, headers={_ID: end})]

    seq.up(tail(C, [(B, 1, b"b1"), (C, 1, b"c1"), (D, 1, b"d1")]), 0.0)
    seq.up([_forward(C, 2, b"c2", FLUSH)], 0.0)
    assert _down(seq) == []  # D's tail is still missing
    seq.up(tail(D, [(B, 1, b"b1")]), 0.0)
    out = _down(seq)
    assert [(_hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [
        (B, 1, b"b1"),
        (C, 1, b"c1"),
        (D, 1, b"d1"),
        (B, 2, b"b2"),  # B's own forward table, forwarded to A and never delivered
        (C, 2, b"c2"),
    ]
    assert all(m.dest is None and _hdr(m).type == BCAST for m in out)
    assert not seq.stats()["recovering"]


def _tail(
    coord: Address, src: Address, entries: list[tuple[Address, int, bytes]], changed: bool = True
) -> list[Message]:
    """``src``'s TAILs of ``entries`` (sender, seqno, payload) and its TAIL_END, to ``coord``
    (``changed``: ``src``'s coordinator changed at the view, so its log is another order's)."""
    msgs = [
        Message(coord, p, src=src, headers={_ID: SequencerHeader(TAIL, n, s)})
        for s, n, p in entries
    ]
    end = SequencerHeader(TAIL_END, len(msgs), view=int(changed))
    return [*msgs, Message(coord, src=src, headers={_ID: end})]


def test_sequencer_merge_view_recovers_the_other_subgroups_order() -> None:
    """Campaign udp-total seed 24: D's merge view took B's subgroup (C, E; B crashed) under
    D, the coordinator of a subgroup of its own. D's coordinator did not change, so it ran
    no recovery: C had missed b1 of B's order, E had it, and C got it only at a later
    recovery, after newer messages E had delivered before it: two orders. The merge view's
    coordinator now waits for the tails of each subgroup another coordinator ordered and
    multicasts the furthest of each before anything new; its own subgroup's members are
    not awaited (its order goes on)."""
    seq = started(Sequencer(), D, view=view_of(D, A, counter=3))
    subgroups = [view_of(D, A, counter=3), view_of(B, C, E, counter=4)]
    merged = MergeView(ViewId(5, D), [D, A, C, E], subgroups)
    seq.down_event(ViewChange(merged), 0.0)
    assert _down(seq) == [] and seq.stats()["recovering"]
    seq.up(_tail(D, C, [(B, 1, b"b0")]), 0.0)
    seq.up([_forward(A, 1, b"a1"), _forward(C, 1, b"c1", FLUSH)], 0.0)
    assert _down(seq) == []  # E's tail is still missing
    seq.up(_tail(D, E, [(B, 1, b"b0"), (B, 2, b"b1")]), 0.0)
    out = _down(seq)
    assert [(_hdr(m).type, _hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [
        (BCAST, B, 1, b"b0"),
        (BCAST, B, 2, b"b1"),  # what C missed, before anything new
        (BCAST, A, 1, b"a1"),
        (BCAST, C, 1, b"c1"),
    ]
    assert not seq.stats()["recovering"]


def test_sequencer_merge_view_multicasts_its_coordinator_s_own_order_again() -> None:
    """Campaign tcp-total seed 71018: A, the coordinator, paused, resumed after C's subgroup
    had gone on without it and ordered the forwards it had queued, H1-1 before F1-9, in
    its old view; D, of A's subgroup, delivered that order. C's subgroup dropped those
    BCASTs (stamped before the merge view: another order's), and F's and H's FLUSHes at
    A's merge view brought F1-9 to them first. The merge view's coordinator now
    multicasts its own log again after the other subgroups' tails, in its order, so the
    FLUSHes that follow are duplicates everywhere."""
    seq = started(Sequencer(), D, view=view_of(D, A, C, E, counter=3))
    seq.up([_forward(E, 1, b"e1"), _forward(C, 1, b"c1")], 0.0)
    _down(seq)
    seq.up([_bcast(D, E, 1, b"e1", 1), _bcast(D, C, 1, b"c1", 2)], 0.0)  # our order
    seq.down_event(ViewChange(view_of(D, A, counter=4)), 0.0)
    subgroups = [view_of(D, A, counter=4), view_of(B, C, E, counter=4)]
    seq.down_event(ViewChange(MergeView(ViewId(5, D), [D, A, C, E], subgroups)), 0.0)
    seq.up([*_tail(D, C, []), *_tail(D, E, [])], 0.0)  # B's order gave them nothing
    seq.up([_forward(C, 1, b"c1", FLUSH), _forward(E, 1, b"e1", FLUSH)], 0.0)
    out = _down(seq)
    assert [(_hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [
        (E, 1, b"e1"),
        (C, 1, b"c1"),  # our order again, before anything new
        (C, 1, b"c1"),  # the FLUSHes, queued: duplicates members drop
        (E, 1, b"e1"),
    ]
    assert all(_hdr(m).view == 5 for m in out)  # stamped with the merge view: kept


def test_sequencer_merge_view_awaits_a_member_its_own_subgroup_claimed_too() -> None:
    """Campaign udp-total 171: D's stale subgroup view still held A and E, which had gone on
    under A with B; A ordered b14, which A and E delivered and B missed. D's merge view
    left A and E out of the wait as members of its own subgroup, so only B's tail (without
    b14) counted; B's FLUSH had D order b14 again after E's newer e8, and B delivered them
    the other way round. A member in another coordinator's subgroup is now awaited even if
    ours claims it too; its TAIL_END says whether its coordinator stays (C's does: its log
    is of D's order and does not count)."""
    seq = started(Sequencer(), D, view=view_of(D, A, E, C, counter=6))
    subgroups = [view_of(D, A, E, C, counter=6), view_of(A, C, E, B, counter=6)]
    seq.down_event(ViewChange(MergeView(ViewId(7, D), [D, A, E, C, B], subgroups)), 0.0)
    seq.up(_tail(D, B, [(A, 1, b"a1")]), 0.0)
    seq.up(_tail(D, C, [(D, 1, b"d1")], changed=False), 0.0)
    seq.up([_forward(B, 14, b"b14", FLUSH)], 0.0)
    assert _down(seq) == [] and seq.stats()["recovering"]  # A's and E's tails missing
    seq.up(_tail(D, A, [(A, 1, b"a1"), (B, 14, b"b14")]), 0.0)
    seq.up(_tail(D, E, [(A, 1, b"a1"), (B, 14, b"b14")]), 0.0)
    seq.up([_forward(E, 8, b"e8", FLUSH)], 0.0)
    out = _down(seq)
    assert [(_hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [
        (A, 1, b"a1"),
        (B, 14, b"b14"),  # A's order, before anything new
        (B, 14, b"b14"),  # B's FLUSH, queued: a duplicate members drop
        (E, 8, b"e8"),
    ]
    assert seq.stats()["recoveries_inconsistent"] == 0  # C's log was not compared


def test_sequencer_merge_view_awaits_a_subgroup_whose_reported_view_lists_it_first() -> None:
    """Campaign udp-total-blocks 71088: E, the coordinator of C's and D's view 2, was
    killed; C, its subgroup's merge representative, suspected E and reported E's view
    without E, which listed D, the merge view's coordinator, first. D took that subgroup
    for its own order and awaited no tail: C had e's last BCASTs (a5 before b5), B had
    missed them, B's FLUSH had D order b5 at once and a5 came only at a later recovery,
    after it. A subgroup's order is its view id's coordinator's: D now awaits B's and C's
    tails and multicasts C's, the furthest, before anything new."""
    seq = started(Sequencer(), D, view=view_of(D, A, counter=6))
    reported = View(ViewId(2, E), [D, C, B])  # E's view 2, less E (suspected)
    subgroups = [view_of(D, A, counter=6), reported]
    seq.down_event(ViewChange(MergeView(ViewId(7, D), [D, A, C, B], subgroups)), 0.0)
    assert seq.stats()["recovering"]
    seq.up([*_tail(D, B, []), _forward(B, 5, b"b5", FLUSH)], 0.0)
    assert _down(seq) == []  # C's tail is still missing
    seq.up(_tail(D, C, [(A, 5, b"a5"), (B, 5, b"b5")]), 0.0)
    out = _down(seq)
    assert [(_hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [
        (A, 5, b"a5"),
        (B, 5, b"b5"),  # E's order, as C delivered it, before anything new
        (B, 5, b"b5"),  # B's FLUSH, queued: a duplicate members drop
    ]


def test_sequencer_merge_view_awaits_no_tail_of_our_previous_view_another_installed() -> None:
    """Campaign udp-total-blocks 72168: A left its view 6, which made B, listed next, the
    coordinator of B and D (D handed B its tail then). B's merge view 7 reported view 6 as
    B's and D's subgroup; D skipped view 7 and sent no tail, and awaiting it again (view
    6's id names A) held every later multicast for the rest of the run. A subgroup whose
    view is our own previous view is our order, whoever installed it."""
    seq = started(Sequencer(), B, view=View(ViewId(6, A), [B, D]))
    subgroups = [View(ViewId(6, A), [B, D]), view_of(C, E, counter=4)]
    seq.down_event(ViewChange(MergeView(ViewId(7, B), [B, D, C, E], subgroups)), 0.0)
    seq.up([*_tail(B, C, []), *_tail(B, E, [])], 0.0)
    assert not seq.stats()["recovering"]  # D's tail is not awaited
    seq.up([_forward(D, 1, b"d1")], 0.0)
    out = _down(seq)
    assert [(_hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [(D, 1, b"d1")]


def _stamped_tail(
    coord: Address, src: Address, entries: list[tuple[Address, int, bytes, int, int]], order: int
) -> list[Message]:
    """``src``'s TAILs of ``entries`` (sender, seqno, payload, view counter, NAKACK2 seqno:
    the stamp) and its TAIL_END with ``order`` as its ``view``."""
    msgs = [
        Message(coord, p, src=src, headers={_ID: SequencerHeader(TAIL, n, s, nak, v)})
        for s, n, p, v, nak in entries
    ]
    end = SequencerHeader(TAIL_END, len(msgs), view=order)
    return [*msgs, Message(coord, src=src, headers={_ID: end})]


def test_sequencer_merge_view_resends_the_other_order_before_logs_that_end_in_ours() -> None:
    """Campaign udp-total-blocks 72230: a partition forked D's order after a1: D ordered c10
    (view 4), I took over its side (view 5) and ordered i10. E, on I's side but deaf to I,
    delivered neither; E's merge view 6 took in I, E and C, and ended before E ordered
    anything. D's merge view 7 awaited view 6's members: I's log (I's order) and C's and
    E's, which end with D's order. Merged by stamp, c10 (4, 11) came before i10 (5, 3), and
    E delivered c10 first while I, with whom E had installed every view, had i10 first. A
    TAIL_END now says that a log ends with the new coordinator's order, and those logs come
    after the other orders' at a merge view under that coordinator."""
    seq = started(Sequencer(), D, view=view_of(D, C, counter=6))
    subgroups = [view_of(D, C, counter=6), View(ViewId(6, E), [E, H, C])]
    seq.down_event(ViewChange(MergeView(ViewId(7, D), [D, C, E, H], subgroups)), 0.0)
    a1, c10, h10 = (A, 1, b"a1", 4, 10), (C, 10, b"c10", 4, 11), (H, 10, b"h10", 5, 3)
    seq.up(_stamped_tail(D, H, [a1, h10], OTHER_ORDER), 0.0)  # H: I's order
    seq.up(_stamped_tail(D, C, [a1, c10], ENDS_IN_ORDER), 0.0)
    seq.up(_stamped_tail(D, E, [a1], ENDS_IN_ORDER), 0.0)
    out = _down(seq)
    assert [(_hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [
        (A, 1, b"a1"),
        (H, 10, b"h10"),  # the other order first: E delivers it as H did
        (C, 10, b"c10"),  # then ours, which C had
    ]


def test_sequencer_tail_end_says_the_log_ends_with_the_new_coordinators_order() -> None:
    """A member whose coordinator changed but whose last delivered message is the new
    coordinator's sends ENDS_IN_ORDER; one whose last is another's, OTHER_ORDER."""
    seq = started(Sequencer(), C, view=view_of(A, B, C, counter=3))
    seq.up([_bcast(A, A, 1, b"a1", 1)], 0.0)
    seq.take_up()
    ends = []
    for view in (view_of(B, A, C, counter=4), view_of(A, B, C, counter=5)):
        seq.down_event(ViewChange(view), 0.0)
        ends += [_hdr(m).view for m in _down(seq) if _hdr(m).type == TAIL_END]
    assert ends == [OTHER_ORDER, ENDS_IN_ORDER]  # B ordered nothing here: a1 is A's


def test_sequencer_recovery_merges_tails_that_start_at_different_places_by_stamp() -> None:
    """Campaign udp-total-blocks 140: A crashed and B took over with C and D. A's order
    was a1, a2 (view 11), a3 (view 12). C, paused, delivered a1 and a2; D joined in view 12,
    so its log starts there and holds only a3; B got a1 only. No tail held every other's
    last message, and B multicast the longest, C's: a3 was lost, B ordered its own b1
    first and a3 only later, after D had delivered a3 before b1. Each TAIL carries its
    entry's stamp (A's view counter, NAKACK2 seqno), and B merges the tails by it."""
    seq = started(Sequencer(), B, view=view_of(A, B, C, D, counter=12))
    seq.down([Message(None, b"b1")], 0.0)
    seq.take_down()
    a1 = _bcast(A, A, 1, b"a1", 5)
    a1.headers[_ID] = a1.headers[_ID]._replace(view=11)
    seq.up([a1], 0.0)
    seq.take_up()
    seq.down_event(ViewChange(view_of(B, C, D, counter=13)), 0.0)

    def tail(src: Address, entries: list[tuple[int, bytes, int, int]]) -> list[Message]:
        msgs = [  # (A's seqno, payload, A's view counter, A's NAKACK2 seqno)
            Message(B, p, src=src, headers={_ID: SequencerHeader(TAIL, n, A, nak, v)})
            for n, p, v, nak in entries
        ]
        end = SequencerHeader(TAIL_END, len(msgs), view=1)
        return [*msgs, Message(B, src=src, headers={_ID: end})]

    seq.up(tail(C, [(1, b"a1", 11, 5), (2, b"a2", 11, 6)]), 0.0)
    seq.up(tail(D, [(3, b"a3", 12, 7)]), 0.0)
    out = _down(seq)
    assert [(_hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [
        (A, 1, b"a1"),
        (A, 2, b"a2"),
        (A, 3, b"a3"),  # only D had it: before anything new
        (B, 1, b"b1"),
    ]
    assert seq.stats()["recoveries_inconsistent"] == 1  # no tail held the others' ends


def test_sequencer_tail_carries_each_entrys_stamp() -> None:
    """The stamp a recovery merges tails by travels in each TAIL: the BCAST's view counter
    as ``view``, the coordinator's NAKACK2 seqno as ``trimmed``."""
    seq = started(Sequencer(), C, view=view_of(A, B, C, counter=4))
    b1 = _bcast(A, B, 1, b"b1", 9)
    b1.headers[_ID] = b1.headers[_ID]._replace(view=4)
    seq.up([b1], 0.0)
    seq.take_up()
    seq.down_event(ViewChange(view_of(B, C, counter=5)), 0.0)
    out = _down(seq)
    assert [(_hdr(m).type, _hdr(m).trimmed, _hdr(m).view) for m in out] == [
        (TAIL, 9, 4),
        (TAIL_END, 0, 1),
    ]


def _as_delivered(coord: Address, out: list[Message], first_nak: int) -> list[Message]:
    """``coord``'s BCASTs in ``out`` as NAKACK2 hands them up at a member, from ``first_nak``."""
    bcasts = [m for m in out if _hdr(m).type == BCAST]
    for nak, m in enumerate(bcasts, first_nak):
        m.src = coord
        m.headers[ids.NAKACK2] = nak
    return bcasts


def test_sequencer_drops_what_its_new_coordinator_ordered_before_it_was_ours() -> None:
    """Campaign udp-total seed 50: C's forwards c1, c2 and c3 reached A, which ordered them
    in view 1, but C heard nothing from A; C's side went on under B (view 2), and a merge
    view under A took it back. NAKACK2 at C starts A's stream at the merge digest, and A
    multicast c2 and c3 after the digest was taken: C got that slice of A's old order,
    delivered c2 first, forgot c1 as delivered, and dropped its re-forwards (A's BCASTs
    after the merge) as duplicates: C never delivered its own c1. A BCAST carries the
    counter of its coordinator's view, and a member whose coordinator changed at a later
    view drops it: what C owes its re-forwards, in the merged view's order."""
    a = started(Sequencer(), A, view=view_of(A, B, C))
    c = started(Sequencer(), C, view=view_of(A, B, C))
    c.down([Message(None, b"c1"), Message(None, b"c2"), Message(None, b"c3")], 0.0)
    forwards = _down(c)
    for m in forwards:
        m.src = C
    a.up(forwards, 0.0)
    old_order = _as_delivered(A, _down(a), 1)  # C hears none of them
    assert [m.payload for m in old_order] == [b"c1", b"c2", b"c3"]
    c.down_event(ViewChange(view_of(B, C, counter=2)), 1.0)  # C's side, under B
    c.take_down()
    subgroups = [view_of(A, B, C), view_of(B, C, counter=2)]
    merged = MergeView(ViewId(3, A), [A, B, C], subgroups)
    a.down_event(ViewChange(merged), 2.0)
    c.down_event(ViewChange(merged), 2.0)
    to_a = _down(c)  # C's tail and its forward table again (FLUSH)
    assert [(_hdr(m).type, m.payload) for m in to_a if _hdr(m).type == FLUSH] == [
        (FLUSH, b"c1"),
        (FLUSH, b"c2"),
        (FLUSH, b"c3"),
    ]
    c.up(old_order[1:], 2.0)  # after the merge digest: the end of A's old order
    assert split(c.take_up())[0] == []
    assert c.stats()["bcasts_other_order"] == 2
    for m in to_a:
        m.src = C
    a.up([*to_a, *_tail(A, B, [])], 2.0)
    c.up(_as_delivered(A, _down(a), 4), 2.0)
    assert [(m.src, m.payload) for m in split(c.take_up())[0]] == [
        (C, b"c1"),
        (C, b"c2"),
        (C, b"c3"),
    ]
    assert c.stats()["forward_table"] == 0


def test_sequencer_a_members_forwards_before_its_tail_give_way_to_its_flush() -> None:
    """Campaign udp-total seed 149: B ordered D's d1 and d2 in view 4, which D never got;
    D's side went on under E, and D's d3, forwarded to B while B was its coordinator,
    reached B after B's view left D out, so B kept it. B's merge view took D back from
    E's subgroup: B ordered the kept d3 first, then D's FLUSH of d1, d2 and d3. D
    delivered d3, forgot d1 and d2 as delivered and dropped them after it: it never
    delivered its own d1 and d2. A member whose tail the recovery awaits sends its forward
    table again (FLUSH) after its tail, so what it forwarded before is dropped."""
    seq = started(Sequencer(), B, view=view_of(B, D, counter=4))
    seq.up([_forward(D, 1, b"d1"), _forward(D, 2, b"d2")], 0.0)
    assert [m.payload for m in _down(seq)] == [b"d1", b"d2"]  # D hears neither
    seq.down_event(ViewChange(view_of(B, C, counter=7)), 1.0)  # D left out
    seq.up([_forward(D, 3, b"d3")], 1.5)  # from before D's side went on under E: kept
    assert _down(seq) == [] and seq.stats()["non_member_kept"] == 1
    subgroups = [view_of(B, C, counter=7), view_of(E, D, counter=5)]
    seq.down_event(ViewChange(MergeView(ViewId(10, B), [B, C, D, E], subgroups)), 2.0)
    assert _down(seq) == [] and seq.stats()["recovering"]  # D's and E's tails
    flush = [_forward(D, n, b"d%d" % n, FLUSH) for n in (1, 2, 3)]
    seq.up([*_tail(B, D, []), *flush, *_tail(B, E, [])], 2.0)
    out = _down(seq)
    assert [(_hdr(m).type, _hdr(m).sender, m.payload) for m in out] == [
        (BCAST, D, b"d1"),  # a duplicate at B and C, D's first
        (BCAST, D, b"d2"),
        (BCAST, D, b"d3"),
    ]
    assert seq.stats()["forwards_before_tail"] == 1


def test_sequencer_forwards_reaching_the_next_coordinator_early_wait_for_its_view() -> None:
    """C installed the view in which B coordinates before B did: B keeps C's TAIL_END and
    FLUSH, and handles them once it installs that view."""
    seq = started(Sequencer(), B, view=view_of(A, B, C))
    end = Message(B, src=C, headers={_ID: SequencerHeader(TAIL_END, 0)})
    seq.up([end, _forward(C, 1, b"c1", FLUSH)], 0.0)
    assert _down(seq) == []
    seq.down_event(ViewChange(view_of(B, C, counter=2)), 0.0)
    out = _down(seq)
    assert [(_hdr(m).type, _hdr(m).sender, m.payload) for m in out] == [(BCAST, C, b"c1")]


def test_sequencer_a_joiner_ends_its_first_view_with_an_empty_tail() -> None:
    """Campaign udp-total seed 66: D joined in view 7 under E, but installed only view 9;
    E crashed, and B's recovery at view 8 awaited every member of view 7 it kept, D too.
    D's first view named B, so D saw no coordinator change and sent no tail: B's
    recovery waited for good, and every multicast of the group queued behind it. A
    member's first view now always ends with a TAIL_END (its log is empty)."""
    seq = Sequencer()
    seq.start(D, "test", 0.0)
    seq.down_event(ViewChange(view_of(B, D, counter=9)), 0.0)
    out = _down(seq)
    assert [(m.dest, _hdr(m).type, _hdr(m).seqno) for m in out] == [(B, TAIL_END, 0)]
    coord = started(Sequencer(), B, view=view_of(E, B, D, counter=7))
    coord.down([Message(None, b"b1")], 0.0)  # forwarded to E, which crashes
    coord.take_down()
    coord.down_event(ViewChange(view_of(B, D, counter=8)), 0.0)
    assert _down(coord) == [] and coord.stats()["recovering"]  # it waits for D's tail
    out[0].src = D
    coord.up(out, 0.0)
    assert [(_hdr(m).type, m.payload) for m in _down(coord)] == [(BCAST, b"b1")]
    assert not coord.stats()["recovering"]


def test_sequencer_what_reaches_the_next_coordinator_early_outlives_a_view_between() -> None:
    """Campaign udp-total seed 40: B, paused, resumed with C's view 3 (A still the
    coordinator) and view 4 (B the coordinator) to install at once; C's TAIL_END and
    FLUSH for view 4 had arrived first, and view 3 dropped them, so B's recovery waited
    for C's tail for good. They are kept until a view makes B the coordinator."""
    seq = started(Sequencer(), B, view=view_of(A, B, C, D, counter=2))
    end = Message(B, src=C, headers={_ID: SequencerHeader(TAIL_END, 0)})
    seq.up([end, _forward(C, 1, b"c1", FLUSH)], 0.0)
    seq.down_event(ViewChange(view_of(A, B, C, counter=3)), 0.0)  # D gone, A coordinates
    seq.take_down()
    seq.down_event(ViewChange(view_of(B, C, counter=4)), 0.0)
    out = _down(seq)
    assert [(_hdr(m).type, _hdr(m).sender, m.payload) for m in out] == [(BCAST, C, b"c1")]
    assert not seq.stats()["recovering"]


def test_sequencer_a_member_that_leaves_the_view_ends_the_wait_for_its_tail() -> None:
    seq = started(Sequencer(), B, view=view_of(A, B, C))
    seq.down_event(ViewChange(view_of(B, C, counter=2)), 0.0)
    assert seq.stats()["recovering"]
    seq.down_event(ViewChange(view_of(B, counter=3)), 0.0)
    assert not seq.stats()["recovering"]


def test_sequencer_a_suspected_member_s_tail_is_awaited_until_a_view_leaves_it_out() -> None:
    """Campaign udp-total-blocks 72218: A took over from D and ended its recovery when it
    suspected E, which could hear D but not be heard (a one-way split); E's log held D's
    last order, C1-1 before A1-1, that no other member had, and A ordered A1-1 first while
    E stayed in its views. A suspicion may be false: the suspected member's tail is still
    awaited, and B multicasts D's order first once it comes (only a view without D ends
    the wait: `test_sequencer_a_member_that_leaves_the_view_ends_the_wait_for_its_tail`)."""
    seq = started(Sequencer(), B, view=view_of(A, B, C, D))
    seq.down_event(ViewChange(view_of(B, C, D, counter=2)), 0.0)
    seq.up([*_tail(B, C, []), _forward(C, 1, b"c1", FLUSH)], 0.0)
    seq.up_event(Suspect((D,)), 0.0)
    assert _down(seq) == [] and seq.stats()["recovering"]  # D's tail is still awaited
    assert split(seq.take_up())[1] == [Suspect((D,))]  # GMS hears of it
    seq.up(_tail(B, D, [(C, 1, b"c1"), (A, 1, b"a1")]), 0.0)
    out = [(_hdr(m).type, _hdr(m).sender, m.payload) for m in _down(seq)]
    assert out[:2] == [(BCAST, C, b"c1"), (BCAST, A, b"a1")]  # D's order, then C's FLUSH
    assert not seq.stats()["recovering"]


def test_sequencer_a_second_tail_under_the_same_coordinator_leaves_the_first_standing() -> None:
    """Campaign udp-total 72366: A took over D's order at view 7; H's log alone held D's
    last BCASTs, b1 before A's own a1, and C, gone, never sent its log. The merge view 8
    came first, its other subgroup's stale view of D's claimed B and H again, and their
    second TAIL_END, under A, who stayed their coordinator, counted their logs as A's own
    order: A multicast its own log (without b1), then a1 and B's FLUSH of b1, while H had
    delivered b1 first. A member's second tail under a coordinator that stayed is the log
    it already sent (the recovery ordered nothing meanwhile): the first one stands."""
    seq = started(Sequencer(), A, view=view_of(D, A, B, H, C, counter=6))
    seq.down([Message(None, b"a1")], 0.0)  # forwarded to D, which ordered it after b1
    seq.take_down()
    seq.down_event(ViewChange(view_of(A, B, H, C, counter=7)), 0.0)
    seq.up(_tail(A, H, [(B, 1, b"b1"), (A, 1, b"a1")]), 0.0)
    seq.up([*_tail(A, B, []), _forward(B, 1, b"b1", FLUSH)], 0.0)
    assert _down(seq) == [] and seq.stats()["recovering"]  # C's tail is missing
    subgroups = [view_of(A, B, H, C, counter=7), View(ViewId(4, D), [D, A, B, H, E, C])]
    seq.down_event(ViewChange(MergeView(ViewId(8, A), [A, B, H, C, E], subgroups)), 0.0)
    seq.up(_tail(A, H, [(B, 1, b"b1"), (A, 1, b"a1")], changed=False), 0.0)
    seq.up([*_tail(A, B, [], changed=False), *_tail(A, E, [])], 0.0)
    assert _down(seq) == [] and seq.stats()["recovering"]  # C's tail is still missing
    seq.down_event(ViewChange(view_of(A, B, H, E, counter=9)), 0.0)
    out = _down(seq)
    assert [(_hdr(m).sender, _hdr(m).seqno, m.payload) for m in out] == [
        (B, 1, b"b1"),
        (A, 1, b"a1"),  # D's order, as H delivered it
        (A, 1, b"a1"),  # A's own forward and B's FLUSH, queued: duplicates members drop
        (B, 1, b"b1"),
    ]
    assert not seq.stats()["recovering"]


def _flushed(seq: Sequencer) -> bool:
    return FlushDone("SEQUENCER") in split(seq.take_up())[1]


def test_sequencer_answers_the_leave_flush_once_its_messages_are_stable_everywhere() -> None:
    """Campaign udp-total 298: G answered the flush as soon as its multicast came back in
    the order, while F, split off, had not got it; G left flushed, F's next view went on
    without G, and F never delivered it (flushed_leave). A leaver now answers once its
    forward table is empty and STABLE's digest shows every member delivered its messages
    (they are trimmed from its log), as NAKACK2's flush does; others' messages do not
    hold it, nor does a digest of another coordinator's."""
    seq = started(Sequencer(), B, view=view_of(A, B, C))
    seq.down([Message(None, b"1")], 0.0)
    seq.take_down()
    seq.down_event(FlushRequest(), 0.0)
    assert not _flushed(seq)
    seq.up([_bcast(A, B, 1, b"1", 1), _bcast(A, C, 1, b"c", 2)], 0.0)
    assert not _flushed(seq)  # delivered here, but not known delivered at C
    seq.down_event(StableDigest(Digest({A: (0, 0), C: (5, 5)})), 0.0)
    assert not _flushed(seq)
    seq.down_event(StableDigest(Digest({A: (1, 1)})), 0.0)
    assert _flushed(seq)


def test_sequencer_alone_answers_the_leave_flush_once_its_forward_table_is_empty() -> None:
    seq = started(Sequencer(), A, view=view_of(A))
    seq.down([Message(None, b"1")], 0.0)
    seq.take_down()
    seq.down_event(FlushRequest(), 0.0)
    assert not _flushed(seq)
    seq.up([_bcast(A, A, 1, b"1", 1)], 0.0)
    assert _flushed(seq)


def test_sequencer_leaving_coordinator_stops_multicasting_forwards() -> None:
    """Its forwarders keep them and hand them to the next coordinator."""
    seq = started(Sequencer(), A, view=view_of(A, B))
    seq.down_event(FlushRequest(), 0.0)
    seq.take_down()
    seq.up([_forward(B, 1, b"b1")], 0.0)
    assert _down(seq) == []
    assert seq.stats()["forwards_dropped_leaving"] == 1


def test_sequencer_stable_digest_trims_the_log_up_to_the_last_stable_message() -> None:
    seq = started(Sequencer(), C, view=view_of(A, B, C))
    seq.up([_bcast(A, B, n, b"%d" % n, n) for n in (1, 2, 3)], 0.0)
    seq.down_event(StableDigest(Digest({A: (2, 3), B: (0, 0)})), 0.0)
    assert seq.stats()["log"] == 1
    seq.down_event(ViewChange(view_of(B, C, counter=2)), 0.0)
    out = _down(seq)
    assert [(_hdr(m).type, _hdr(m).seqno) for m in out] == [(TAIL, 3), (TAIL_END, 1)]
    assert (_hdr(out[1]).sender, _hdr(out[1]).trimmed) == (B, 2)


@pytest.mark.parametrize(
    ("names", "rule"),
    [
        (["SIM", "UNICAST3", "SEQUENCER", "STABLE", "GMS"], "needs NAKACK2 below"),
        (["SIM", "NAKACK2", "UNICAST3", "SEQUENCER", "GMS"], "needs STABLE above"),
        (["SIM", "NAKACK2", "UNICAST3", "STABLE", "GMS", "SEQUENCER"], "needs STABLE above"),
    ],
)
def test_sequencer_refuses_a_stack_it_cannot_order_in(names: list[str], rule: str) -> None:
    with pytest.raises(PropertyError, match=rule):
        StackConfig.of(*names).build()


@pytest.mark.parametrize(
    ("digest", "kept", "trimmed"),
    [
        ({A: (3, 3), B: (1, 1)}, [(C, 5)], (C, 4)),  # B's first is everywhere, so all before it
        ({A: (2, 2), B: (0, 0)}, [(B, 3), (C, 4), (C, 5)], (B, 2)),  # B's run: none of it yet
        ({A: (3, 3)}, [(C, 4), (C, 5)], (B, 3)),  # no word on B: A's run only
        ({B: (2, 2)}, [], (C, 5)),
        ({C: (9, 9)}, [(B, 1), (B, 2), (B, 3), (C, 4), (C, 5)], (None, 0)),
    ],
)
def test_sequencer_log_trim_asks_the_digest_of_each_coordinators_run(
    digest: dict[Address, tuple[int, int]],
    kept: list[tuple[Address, int]],
    trimmed: tuple[Address | None, int],
) -> None:
    """The log holds A's order (stamps 1-3) then B's (stamps 1-2, after a coordinator
    change): a digest trims up to the last entry its coordinator's entry says every member
    delivered, scanning from the newest, one digest look-up per coordinator's run."""
    log = Log()
    stamps = [(A, 1), (A, 2), (A, 3), (B, 1), (B, 2)]
    senders = [(B, 1), (B, 2), (B, 3), (C, 4), (C, 5)]
    for (coord, stamp), (sender, seqno) in zip(stamps, senders, strict=True):
        log.entries.append(Logged(sender, seqno, b"", 0, {}, coord, stamp))
    log.trim(Digest(digest))
    assert [(e.sender, e.seqno) for e in log.entries] == kept
    assert log.trimmed == trimmed


def test_sequencer_coordinator_delivers_its_own_bcasts_though_one_of_a_view_to_come_came() -> None:
    """Campaign udp-total-blocks 72471: B, the coordinator of view 2, paused, resumed
    and ordered D's queued forwards and its own in view 2, while C's BCASTs stamped with C's
    view 4 arrived. Held behind them, B's own order was delivered only at the merge view 5
    under B, ahead of the other subgroups' tails its recovery multicast after (which the
    others delivered first). The coordinator's own BCASTs are its order: they never wait."""
    seq = started(Sequencer(), B, view=view_of(B, A, D, C, counter=2))
    seq.up([_stamped(C, C, 1, 4)], 0.0)  # C's, of a view to come: held
    seq.up([_stamped(B, D, 12, 2), _stamped(B, B, 22, 2)], 0.0)
    delivered = split(seq.take_up())[0]
    assert [(m.src, m.payload) for m in delivered] == [(D, b"12"), (B, b"22")]
    assert seq.stats()["bcasts_held_for_view"] == 1


def test_sequencer_a_later_merge_view_s_subgroups_come_after_our_own_log() -> None:
    """Campaign udp-total-blocks 72545 (B, C and H here are the run's F, I and G): a
    partition forked E's order. E, paused, resumed in its view 4 and ordered C's i22
    before H's g4; B had taken over E's other members and ordered g4 alone. C, holding E's
    BCASTs behind D's of a view to come, delivered them at E's merge view 6 (E's and D's
    subgroups). A's tail for view 6 came late, and the merge view 10 added B's subgroup to
    the same recovery; B's log went out before E's own, and A and D delivered g4 before
    i22, while C, with whom they had installed views 6 to 10, had i22 first. Our own log
    now goes out after the subgroups of the merge view that began the recovery, before
    those of a later one."""
    seq = started(Sequencer(), E, view=view_of(E, B, D, A, H, C, counter=4))
    seq.up([_forward(C, 22, b"i22"), _forward(H, 4, b"g4")], 0.0)
    _down(seq)
    seq.up([_stamped(E, C, 22, 4), _stamped(E, H, 4, 4)], 0.0)  # our order: i22, g4
    subgroups = [view_of(E, B, D, A, H, C, counter=4), View(ViewId(5, D), [D, A])]
    seq.down_event(ViewChange(MergeView(ViewId(6, E), [E, B, D, A, H, C], subgroups)), 0.0)
    d1 = (D, 1, b"d1", 5, 1)
    seq.up(_stamped_tail(E, D, [d1], OTHER_ORDER), 0.0)
    seq.down_event(ViewChange(view_of(E, D, A, C, counter=7)), 0.0)
    assert seq.stats()["recovering"]  # A's tail is late
    subgroups = [view_of(E, D, A, C, counter=7), View(ViewId(9, B), [B, H])]
    seq.down_event(ViewChange(MergeView(ViewId(10, E), [E, D, A, C, B, H], subgroups)), 0.0)
    g4 = (H, 4, b"g4", 5, 1)  # B's order: g4 without i22
    seq.up([*_stamped_tail(E, B, [g4], OTHER_ORDER), *_stamped_tail(E, H, [g4], OTHER_ORDER)], 0.0)
    seq.up(_stamped_tail(E, A, [d1], OTHER_ORDER), 0.0)
    out = _down(seq)
    assert [(_hdr(m).sender, _hdr(m).seqno) for m in out] == [
        (D, 1),  # D's order, of the merge view 6
        (C, 22),  # then ours, as C delivered it in view 6
        (H, 4),
    ]


def test_sequencer_tails_of_two_orders_in_one_group_go_out_one_order_after_the_other() -> None:
    """Campaign udp-total-blocks 72629 (B and H here are the run's F and D): a partition forked
    H's order after x1; H's side (E, D) went on with h2 and E's order, B's side (B, C) with
    B's, where C missed B's last b2. E's merge view 7 of both sides awaited A's tail, which
    never came (A never installed view 7), and A's merge view 8 took view 7 in as one
    group: no tail held every other's end, and A merged them by stamp, so C got E's side's
    h2 (view 2) before b2 (view 4), which B had delivered first. Tails that share a message
    while neither holds the other's end are two orders: each goes out whole, the one with a
    member behind first."""
    seq = started(Sequencer(), A, view=view_of(A, counter=5))
    subgroups = [view_of(A, counter=5), View(ViewId(7, E), [E, D, B, C, A])]
    seq.down_event(ViewChange(MergeView(ViewId(8, A), [A, E, D, B, C], subgroups)), 0.0)
    x1, h2 = (H, 1, b"x1", 2, 1), (H, 2, b"h2", 2, 2)
    b1, b2 = (B, 1, b"b1", 4, 3), (B, 2, b"b2", 4, 4)
    seq.up(_stamped_tail(A, E, [x1, h2], OTHER_ORDER), 0.0)
    seq.up(_stamped_tail(A, D, [h2], OTHER_ORDER), 0.0)
    seq.up(_stamped_tail(A, B, [x1, b1, b2], OTHER_ORDER), 0.0)
    seq.up(_stamped_tail(A, C, [x1, b1], OTHER_ORDER), 0.0)
    out = _down(seq)
    assert [m.payload for m in out] == [b"x1", b"b1", b"b2", b"h2"]  # C: b2 before h2, as B
    assert seq.stats()["recoveries_inconsistent"] == 1


def test_sequencer_a_log_whose_end_another_fork_ordered_again_is_behind_in_its_own_fork() -> None:
    """Campaign udp-total-blocks 72739 (A, H and B here are the run's B, F and H): A ordered
    x1, y, h0 (H's), i19, h2 and c31, all in D's log; B's ends with h0, C's with i19. H, cut
    off, had taken over alone after x1 and ordered its own h0, h2 and h3 again. A's merge
    view took every log in as one group, which forked: D's and H's tips share x1. B's last
    message h0 is in H's fork too, so H's fork counted as one with a member behind and went
    first (its last stamp the lower), and B got h2 before i19, which A and C had delivered
    first. B is behind in A's fork only: after the point where B's log and H's meet, B's
    holds y, which H's lacks."""
    seq = started(Sequencer(), A, view=view_of(A, counter=12))
    subgroups = [view_of(A, counter=12), View(ViewId(13, H), [H, B, C, D, A])]
    seq.down_event(ViewChange(MergeView(ViewId(14, A), [A, B, C, D, H], subgroups)), 0.0)
    x1, y = (C, 1, b"x1", 10, 195), (C, 2, b"y", 10, 196)
    h0, i19, h2, c31 = (
        (H, 0, b"h0", 11, 206),
        (D, 19, b"i19", 11, 208),
        (H, 2, b"h2", 11, 209),
        (C, 31, b"c31", 11, 210),
    )
    h0_, h2_, h3_ = (H, 0, b"h0", 11, 3), (H, 2, b"h2", 11, 5), (H, 3, b"h3", 11, 6)
    seq.up(_stamped_tail(A, B, [x1, y, h0], OTHER_ORDER), 0.0)
    seq.up(_stamped_tail(A, C, [x1, y, h0, i19], OTHER_ORDER), 0.0)
    seq.up(_stamped_tail(A, D, [x1, y, h0, i19, h2, c31], OTHER_ORDER), 0.0)
    seq.up(_stamped_tail(A, H, [x1, h0_, h2_, h3_], OTHER_ORDER), 0.0)
    out = _down(seq)
    # A's order whole (B: i19 before h2, as A and C), then H's fork's rest
    assert [m.payload for m in out] == [b"x1", b"y", b"h0", b"i19", b"h2", b"c31", b"h3"]


def test_sequencer_a_group_with_a_member_behind_goes_out_before_the_other_groups() -> None:
    """Campaign udp-total 72756 (A here is the run's H): A's merge view took in E's subgroup
    and D's, in that order. E's log alone held E's order (e9); in D's, C had missed D's last
    c60. The groups went out in the view's order, and C delivered e9 before c60, while D had
    c60 first. A group with a member behind now goes out first, before the other groups and
    before our own log (a1, which only we delivered)."""
    seq = started(Sequencer(), A, view=view_of(A, counter=4))
    seq.up([_stamped(A, A, 1, 4)], 0.0)  # our order: a1, delivered by us alone
    assert [m.payload for m in split(seq.take_up())[0]] == [b"1"]
    subgroups = [view_of(A, counter=4), View(ViewId(3, E), [E]), View(ViewId(5, D), [D, C])]
    seq.down_event(ViewChange(MergeView(ViewId(6, A), [A, E, D, C], subgroups)), 0.0)
    e9 = (E, 9, b"e9", 3, 9)
    c59, c60 = (C, 59, b"c59", 5, 20), (C, 60, b"c60", 5, 21)
    seq.up(_stamped_tail(A, E, [e9], OTHER_ORDER), 0.0)
    seq.up(_stamped_tail(A, D, [c59, c60], OTHER_ORDER), 0.0)
    seq.up(_stamped_tail(A, C, [c59], OTHER_ORDER), 0.0)
    out = _down(seq)
    assert [m.payload for m in out] == [b"c59", b"c60", b"e9", b"1"]  # C: c60 before e9, as D
