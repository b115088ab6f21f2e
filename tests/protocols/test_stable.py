"""STABLE unit tests: gossip timing, the coordinator's merge, STABILITY, and what goes down.

Sans-IO STABLE objects with explicit ``now``; digests are fed in as the
`DigestReply` that NAKACK2 would send up.
"""

from __future__ import annotations

import math

import pytest

from triogroups import Address, Digest, Flag, Message, PropertyError, StackConfig, View
from triogroups.events import (
    DigestReply,
    Disconnect,
    GetDigest,
    ResumeStable,
    StableDigest,
    SuspendStable,
    ViewChange,
)
from triogroups.protocols import ids
from triogroups.protocols.stable import STABILITY, STABLE_GOSSIP, Stable, StableHeader
from triogroups.testing import split, started
from triogroups.view import ViewId
from triogroups.wire import WireCodec

ID = ids.STABLE
A, B, C = Address(1, "A"), Address(2, "B"), Address(3, "C")
VIEW = View.create(A, 1, [A, B, C])


def _stable(me: Address, view: View | None = VIEW, **props: object) -> Stable:
    return started(Stable(**props), me, view=view)


def _gossip(src: Address, digest: Digest, view_id: ViewId = VIEW.view_id) -> Message:
    hdr = StableHeader(STABLE_GOSSIP, view_id, digest)
    return Message(A, src=src, flags=Flag.OOB | Flag.NO_RELIABILITY, headers={ID: hdr})


def test_stable_gossip_interval_is_jittered_around_desired_avg_gossip_and_seeded() -> None:
    """Each interval is uniform in [0.5, 1.5] x desired_avg_gossip, from an address-seeded RNG."""
    firsts = [_stable(Address(i, "X"), desired_avg_gossip=10.0).next_deadline() for i in range(40)]
    assert all(5.0 <= t <= 15.0 for t in firsts) and len(set(firsts)) == 40
    assert min(firsts) < 7 and max(firsts) > 13
    again = _stable(Address(7, "X"), desired_avg_gossip=10.0).next_deadline()
    assert again == firsts[7]
    s = _stable(B, desired_avg_gossip=10.0)
    now = s.next_deadline()
    s.tick(now)
    assert now + 5.0 <= s.next_deadline() <= now + 15.0


def test_stable_timer_asks_the_layer_below_for_the_digest() -> None:
    s = _stable(B)
    s.tick(s.next_deadline())
    assert split(s.take_down()) == ([], [GetDigest("STABLE")])
    assert s.stats()["digest_requests"] == 1


def test_stable_member_that_left_gossips_no_more() -> None:
    s = _stable(B)
    s.down_event(Disconnect(), 0.1)
    assert split(s.take_down()) == ([], [Disconnect()])
    assert s.next_deadline() == math.inf and s.view is None
    s.up_event(DigestReply("STABLE", Digest({A: (1, 1)})), 0.2)
    assert split(s.take_down()) == ([], [])


def test_stable_no_gossip_without_a_view() -> None:
    s = _stable(B, view=None)
    s.tick(s.next_deadline())
    assert split(s.take_down()) == ([], []) and s.next_deadline() < math.inf


def test_stable_member_sends_its_digest_to_the_coordinator() -> None:
    s = _stable(B)
    digest = Digest({A: (3, 4), B: (5, 5), C: (0, 0)})
    s.up_event(DigestReply("STABLE", digest), 0.0)
    ([msg], []) = split(s.take_down())
    assert msg.dest == A and msg.headers[ID] == StableHeader(STABLE_GOSSIP, VIEW.view_id, digest)
    assert msg.flags & Flag.NO_RELIABILITY and msg.flags & Flag.OOB
    codec = WireCodec("c")
    (back,) = codec.decode(codec.encode(A, B, [msg])).messages
    assert back.headers[ID] == msg.headers[ID]
    assert s.take_up() == [] and s.stats()["gossip_sent"] == 1


def test_stable_other_digest_replies_pass_up() -> None:
    s = _stable(B)
    reply = DigestReply("GMS", Digest())
    s.up_event(reply, 0.0)
    assert s.take_up() == [reply] and split(s.take_down()) == ([], [])


def test_stable_coordinator_merges_once_every_member_sent_a_digest() -> None:
    """Per sender: minimum of highest delivered, maximum of highest received; then STABILITY."""
    s = _stable(A)
    s.up_event(DigestReply("STABLE", Digest({A: (9, 9), B: (4, 6), C: (2, 2)})), 0.0)
    s.up([_gossip(B, Digest({A: (7, 9), B: (6, 6), C: (2, 3)}))], 0.0)
    assert split(s.take_down()) == ([], []) and s.stats()["votes"] == 2
    s.up([_gossip(C, Digest({A: (8, 8), B: (5, 5), C: (3, 3)}))], 0.0)
    ([msg], [event]) = split(s.take_down())
    stable = Digest({A: (7, 9), B: (4, 6), C: (2, 3)})
    assert msg.dest is None and msg.headers[ID] == StableHeader(STABILITY, VIEW.view_id, stable)
    assert msg.flags & Flag.DONT_LOOPBACK and msg.flags & Flag.NO_RELIABILITY
    assert event == StableDigest(stable)
    stats = s.stats()
    assert stats["stability_rounds"] == 1 and stats["votes"] == 0
    assert stats["last_stable_digest"] == repr(stable)


def test_stable_coordinator_ignores_gossip_from_other_views_and_non_members() -> None:
    s = _stable(A)
    old = ViewId(0, A)
    s.up([_gossip(B, Digest({A: (1, 1)}), old), _gossip(Address(9, "Z"), Digest({A: (1, 1)}))], 0.0)
    assert s.stats()["votes"] == 0 and s.stats()["ignored"] == 2


def test_stable_non_coordinator_ignores_gossip() -> None:
    s = _stable(B)
    s.up([_gossip(C, Digest({A: (1, 1)}))], 0.0)
    assert s.stats()["ignored"] == 1 and split(s.take_down()) == ([], [])


def test_stable_view_change_resets_collected_digests() -> None:
    s = _stable(A)
    s.up([_gossip(B, Digest({A: (1, 1), B: (1, 1), C: (1, 1)}))], 0.0)
    s.up([_gossip(C, Digest({A: (1, 1), B: (1, 1), C: (1, 1)}))], 0.0)
    s.down_event(ViewChange(View.create(A, 2, [A, B, C])), 0.0)
    s.take_down()
    assert s.stats()["votes"] == 0
    s.up_event(DigestReply("STABLE", Digest({A: (1, 1), B: (1, 1), C: (1, 1)})), 0.0)
    assert split(s.take_down()) == ([], [])  # B and C must vote again in the new view


def test_stable_members_missing_from_a_digest_are_left_out_of_stability() -> None:
    s = _stable(A, view=View.create(A, 1, [A, B]))
    s.up([_gossip(B, Digest({A: (1, 1)}), View.create(A, 1, [A, B]).view_id)], 0.0)
    s.up_event(DigestReply("STABLE", Digest({A: (2, 2), B: (3, 3)})), 0.0)
    (_, [event]) = split(s.take_down())
    assert event == StableDigest(Digest({A: (1, 2)}))


def test_stable_suspended_for_a_merge_sends_no_gossip_and_purges_nothing() -> None:
    """While a merge is under way (SuspendStable from GMS) no round may purge what the
    merge digest, taken at its start, says the other subgroups still need."""
    s = _stable(A, view=View.create(A, 1, [A, B]), desired_avg_gossip=2.0)
    s.down_event(SuspendStable(5.0), 1.0)
    assert split(s.take_down()) == ([], [])  # consumed here
    assert 1.0 <= s.next_deadline() < 6.0
    s.tick(s.next_deadline())
    s.up_event(DigestReply("STABLE", Digest({A: (2, 2), B: (3, 3)})), 1.5)
    s.up([_gossip(B, Digest({A: (2, 2), B: (3, 3)}), View.create(A, 1, [A, B]).view_id)], 1.5)
    hdr = StableHeader(STABILITY, ViewId(1, A), Digest({A: (2, 2)}))
    s.up([Message(None, src=A, headers={ID: hdr})], 1.6)
    assert split(s.take_down()) == ([], []) and s.stats()["votes"] == 0
    assert s.stats()["ignored_while_suspended"] == 2 and s.stats()["suspended_until"] == 6.0
    s.down_event(ResumeStable(), 2.0)
    s.up([Message(None, src=A, headers={ID: hdr})], 2.1)
    assert split(s.take_down()) == ([], [StableDigest(Digest({A: (2, 2)}))])


def test_stable_suspension_ends_by_itself_after_its_timeout() -> None:
    """A merge leader that died never sends ResumeStable: stability must not stop for good."""
    s = _stable(B)
    s.down_event(SuspendStable(5.0), 0.0)
    stable = Digest({A: (1, 2)})
    hdr = StableHeader(STABILITY, VIEW.view_id, stable)
    s.up([Message(None, src=A, headers={ID: hdr})], 4.9)
    s.up([Message(None, src=A, headers={ID: hdr})], 5.0)
    assert split(s.take_down()) == ([], [StableDigest(stable)])


def test_stable_stability_received_goes_down_as_stable_digest() -> None:
    s = _stable(B)
    stable = Digest({A: (1, 2)})
    hdr = StableHeader(STABILITY, VIEW.view_id, stable)
    other = StableHeader(STABILITY, ViewId(5, C), stable)
    s.up([Message(None, src=A, headers={ID: hdr}), Message(None, src=C, headers={ID: other})], 0.0)
    assert split(s.take_down()) == ([], [StableDigest(stable)])
    stats = s.stats()
    assert stats["stability_received"] == 2 and stats["ignored"] == 1
    assert s.take_up() == []


def test_stable_max_bytes_of_multicasts_trigger_a_digest_at_once() -> None:
    """max_bytes of multicast payload going up start a round before the timer."""
    s = _stable(B, max_bytes=1000)
    s.up([Message(B, b"x" * 5000, src=A)], 0.0)  # unicasts do not count
    assert split(s.take_down()) == ([], [])
    s.up([Message(None, b"x" * 600, src=A)], 0.0)
    assert split(s.take_down()) == ([], [])
    s.up([Message(None, b"x" * 600, src=C)], 0.0)
    assert split(s.take_down()) == ([], [GetDigest("STABLE")])
    s.up([Message(None, b"x" * 2000, src=C)], 0.0)
    assert split(s.take_down()) == ([], [])  # one request at a time
    assert sum(len(b) for b in s.take_up() if isinstance(b, list)) == 4
    assert s.stats()["max_bytes_reached"] == 1


def test_stable_properties_keep_jgroups_names_and_defaults() -> None:
    props = Stable().properties()
    assert props == {"desired_avg_gossip": 20.0, "max_bytes": 2_000_000}
    assert Stable(max_bytes="4MB", desired_avg_gossip="500ms").properties()["max_bytes"] == 4 << 20
    with pytest.raises(PropertyError, match=r"STABLE\.desired_avg_gossip must be >= 0"):
        Stable(desired_avg_gossip=-1)


def test_stable_jgrp2605_own_dont_loopback_multicasts_count_towards_max_bytes() -> None:
    """A member's DONT_LOOPBACK multicasts never come up: they count on the way down,
    so a member that only sends those still starts rounds (JGRP-2605)."""
    s = _stable(B, max_bytes=10_000)
    mine = [Message(None, b"x" * 5000, flags=Flag.DONT_LOOPBACK) for _ in range(3)]
    unicast = Message(A, b"x" * 20_000, flags=Flag.DONT_LOOPBACK)
    looped = Message(None, b"x" * 20_000)  # comes up again: counted there
    s.down([unicast, looped], 0.0)
    s.down(mine[:1], 0.0)
    assert split(s.take_down()) == ([unicast, looped, mine[0]], [])
    s.down(mine[1:], 0.0)
    assert split(s.take_down()) == (
        mine[1:],
        [GetDigest("STABLE")],
    )  # after the batch: its seqnos count
    assert s.stats()["max_bytes_reached"] == 1
    s.up_event(DigestReply("STABLE", Digest({A: (0, 0), B: (3, 3), C: (0, 0)})), 0.0)
    (gossip,), _ = split(s.take_down())
    assert gossip.dest == A and gossip.headers[ID].type == STABLE_GOSSIP


def test_stable_desired_avg_gossip_0_turns_the_timer_off_and_max_bytes_starts_rounds() -> None:
    """As JGroups allows: no periodic gossip, rounds only from max_bytes; one of the two
    must be on, or nothing would ever be purged."""
    s = _stable(B, desired_avg_gossip=0, max_bytes=1000)
    assert s.next_deadline() == math.inf
    s.up([Message(None, b"x" * 1000, src=A)], 1.0)
    assert split(s.take_down()) == ([], [GetDigest("STABLE")])
    with pytest.raises(PropertyError, match=r"desired_avg_gossip and max_bytes cannot both be 0"):
        Stable(desired_avg_gossip=0, max_bytes=0)
    with pytest.raises(PropertyError, match=r"desired_avg_gossip and max_bytes cannot both be 0"):
        s.set_property("max_bytes", 0, 2.0)
    s.set_property("desired_avg_gossip", 10.0, 2.0)
    assert 7.0 <= s.next_deadline() <= 17.0
    s.set_property("max_bytes", 0, 3.0)
    with pytest.raises(PropertyError, match=r"desired_avg_gossip and max_bytes cannot both be 0"):
        s.set_property("desired_avg_gossip", 0, 3.0)
    s.tick(s.next_deadline())
    assert split(s.take_down()) == ([], [GetDigest("STABLE")])


def test_stable_needs_a_digest_provider_below() -> None:
    with pytest.raises(PropertyError, match="STABLE needs NAKACK2 or MCAST below it"):
        StackConfig.of("SIM", "STABLE").build()
    StackConfig.of("SIM", "NAKACK2", "STABLE").build()


def test_stable_bytes_that_come_while_a_round_runs_count_towards_the_next_round() -> None:
    """A STABILITY forgets only what the member's own digest covered: the 900 bytes that
    came up after B gossiped still count, so 100 more start the next round (with the
    periodic gossip off nothing else would purge them)."""
    s = _stable(B, desired_avg_gossip=0, max_bytes=1000)
    s.up([Message(None, b"x" * 1000, src=A)], 1.0)
    assert split(s.take_down()) == ([], [GetDigest("STABLE")])
    s.up_event(DigestReply("STABLE", Digest({A: (1, 1), B: (0, 0), C: (0, 0)})), 1.0)
    (gossip,), _ = split(s.take_down())
    assert gossip.headers[ID].type == STABLE_GOSSIP
    s.up([Message(None, b"x" * 900, src=C)], 1.1)  # the round is running
    stable = Digest({A: (1, 1), B: (0, 0), C: (0, 0)})
    s.up([Message(None, src=A, headers={ID: StableHeader(STABILITY, VIEW.view_id, stable)})], 1.2)
    assert split(s.take_down()) == ([], [StableDigest(stable)])
    assert s.stats()["bytes_since_stability"] == 900
    s.up([Message(None, b"x" * 100, src=C)], 1.3)
    assert split(s.take_down()) == ([], [GetDigest("STABLE")])
