"""GMS: joins, leaves, coordinator hand-over and takeover, on the simulated network."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
import trio

from triogroups import Address, MergeView, Message, StackConfig, View, ViewId
from triogroups.events import (
    BecomeServer,
    Connect,
    Disconnect,
    Disconnected,
    MembersFound,
    Merge,
    MergeDigest,
    PingData,
    ResumeStable,
    SetDigest,
    Suspect,
    SuspendStable,
    Unsuspect,
    ViewChange,
)
from triogroups.protocols import ids
from triogroups.protocols.gms import Gms, GmsHeader
from triogroups.protocols.gms._header import (
    CANCEL_MERGE,
    INSTALL_MERGE_VIEW,
    JOIN_REQ,
    JOIN_RSP,
    MERGE_REQ,
    MERGE_RSP,
    VIEW,
    VIEW_ACK,
)
from triogroups.testing import open_cluster, wait_until
from triogroups.view import Digest

STACK = StackConfig.of("SIM", "PING", "DISCARD", "GMS")


async def test_gms_first_member_becomes_coordinator_of_a_singleton_view(
    autojump_clock: Any,
) -> None:
    async with open_cluster(1, STACK) as cluster:
        (a,) = cluster.members
        assert a.view is not None and a.view.members == (a.address,)
        assert a.protocol("GMS").stats()["state"] == "coordinator"


async def test_gms_members_join_one_by_one_and_agree_on_growing_views(
    autojump_clock: Any,
) -> None:
    async with open_cluster(4, STACK) as cluster:
        a = cluster.members[0]
        final = await cluster.wait_for_view()
        assert final.coord == a.address
        assert final.members == tuple(m.address for m in cluster.members)
        for member in cluster.members:
            ids_seen = [e.view.view_id.id for e in member.events if isinstance(e, ViewChange)]
            assert ids_seen == sorted(set(ids_seen))  # view ids only grow


async def test_gms_concurrent_joins_are_installed_in_batches(autojump_clock: Any) -> None:
    async with open_cluster(5, STACK, view=False) as cluster:
        await cluster.join(cluster.members[0])
        async with trio.open_nursery() as nursery:
            for member in cluster.members[1:]:
                nursery.start_soon(member.connect)
        view = await cluster.wait_for_view()
        assert view.view_id.id < 5  # four joiners, fewer than four views: bundled
        assert cluster.members[0].protocol("GMS").stats()["joins"] == 4


async def test_gms_participant_leaves_and_the_rest_install_a_view_without_it(
    autojump_clock: Any,
) -> None:
    async with open_cluster(3, STACK) as cluster:
        a, b, c = cluster.members
        await b.disconnect()
        view = await cluster.wait_for_view([a, c])
        assert b.address not in view
        await wait_until(lambda: b.left, timeout=10, interval=0.01)


async def test_gms_leaving_coordinator_hands_over_to_the_next_member(
    autojump_clock: Any,
) -> None:
    async with open_cluster(3, STACK) as cluster:
        a, b, c = cluster.members
        await a.disconnect()
        view = await cluster.wait_for_view([b, c])
        assert view.coord == b.address
        assert b.protocol("GMS").stats()["state"] == "coordinator"
        await wait_until(lambda: a.left, timeout=10, interval=0.01)


async def test_gms_lost_join_response_is_retried_and_duplicates_are_harmless(
    autojump_clock: Any,
) -> None:
    async with open_cluster(2, STACK, view=False) as cluster:
        a, b = cluster.members
        await cluster.join(a)

        def is_join_rsp(msg: Message) -> bool:
            hdr = msg.headers.get(ids.GMS)
            return hdr is not None and hdr.type == JOIN_RSP

        b.protocol("DISCARD").drop_if(is_join_rsp, direction="up")
        await cluster.join(b)
        view = await cluster.wait_for_view()
        assert view.members == (a.address, b.address)
        assert b.protocol("GMS").stats()["join_requests_sent"] >= 2


async def test_gms_joiner_alone_after_max_join_attempts_starts_its_own_group(
    autojump_clock: Any,
) -> None:
    stack = STACK.configure("GMS", max_join_attempts=2, join_timeout=0.5)
    async with open_cluster(2, stack, view=False) as cluster:
        a, b = cluster.members
        await cluster.join(a)
        b.protocol("DISCARD").drop_if(
            lambda m: m.headers.get(ids.GMS) is not None, direction="up", count=None
        )
        view = await cluster.join(b)
        assert view.members == (b.address,)
        assert b.protocol("GMS").stats()["join_attempts_exhausted"] == 1


# --- unit level: the sans-IO object with explicit time -----------------------------------

A, B, C = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C")))


def _gms(me: Address, **props: Any) -> Gms:
    gms = Gms(**props)
    gms.check_stack([], [])
    gms.start(me, "test", 0.0)
    return gms


def _installed(gms: Gms, view: View) -> None:
    gms.down_event(Connect(), 0.0)  # no discovery below: singleton at once
    gms.take_down()
    gms.take_up()
    assert gms.view is not None
    hdr = GmsHeader(VIEW, view, ref_view_id=gms.view.view_id)  # made from our singleton view
    gms.up([Message(me_of(gms), src=view.coord, headers={ids.GMS: hdr})], 0.0)
    gms.take_down()
    gms.take_up()


def me_of(gms: Gms) -> Address:
    assert gms.local_address is not None
    return gms.local_address


def test_gms_coordinator_batches_requests_into_one_view_after_max_bundling_time() -> None:
    gms = _gms(A, max_bundling_time=0.1)
    gms.down_event(Connect(), 0.0)
    gms.take_down(), gms.take_up()
    for joiner in (B, C):
        gms.up([Message(A, src=joiner, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 0.0)
    assert gms.take_down() == [] and gms.next_deadline() == 0.1
    gms.tick(0.1)
    out = [m for item in gms.take_down() if isinstance(item, list) for m in item]
    views = [m.headers[ids.GMS].view for m in out if m.headers[ids.GMS].type == VIEW]
    rsps = [m.dest for m in out if m.headers[ids.GMS].type == JOIN_RSP]
    assert len(views) == 1 and views[0].members == (A, B, C) and views[0].view_id.id == 2
    assert rsps == [B, C]


def test_gms_joiner_installs_view_then_digest_then_becomes_server() -> None:
    gms = _gms(B)
    gms._has_discovery = True
    gms.down_event(Connect(), 0.0)
    gms.take_down()
    gms.up_event(MembersFound((PingData(A, ("h", 1), True),)), 0.0)
    gms.take_down()
    view = View(ViewId(2, A), [A, B])
    digest = Digest({A: (5, 5)})
    gms.up([Message(B, src=A, headers={ids.GMS: GmsHeader(JOIN_RSP, view, digest)})], 0.0)
    down = gms.take_down()
    events = [d for d in down if not isinstance(d, list)]
    assert events == [ViewChange(view), SetDigest(digest), BecomeServer()]
    acks = [m for d in down if isinstance(d, list) for m in d]
    assert [m.headers[ids.GMS].type for m in acks] == [VIEW_ACK] and acks[0].dest == A
    assert gms.take_up() == [ViewChange(view)]


def test_gms_next_member_takes_over_when_the_coordinator_is_suspected() -> None:
    gms = _gms(B)
    _installed(gms, View(ViewId(3, A), [A, B, C]))
    assert gms.state == "participant"
    gms.up_event(Suspect((A,)), 1.0)
    gms.tick(1.0 + gms.max_bundling_time)
    out = [m for item in gms.take_down() if isinstance(item, list) for m in item]
    (view_msg,) = [m for m in out if m.headers[ids.GMS].type == VIEW]
    new_view = view_msg.headers[ids.GMS].view
    assert new_view.members == (B, C) and new_view.view_id == ViewId(4, B)
    assert gms.state == "coordinator"


def test_gms_only_the_first_unsuspected_member_takes_over() -> None:
    gms = _gms(C)
    _installed(gms, View(ViewId(3, A), [A, B, C]))
    gms.up_event(Suspect((A,)), 1.0)
    gms.tick(2.0)
    assert gms.state == "participant"
    assert not [m for item in gms.take_down() if isinstance(item, list) for m in item]


def test_gms_member_taking_over_excludes_every_member_suspected_before() -> None:
    """C learns that A (coordinator) and then B are suspected, in two events: it takes over
    on the second and its first view must leave out both, not only the fresh suspect B
    (a view [A, C] would name the dead A coordinator). JGroups queues every suspect then."""
    gms = _gms(C)
    _installed(gms, View(ViewId(3, A), [A, B, C]))
    gms.up_event(Suspect((A,)), 1.0)
    assert gms.state == "participant"
    gms.up_event(Suspect((B,)), 2.0)
    gms.tick(2.0 + gms.max_bundling_time)
    out = [m for item in gms.take_down() if isinstance(item, list) for m in item]
    (view_msg,) = [m for m in out if m.headers[ids.GMS].type == VIEW]
    assert view_msg.headers[ids.GMS].view.members == (C,)
    assert gms.state == "coordinator" and gms.view is not None and gms.view.coord == C


def test_gms_older_and_foreign_views_are_ignored() -> None:
    gms = _gms(B)
    _installed(gms, View(ViewId(3, A), [A, B]))
    gms.up([Message(B, src=A, headers={ids.GMS: GmsHeader(VIEW, View(ViewId(2, A), [A, B]))})], 0)
    gms.up([Message(B, src=A, headers={ids.GMS: GmsHeader(VIEW, View(ViewId(9, A), [A, C]))})], 0)
    assert gms.view is not None and gms.view.view_id == ViewId(3, A)
    assert gms.stats()["old_views_ignored"] == 1 and gms.stats()["views_without_me"] == 1


def test_gms_disconnect_before_joining_reports_disconnected_at_once() -> None:
    gms = _gms(A)
    gms.down_event(Disconnect(), 0.0)
    assert Disconnected() in gms.take_up()


def test_gms_tells_the_transport_the_next_view_before_taking_the_joiners_digest() -> None:
    """Over TCP a multicast reaches only the transport's members: the joiners must be
    among them before the digest is taken, or their windows wait forever (TMP_VIEW)."""
    from triogroups.events import GetDigest, TmpView

    gms = _gms(A, max_bundling_time=0.0)
    gms.has_digest = True
    gms.down_event(Connect(), 0.0)
    gms.take_down(), gms.take_up()
    gms.up([Message(A, src=B, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 0.0)
    events = [e for e in gms.take_down() if not isinstance(e, list)]
    assert [type(e) for e in events] == [TmpView, GetDigest]
    assert events[0].view.members == (A, B)


def test_gms_rejoin_of_a_member_of_the_view_asks_for_the_digest_of_its_installation() -> None:
    """A member of the installed view asking to join again (its JOIN_RSP was lost, or the
    coordinator that took it crashed before answering) gets the view with the digest of the
    view's installation: everyone has multicast to it since, and a digest taken now would
    start its windows after all of that (chaos run tcp seed 109761227: 231 multicasts of
    view 35 never delivered at a joiner answered 2 s after it). The answer goes at once:
    the view is not sent again, so there are no VIEW_ACKs to wait for (it used to wait
    out ``view_ack_collection_timeout``). A new joiner's digest is taken now, before its
    view exists."""
    from triogroups.events import DigestReply, GetDigest

    view = View(ViewId(3, A), [A, B, C])
    gms = _member(A, view, max_bundling_time=0.0)
    gms.has_digest = True
    gms.up([Message(A, src=C, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 1.0)
    events = [e for e in gms.take_down() if isinstance(e, GetDigest)]
    assert events == [GetDigest(gms.name, view.view_id)]
    gms.up_event(DigestReply(gms.name, Digest({A: (4, 4), B: (9, 9), C: (0, 0)})), 1.0)
    (rsp,) = _sent(gms, JOIN_RSP)  # at once: no VIEW went out, so no VIEW_ACK is awaited
    assert rsp.dest == C and rsp.headers[ids.GMS].view == view
    assert rsp.headers[ids.GMS].digest[B] == (9, 9)

    gms = _member(A, view, max_bundling_time=0.0)
    gms.has_digest = True
    gms.up([Message(A, src=D, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 1.0)
    assert [e for e in gms.take_down() if isinstance(e, GetDigest)] == [GetDigest(gms.name)]


# --- leaving and merging: what the membership property tests found ------------------------

D = Address(4, "D")


def _member(me: Address, view: View, **props: Any) -> Gms:
    """A GMS at ``me`` with ``view`` installed (as coordinator or participant)."""
    gms = _gms(me, **props)
    gms.down_event(Connect(), 0.0)
    gms.install(view, 0.0)
    gms.take_down()
    gms.take_up()
    return gms


def test_gms_coordinator_drops_a_view_a_merge_view_overtook_while_it_waited_for_the_digest() -> (
    None
):
    """Campaign udp seed 41714 (view ids must grow): B, coordinator of [B|7], computed [B|8]
    for a joiner and asked for its digest; C's INSTALL_MERGE_VIEW [C|8] of [C|3] and [B|7]
    came before the digest did, and B installed it; then the digest came, and B sent [B|8]
    and installed it after [C|8]. JGroups installs no view whose id is not above the one
    held (it takes the digest in the same call, so nothing comes in between): B drops
    [B|8], sends neither VIEW nor JOIN_RSP, and its requests go back to the queue, to be
    answered against [C|8] (dropped there, as B no longer coordinates). A rejoin's answer,
    the view installed when it was asked for, is dropped the same way: it would have gone
    out as a VIEW [B|7] and been installed after [C|8]."""
    from triogroups.events import DigestReply, GetDigest

    own = View(ViewId(7, B), [B, A, D])
    merged = MergeView(ViewId(8, C), [C, B, A, D], [View(ViewId(3, C), [C]), own])
    merge = GmsHeader(INSTALL_MERGE_VIEW, merged, None, merge_id=1)
    for joiner in (Address(5, "E"), A):  # a new joiner, then a rejoin of a member of [B|7]
        gms = _member(B, own, max_bundling_time=0.0)
        gms.has_digest = True
        gms.up([Message(B, src=joiner, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 1.0)
        assert [e for e in gms.take_down() if isinstance(e, GetDigest)]
        gms.up([Message(B, src=C, headers={ids.GMS: merge})], 1.0)
        assert _views_up(gms) == [merged] and gms.state == "participant"
        gms.take_down()
        gms.up_event(DigestReply(gms.name, Digest({B: (4, 4), A: (2, 2), D: (1, 1)})), 1.0)
        out = [m for item in gms.take_down() if isinstance(item, list) for m in item]
        assert [m.headers[ids.GMS].type for m in out] == []
        assert gms.view == merged and _views_up(gms) == []
        stats = gms.stats()
        assert stats["stale_views_dropped"] == 1 and stats["queued_requests"] == 0
        assert stats["installing"] is None


def test_gms_coordinator_still_coordinating_answers_a_dropped_view_s_requests_in_its_new_view() -> (
    None
):
    """The requests of a view dropped because a newer one came in meanwhile (see the test
    above) are not lost: a member that still coordinates (here a view injected with it as
    coordinator) answers them with a view after the new one, and asks for the digest
    again."""
    from triogroups.events import DigestReply, GetDigest, InjectView

    e = Address(5, "E")
    gms = _member(B, View(ViewId(7, B), [B, A]), max_bundling_time=0.0)
    gms.has_digest = True
    gms.up([Message(B, src=e, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 1.0)
    gms.take_down()
    newer = View(ViewId(9, B), [B, A, D])
    gms.down_event(InjectView(newer), 1.0)
    assert gms.view == newer and gms.state == "coordinator"
    gms.take_down(), gms.take_up()
    gms.up_event(DigestReply(gms.name, Digest({B: (4, 4), A: (2, 2)})), 1.0)
    assert [type(e) for e in gms.take_down() if not isinstance(e, list)][-1] is GetDigest
    assert gms.stats()["stale_views_dropped"] == 1 and gms.stats()["installing"] == "B|10"
    gms.up_event(DigestReply(gms.name, Digest({B: (4, 4), A: (2, 2), D: (1, 1)})), 1.0)
    (view_msg,) = _sent(gms, VIEW)
    assert view_msg.headers[ids.GMS].view == View(ViewId(10, B), [B, A, D, e])
    assert _views_up(gms) == [View(ViewId(10, B), [B, A, D, e])]


def _run_timers(gms: Gms, until: float) -> None:
    """Tick as the layer host does; every tick must move the deadline past now."""
    now = gms.next_deadline()
    while now <= until:
        gms.tick(now)
        assert gms.next_deadline() > now, f"tick at {now} left next_deadline() due"
        now = gms.next_deadline()


def _sent(gms: Gms, kind: int) -> list[Message]:
    out = [m for item in gms.take_down() if isinstance(item, list) for m in item]
    return [m for m in out if m.headers[ids.GMS].type == kind]


def test_gms_leaving_coordinator_timing_out_with_a_request_queued_leaves_no_timer_due() -> None:
    """A suspicion queued while the leaving coordinator waits for VIEW_ACKs (bundled for
    max_bundling_time) outlived the leave: the bundling deadline stayed, and with no
    request left the tick never moved it, so the timer loop spun at one virtual time."""
    gms = _member(A, View(ViewId(3, A), [A, B, C]), leave_timeout=1.0, max_bundling_time=0.05)
    gms.down_event(Disconnect(), 0.0)
    gms.tick(0.05)  # installs [B, C]; their acks never come
    gms.up_event(Suspect((B,)), 0.98)
    _run_timers(gms, until=5.0)
    assert gms.state == "left" and gms.next_deadline() == math.inf


def test_gms_member_that_left_has_no_view_and_takes_part_in_no_merge() -> None:
    """A left member answers a merge leader that still sees its old view with a refusal
    and installs no merge view: it is out of the group."""
    gms = _member(B, View(ViewId(3, A), [A, B]), leave_timeout=1.0)
    gms.down_event(Disconnect(), 0.0)
    _run_timers(gms, until=2.0)  # no LEAVE_RSP: the leave times out
    assert gms.state == "left" and gms.view is None
    gms.take_down(), gms.take_up()
    gms.up([Message(B, src=C, headers={ids.GMS: GmsHeader(MERGE_REQ, merge_id=1)})], 2.5)
    (refusal,) = _sent(gms, MERGE_RSP)
    assert refusal.dest == C and refusal.headers[ids.GMS].view is None
    subgroups = [View(ViewId(2, C), [C]), View(ViewId(3, A), [A, B])]
    merged = MergeView(ViewId(4, C), [C, A, B], subgroups)
    hdr = GmsHeader(INSTALL_MERGE_VIEW, merged, merge_id=1)
    gms.up([Message(B, src=C, headers={ids.GMS: hdr})], 2.6)
    assert gms.take_up() == [] and gms.take_down() == []
    assert gms.state == "left" and gms.view is None


def test_gms_leaving_participant_never_takes_over_from_a_suspected_coordinator() -> None:
    """B asked to leave; A is then suspected. B is on its way out: it must not install a
    view that names it coordinator (C takes over), or C keeps a coordinator that left."""
    gms = _member(B, View(ViewId(3, A), [A, B, C]), leave_timeout=1.0)
    gms.down_event(Disconnect(), 0.0)
    gms.take_down()
    gms.up_event(Suspect((A,)), 0.5)
    _run_timers(gms, until=2.0)
    assert _sent(gms, VIEW) == []
    assert gms.state == "left" and gms.stats().get("coordinator_takeovers", 0) == 0


def test_gms_merge_digest_names_only_the_members_of_the_other_subgroups() -> None:
    """Our own subgroup's windows are in sync: moving them to the merged digest would skip
    what is in flight. A member listed in our subgroup and in another too (A moved on
    from [A|3] to [A|4]) is other: our window for it may be stale."""
    digest = Digest({A: (7, 7), B: (9, 9), C: (4, 4), D: (2, 2)})
    gms = _member(B, View(ViewId(3, B), [B, C]))
    subgroups = [View(ViewId(4, A), [A, D]), View(ViewId(3, B), [B, C])]
    merged = MergeView(ViewId(5, A), [A, D, B, C], subgroups)
    hdr = GmsHeader(INSTALL_MERGE_VIEW, merged, digest, merge_id=1)
    gms.up([Message(B, src=A, headers={ids.GMS: hdr})], 1.0)
    events = [e for e in gms.take_down() if not isinstance(e, list)]
    assert events == [MergeDigest(Digest({A: (7, 7), D: (2, 2)})), ViewChange(merged)]

    gms = _member(B, View(ViewId(3, A), [A, B, C]))
    subgroups = [View(ViewId(4, A), [A]), View(ViewId(3, A), [A, B, C])]
    merged = MergeView(ViewId(5, A), [A, B, C], subgroups)
    hdr = GmsHeader(INSTALL_MERGE_VIEW, merged, digest, merge_id=1)
    gms.up([Message(B, src=A, headers={ids.GMS: hdr})], 1.0)
    events = [e for e in gms.take_down() if not isinstance(e, list)]
    assert events == [MergeDigest(Digest({A: (7, 7)})), ViewChange(merged)]


def _merge_rsp(src: Address, view: View, merge_id: int = 1) -> Message:
    return Message(A, src=src, headers={ids.GMS: GmsHeader(MERGE_RSP, view, merge_id=merge_id)})


def _views_up(gms: Gms) -> list[View]:
    return [e.view for e in gms.take_up() if isinstance(e, ViewChange)]


def test_gms_requests_wait_while_a_merge_is_under_way_so_a_view_id_names_one_view() -> None:
    """A merges from [A|3] when C asks to join. Installing [A|4] (A, C) at once and the
    merge view [A|4] (A, B) after it would give one view id two memberships (and drop C):
    the join waits for the merge, as in JGroups, and gets the next view."""
    gms = _member(A, View(ViewId(3, A), [A]), max_bundling_time=0.0)
    b_view = View(ViewId(2, B), [B])
    gms.up_event(Merge((View(ViewId(3, A), [A]), b_view), (A, B)), 1.0)
    gms.take_down()
    gms.up([Message(A, src=C, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 1.1)
    _run_timers(gms, until=1.2)
    assert gms.view is not None and gms.view.view_id == ViewId(3, A)
    gms.up([_merge_rsp(B, b_view)], 1.3)
    (merged,) = _views_up(gms)
    assert isinstance(merged, MergeView) and merged.view_id == ViewId(4, A)
    gms.up([Message(A, src=B, headers={ids.GMS: GmsHeader(VIEW_ACK, merged)})], 1.4)
    _run_timers(gms, until=1.4)
    (joined,) = _views_up(gms)
    assert joined.view_id == ViewId(5, A) and joined.members == (A, B, C)


def test_gms_merge_leader_installs_no_other_view_before_the_merge_view_is_acked() -> None:
    """INSTALL_MERGE_VIEW is a unicast, the next VIEW a multicast: sent at once, the VIEW
    could overtake it, and a member that then ignored the older merge view never got the
    merge digest (its window for a member of the other subgroup stayed stale)."""
    gms = _member(A, View(ViewId(3, A), [A]), max_bundling_time=0.0)
    b_view = View(ViewId(2, B), [B])
    gms.up_event(Merge((View(ViewId(3, A), [A]), b_view), (A, B)), 1.0)
    gms.up([_merge_rsp(B, b_view)], 1.1)
    (merged,) = _views_up(gms)
    assert isinstance(merged, MergeView)
    (install,) = _sent(gms, INSTALL_MERGE_VIEW)
    assert install.dest == B and gms.installing
    gms.up([Message(A, src=C, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 1.2)
    _run_timers(gms, until=1.1 + gms.view_ack_collection_timeout - 0.01)
    assert _views_up(gms) == []
    _run_timers(gms, until=1.1 + gms.view_ack_collection_timeout)  # B never acked
    (joined,) = _views_up(gms)
    assert joined.members == (A, B, C)


def test_gms_merge_participant_acks_the_merge_view_to_the_leader() -> None:
    gms = _member(B, View(ViewId(2, B), [B]))
    merged = MergeView(ViewId(4, A), [A, B], [View(ViewId(3, A), [A]), View(ViewId(2, B), [B])])
    hdr = GmsHeader(INSTALL_MERGE_VIEW, merged, merge_id=1)
    gms.up([Message(B, src=A, headers={ids.GMS: hdr})], 1.0)
    (ack,) = _sent(gms, VIEW_ACK)
    assert ack.dest == A and ack.headers[ids.GMS].view == merged


def test_gms_merge_leader_whose_view_changed_meanwhile_cancels_the_merge() -> None:
    """The merge would be built from a view A no longer has: cancel, MERGE3 tries again."""
    gms = _member(A, View(ViewId(3, A), [A]))
    b_view = View(ViewId(2, B), [B])
    gms.up_event(Merge((View(ViewId(3, A), [A]), b_view), (A, B)), 1.0)
    gms.take_down()
    newer = View(ViewId(7, C), [C, A])
    hdr = GmsHeader(VIEW, newer, ref_view_id=ViewId(3, A))
    gms.up([Message(A, src=C, headers={ids.GMS: hdr})], 1.1)
    gms.take_down(), gms.take_up()
    gms.up([_merge_rsp(B, b_view)], 1.2)
    (cancel,) = _sent(gms, CANCEL_MERGE)
    assert cancel.dest == B and gms.view == newer and _views_up(gms) == []
    assert gms.stats()["merges_cancelled"] == 1 and not gms.merger.busy


def _installed_in_turn(gms: Gms, *views: View) -> None:
    for view in views:
        gms.install(view, 0.0)
    gms.take_down(), gms.take_up()


def test_gms_merge_leader_leaves_out_a_member_a_later_view_of_its_own_removed() -> None:
    """Campaign udp-mcast 10609: C was excluded from [A|3] in [A|4] while paused, then A
    left in [A|5]; C, still holding [A|3], speaks for it in the merge. B's own views
    removed A after [A|3]: A must not come back (it never acks, and MCAST senders would
    wait for it), and the merged digest names nobody left out. C itself comes back: it
    answered, it is alive and holds that view."""
    gms = _member(B, View(ViewId(3, A), [A, B, C]))
    _installed_in_turn(gms, View(ViewId(4, A), [A, B]), View(ViewId(5, A), [B]))
    stale = View(ViewId(3, A), [A, B, C])
    gms.up_event(Merge((View(ViewId(5, A), [B]), stale), (B, C)), 1.0)
    (req,) = _sent(gms, MERGE_REQ)
    assert req.dest == C
    digest = Digest({A: (4, 4), B: (2, 2), C: (9, 9)})
    rsp = GmsHeader(MERGE_RSP, stale, digest, merge_id=req.headers[ids.GMS].merge_id)
    gms.up([Message(B, src=C, headers={ids.GMS: rsp})], 1.1)
    (merged,) = _views_up(gms)
    assert isinstance(merged, MergeView) and merged.members == (B, C)
    assert stale in merged.subgroups
    (install,) = _sent(gms, INSTALL_MERGE_VIEW)
    assert install.dest == C
    assert install.headers[ids.GMS].digest == Digest({B: (2, 2), C: (9, 9)})


def test_gms_merge_leader_takes_back_the_members_merge3_heard_holding_a_stale_view() -> None:
    """Campaign udp-mcast 20310: a partition cut B off from the others while their heir
    coordinator was paused, so they never formed a view and still held B's [B|3]; B's
    [B|5] removed them. MERGE3 heard C, D and E holding [B|3]: they are alive and in that
    view, as the members whose digests a JGroups subgroup coordinator fetches are, so all
    come back in one merge, not only C, the one that answered (one member per MERGE3
    round kept the last one out for 13 s after the heal). A, removed too and not heard,
    stays out (it may have left: `_lineage`)."""
    d, e = Address(4, "D"), Address(5, "E")
    stale = View(ViewId(3, B), [B, A, C, d, e])
    gms = _member(B, stale)
    _installed_in_turn(gms, View(ViewId(5, B), [B]))
    own = View(ViewId(5, B), [B])
    gms.up_event(Merge((own, stale), (B, C), (frozenset({B}), frozenset({C, d, e}))), 1.0)
    (req,) = _sent(gms, MERGE_REQ)
    assert req.dest == C
    gms.up([_merge_rsp(C, stale, req.headers[ids.GMS].merge_id)], 1.1)
    (merged,) = _views_up(gms)
    assert isinstance(merged, MergeView) and merged.members == (B, C, d, e)
    assert {m.dest for m in _sent(gms, INSTALL_MERGE_VIEW)} == {C, d, e}


def test_gms_merge_leader_keeps_the_members_of_a_view_it_never_installed() -> None:
    """Only what B saw itself counts: A left B's view, but C's view [C|4] is not one B
    installed (A may have gone over to C's side), so its members all come in."""
    gms = _member(B, View(ViewId(3, A), [A, B]))
    _installed_in_turn(gms, View(ViewId(4, B), [B]))
    other = View(ViewId(4, C), [C, A])
    gms.up_event(Merge((View(ViewId(4, B), [B]), other), (B, C)), 1.0)
    (req,) = _sent(gms, MERGE_REQ)
    rsp = GmsHeader(MERGE_RSP, other, merge_id=req.headers[ids.GMS].merge_id)
    gms.up([Message(B, src=C, headers={ids.GMS: rsp})], 1.1)
    (merged,) = _views_up(gms)
    assert isinstance(merged, MergeView) and merged.members == (B, C, A)


def test_gms_member_installing_a_view_neither_starts_nor_joins_a_merge() -> None:
    gms = _member(A, View(ViewId(3, A), [A, B]), max_bundling_time=0.0)
    gms.up([Message(A, src=C, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 1.0)
    _run_timers(gms, until=1.0)  # [A|4] waits for B's VIEW_ACK
    assert gms.installing
    gms.take_down()
    gms.up_event(Merge((View(ViewId(4, A), [A, B, C]), View(ViewId(2, D), [D])), (A, D)), 1.1)
    assert _sent(gms, MERGE_REQ) == []
    gms.up([Message(A, src=D, headers={ids.GMS: GmsHeader(MERGE_REQ, merge_id=1)})], 1.2)
    (refusal,) = _sent(gms, MERGE_RSP)
    assert refusal.dest == D and refusal.headers[ids.GMS].view is None


def test_gms_merge_that_comes_up_while_a_view_is_installed_starts_once_the_view_is_in() -> None:
    """Campaign tcp seed 10627: MERGE3's checks at the merge leader fell twice in a row into
    the ack collection of a view (members in other subgroups never ack it), and each
    `Merge` was dropped: a member alone in its view was merged 12 s after the heal. As in
    JGroups, whose view handler queues MERGE behind the view it is installing, the merge
    waits for the view and starts as soon as it is in."""
    gms = _member(A, View(ViewId(3, A), [A, B]), max_bundling_time=0.0)
    gms.up([Message(A, src=C, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 1.0)
    _run_timers(gms, until=1.0)  # [A|4] waits for B's VIEW_ACK, then C's
    (view,) = _views_up(gms)
    gms.take_down()
    d_view = View(ViewId(2, D), [D])
    gms.up_event(Merge((view, d_view), (A, D)), 1.1)
    assert _sent(gms, MERGE_REQ) == [] and not gms.merger.busy
    gms.up([Message(A, src=B, headers={ids.GMS: GmsHeader(VIEW_ACK, view)})], 1.2)
    assert [m.dest for m in _sent(gms, JOIN_RSP)] == [C]
    gms.up([Message(A, src=C, headers={ids.GMS: GmsHeader(VIEW_ACK, view)})], 1.3)
    assert not gms.installing
    (request,) = _sent(gms, MERGE_REQ)
    assert request.dest == D and gms.merger.busy
    assert gms.stats()["merges_deferred"] == 1


def test_gms_merge_deferred_behind_a_view_does_not_start_once_the_member_leaves() -> None:
    """The merge that waited for a view is led only by a member still in the group: a
    coordinator that began to leave meanwhile starts none when the view is in."""
    props = {"max_bundling_time": 0.0, "view_ack_collection_timeout": 0.5, "leave_timeout": 5.0}
    gms = _member(A, View(ViewId(3, A), [A, B]), **props)
    gms.up([Message(A, src=C, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 1.0)
    _run_timers(gms, until=1.0)  # [A|4] waits for B's VIEW_ACK, then C's
    (view,) = _views_up(gms)
    gms.up_event(Merge((view, View(ViewId(2, D), [D])), (A, D)), 1.1)
    gms.down_event(Disconnect(), 1.2)
    _run_timers(gms, until=2.5)  # nobody acks: [A|4] is in at 2.0, A still leaving
    assert gms.state == "leaving"
    assert _sent(gms, MERGE_REQ) == [] and not gms.merger.busy
    assert gms.stats()["merges_deferred"] == 1


def test_gms_merge_participant_of_a_merge_its_leader_gave_up_answers_the_leaders_retry() -> None:
    """Campaign unicast2 seeds 1215 and 2152: C's MERGE_REQ 1 reached B (retransmitted)
    only after C's merge had timed out; B then waited in merge 1 for merge_timeout and
    refused C's retries 2 and 3, so the partitions were merged back 12 s after the heal.
    A leader runs one merge at a time: its newer request ends the one B waits in."""
    b_view = View(ViewId(7, B), [B])
    gms = _member(B, b_view)
    gms.up([Message(B, src=C, headers={ids.GMS: GmsHeader(MERGE_REQ, merge_id=1)})], 22.46)
    (late,) = _sent(gms, MERGE_RSP)
    assert late.headers[ids.GMS].view == b_view  # C ignores it: its merge 1 is over
    gms.up([Message(B, src=C, headers={ids.GMS: GmsHeader(MERGE_REQ, merge_id=2)})], 22.86)
    (answer,) = _sent(gms, MERGE_RSP)
    assert answer.headers[ids.GMS].view == b_view and answer.headers[ids.GMS].merge_id == 2
    # Another leader's request is still refused while B takes part in C's merge.
    gms.up([Message(B, src=D, headers={ids.GMS: GmsHeader(MERGE_REQ, merge_id=9)})], 22.9)
    (refusal,) = _sent(gms, MERGE_RSP)
    assert refusal.dest == D and refusal.headers[ids.GMS].view is None


def _events_down(gms: Gms) -> list[Any]:
    return [e for e in gms.take_down() if not isinstance(e, list)]


def test_gms_merge_suspends_stability_at_leader_and_representatives_until_it_ends() -> None:
    """The merge digest is taken at the start: what is multicast meanwhile must not be
    purged before the other subgroups got it (JGroups' SUSPEND_STABLE / RESUME_STABLE)."""
    leader = _member(A, View(ViewId(3, A), [A]))
    b_view = View(ViewId(2, B), [B])
    leader.up_event(Merge((View(ViewId(3, A), [A]), b_view), (A, B)), 1.0)
    assert _events_down(leader) == [SuspendStable(leader.merge_timeout)]
    leader.up([_merge_rsp(B, b_view)], 1.1)
    events = _events_down(leader)
    assert events[-1] == ResumeStable() and isinstance(events[-2], ViewChange)

    rep = _member(B, b_view)
    rep.up([Message(B, src=A, headers={ids.GMS: GmsHeader(MERGE_REQ, merge_id=1)})], 1.0)
    assert _events_down(rep) == [SuspendStable(rep.merge_timeout)]
    merged = MergeView(ViewId(4, A), [A, B], [View(ViewId(3, A), [A]), b_view])
    hdr = GmsHeader(INSTALL_MERGE_VIEW, merged, merge_id=1)
    rep.up([Message(B, src=A, headers={ids.GMS: hdr})], 1.2)
    assert _events_down(rep) == [ViewChange(merged), ResumeStable()]

    rep = _member(B, b_view)
    rep.up([Message(B, src=A, headers={ids.GMS: GmsHeader(MERGE_REQ, merge_id=1)})], 1.0)
    rep.take_down()
    _run_timers(rep, until=1.0 + rep.merge_timeout)  # the leader never came back
    assert _events_down(rep) == [ResumeStable()]


def test_gms_member_whose_view_was_not_merged_ignores_the_merge_view() -> None:
    """B moved on from [A|3] to [B|4] (and, alone, purged what it sent there) while C still
    reported [A|3] with B in it: the merged digest's entry for B came from C and named
    seqnos B no longer had. B ignores the merge view; the next merge takes in [B|4]."""
    gms = _member(B, View(ViewId(4, B), [B]))
    subgroups = [View(ViewId(4, A), [A, C]), View(ViewId(3, A), [A, B, C])]
    merged = MergeView(ViewId(5, A), [A, C, B], subgroups)
    hdr = GmsHeader(INSTALL_MERGE_VIEW, merged, Digest({A: (9, 9), B: (4, 4)}), merge_id=1)
    gms.up([Message(B, src=A, headers={ids.GMS: hdr})], 1.0)
    assert gms.take_down() == [] and gms.take_up() == []
    assert gms.view is not None and gms.view.view_id == ViewId(4, B)
    assert gms.stats()["merge_views_not_from_my_view"] == 1


def test_gms_logs_a_suspicion_once_though_failure_detection_repeats_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 12 item 9: FD_ALL3 repeats `Suspect` at every check while a member stays
    silent; GMS warns once per suspicion (and still passes every repeat on), and says at
    INFO when the member is heard from again."""
    caplog.set_level(logging.DEBUG, logger="triogroups.protocols.gms")
    gms = _gms(B)
    _installed(gms, View(ViewId(3, A), [A, B, C]))
    caplog.clear()
    for now in (1.0, 1.5, 2.0):
        gms.up_event(Suspect((C,)), now)
    gms.up_event(Unsuspect(C), 2.5)
    gms.up_event(Suspect((C,)), 3.0)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "B: suspects C"),
        (logging.INFO, "B: C no longer suspected"),
        (logging.WARNING, "B: suspects C"),
    ]
    assert gms.stats()["suspects"] == 4


# --- limits against abuse (issue 18) -----------------------------------------------------


def _join_reqs(gms: Gms, joiners: list[Address], now: float = 0.0) -> None:
    me = me_of(gms)
    gms.up([Message(me, src=j, headers={ids.GMS: GmsHeader(JOIN_REQ)}) for j in joiners], now)


def test_gms_coordinator_queues_at_most_max_pending_joins_distinct_joiners() -> None:
    """A flood of JOIN_REQs from made-up addresses queues ``max_pending_joins`` joiners;
    the rest are dropped and counted, repeats of a queued joiner take no room."""
    gms = _member(A, View(ViewId(1, A), [A]), max_pending_joins=3, max_bundling_time=1.0)
    flood = [Address(100 + i, f"X{i}") for i in range(10)]
    _join_reqs(gms, flood[:2] + flood[:2] + flood[2:])
    stats = gms.stats()
    assert stats["queued_joiners"] == 3
    assert stats["join_requests_dropped_pending"] == 7
    _run_timers(gms, 1.0)
    (view,) = [m.headers[ids.GMS].view for m in _sent(gms, VIEW)]
    assert view.members == (A, *flood[:3])


def test_gms_coordinator_accepts_at_most_max_members() -> None:
    """With the view and the queued joiners at ``max_members``, further joiners are
    dropped and counted; a member of the view asking again (a rejoin) is not."""
    gms = _member(A, View(ViewId(1, A), [A, B]), max_members=3, max_bundling_time=1.0)
    _join_reqs(gms, [C, Address(200, "D"), Address(201, "E"), B])
    assert gms.stats()["join_requests_dropped_max_members"] == 2
    _run_timers(gms, 1.0)
    (view,) = [m.headers[ids.GMS].view for m in _sent(gms, VIEW)]
    assert view.members == (A, B, C)
    _join_reqs(gms, [Address(202, "F")], 2.0)
    assert gms.stats()["join_requests_dropped_max_members"] == 3


def test_gms_joiner_whose_merge_view_overtakes_its_join_rsp_installs_both() -> None:
    """Chaos run udp seed 17: coordinator A admitted B into view 2 and then A's subgroup
    merged with C's; B got INSTALL_MERGE_VIEW before its JOIN_RSP and, not in a group yet,
    dropped it. B must install the join view, then the merge view with the merge digest
    of the other subgroup, and ack both."""
    gms = _gms(B)
    gms._has_discovery = True
    gms.down_event(Connect(), 0.0)
    gms.take_down()
    gms.up_event(MembersFound((PingData(A, ("h", 1), True),)), 0.0)
    gms.take_down()
    left = View(ViewId(2, A), [A, B])
    right = View(ViewId(2, C), [C])
    merged = MergeView(ViewId(3, A), [A, B, C], [left, right])
    digest = Digest({A: (5, 5), B: (0, 0), C: (7, 7)})
    install = GmsHeader(INSTALL_MERGE_VIEW, merged, digest, merge_id=1)
    gms.up([Message(B, src=A, headers={ids.GMS: install})], 0.0)
    assert gms.take_down() == [] and gms.take_up() == []
    join = GmsHeader(JOIN_RSP, left, Digest({A: (5, 5), B: (0, 0)}))
    gms.up([Message(B, src=A, headers={ids.GMS: join})], 0.1)
    down = gms.take_down()
    events = [d for d in down if not isinstance(d, list)]
    assert events == [
        ViewChange(left),
        SetDigest(Digest({A: (5, 5), B: (0, 0)})),
        BecomeServer(),
        MergeDigest(Digest({C: (7, 7)})),
        ViewChange(merged),
    ]
    acks = [m.headers[ids.GMS] for d in down if isinstance(d, list) for m in d]
    assert [(h.type, h.view) for h in acks] == [(VIEW_ACK, left), (VIEW_ACK, merged)]
    assert gms.view == merged and gms.take_up() == [ViewChange(left), ViewChange(merged)]


def test_gms_merge_view_that_overtakes_the_view_of_its_subgroup_is_installed_after_it() -> None:
    """Campaign udp seed 40031: H, admitted by two coordinators, held A's [A|6] when
    INSTALL_MERGE_VIEW [F|9] of [F|2] and D's [D|8] (with H) came, and D's VIEW [D|8]
    only 0.35 s later. H ignored the merge view (not from its view), installed [D|8] and
    stayed there while C and D went on in [F|9]. In JGroups the merge view reaches H as
    D's multicast, behind [D|8]: H keeps it and installs it right after [D|8], with the
    digest of the other subgroup, and acks both. ([D|8] came from another lineage than H's
    [A|6], and is now ignored as such, see `follows`; a subgroup's VIEW made from the view
    held is late the same way.) Here B holds [A|6] and C's [C|7], made from it, is late."""
    gms = _member(B, View(ViewId(6, A), [A, B]))
    late = View(ViewId(7, C), [C, B])
    merged = MergeView(ViewId(9, D), [D, C, B], [View(ViewId(2, D), [D]), late])
    digest = Digest({D: (5, 5), C: (3, 3), B: (0, 0)})
    install = GmsHeader(INSTALL_MERGE_VIEW, merged, digest, merge_id=1)
    gms.up([Message(B, src=D, headers={ids.GMS: install})], 1.0)
    assert gms.take_down() == [] and gms.take_up() == []
    hdr = GmsHeader(VIEW, late, ref_view_id=ViewId(6, A))
    gms.up([Message(None, src=C, headers={ids.GMS: hdr})], 1.35)
    down = gms.take_down()
    events = [d for d in down if not isinstance(d, list)]
    assert events == [ViewChange(late), MergeDigest(Digest({D: (5, 5)})), ViewChange(merged)]
    acks = [(m.dest, m.headers[ids.GMS].view) for d in down if isinstance(d, list) for m in d]
    assert acks == [(C, late), (D, merged)]
    assert gms.view == merged and _views_up(gms) == [late, merged]


def test_gms_merge_view_kept_for_a_late_view_is_dropped_once_a_view_as_new_is_in() -> None:
    """The merge view waits only for the view it merges: a view from another coordinator
    that is as new makes it old, and a VIEW no newer than the one held is ignored as ever.
    A merge view whose subgroup with us is older than our view stays ignored (see
    `test_gms_member_whose_view_was_not_merged_ignores_the_merge_view`)."""
    gms = _member(B, View(ViewId(6, A), [A, B]))
    late = View(ViewId(8, C), [C, B])
    merged = MergeView(ViewId(9, D), [D, C, B], [View(ViewId(2, D), [D]), late])
    install = GmsHeader(INSTALL_MERGE_VIEW, merged, None, merge_id=1)
    gms.up([Message(B, src=D, headers={ids.GMS: install})], 1.0)
    other = View(ViewId(7, A), [A, B])
    hdr = GmsHeader(VIEW, other, ref_view_id=ViewId(6, A))
    gms.up([Message(None, src=A, headers={ids.GMS: hdr})], 1.1)
    assert _views_up(gms) == [other]  # still waiting for [C|8]
    newer = View(ViewId(8, A), [A, B])
    hdr = GmsHeader(VIEW, newer, ref_view_id=ViewId(7, A))
    gms.up([Message(None, src=A, headers={ids.GMS: hdr})], 1.2)
    hdr = GmsHeader(VIEW, late, ref_view_id=ViewId(7, C))
    gms.up([Message(None, src=C, headers={ids.GMS: hdr})], 1.3)
    assert _views_up(gms) == [newer] and gms.view == newer


def test_gms_merge_representative_answers_only_for_the_members_it_does_not_suspect() -> None:
    """Campaign udp seed 10908: F was cut off while its coordinator A installed [A|5]
    (with F) and died, and B and C left from [A|5]; F kept [A|4] (A, D, C, B, E, F) and
    never took over, as D, next in line, was alive in a view of its own. 20 s later F
    spoke for [A|4] in a merge, and the merge view named the dead A and the departed B
    and C: F's next view held A, whose next view [A|5] held F, so view order broke. F
    suspected A, B and C all along: it answers only for those it does not suspect (as
    JGroups' representative answers only for the members whose digests it fetched,
    JGRP-948), from its view's id, and the digest goes with it unchanged (the leader takes
    the entries of the members named)."""
    leader, e, f = Address(10, "L"), Address(5, "E"), Address(6, "F")
    stale = View(ViewId(4, A), [A, D, C, B, e, f])
    gms = _member(f, stale)
    gms.up_event(Suspect((A, C)), 10.0)
    gms.up_event(Suspect((B,)), 22.0)
    assert gms.view == stale and gms.state.value == "participant"  # D is next: no takeover
    gms.up([Message(f, src=leader, headers={ids.GMS: GmsHeader(MERGE_REQ, merge_id=7)})], 27.8)
    (answer,) = _sent(gms, MERGE_RSP)
    hdr = answer.headers[ids.GMS]
    assert answer.dest == leader and hdr.merge_id == 7
    assert hdr.view == View(ViewId(4, A), [D, e, f])
    gms.up_event(Unsuspect(C), 28.0)  # C was heard again: it is spoken for again
    gms.up([Message(f, src=leader, headers={ids.GMS: GmsHeader(MERGE_REQ, merge_id=8)})], 28.1)
    (again,) = _sent(gms, MERGE_RSP)
    assert again.headers[ids.GMS].view == View(ViewId(4, A), [D, C, e, f])


def test_gms_merge_leader_leaves_out_the_members_of_its_own_view_it_suspects() -> None:
    """The leader speaks for its own view in the same way: a member of it that it suspects
    and has not removed yet (the view that removes it waits for the merge) is not in the
    merge view and gets no INSTALL_MERGE_VIEW."""
    own = View(ViewId(3, A), [A, C])
    gms = _member(A, own, max_bundling_time=0.5)
    gms.up_event(Suspect((C,)), 0.9)
    gms.take_down()
    b_view = View(ViewId(2, B), [B])
    gms.up_event(Merge((own, b_view), (A, B)), 1.0)
    (req,) = _sent(gms, MERGE_REQ)
    assert req.dest == B
    gms.up([_merge_rsp(B, b_view, merge_id=req.headers[ids.GMS].merge_id)], 1.1)
    (merged,) = _views_up(gms)
    assert isinstance(merged, MergeView) and merged.members == (A, B)
    assert merged.subgroups == (View(ViewId(3, A), [A]), b_view)
    (install,) = _sent(gms, INSTALL_MERGE_VIEW)
    assert install.dest == B


def test_gms_merge_leader_stops_waiting_for_a_representative_it_suspects() -> None:
    """Campaign tcp seed 41126: A left while its LEAVE_REQ went to the dead coordinator D,
    so B, who took over, kept A in [B|5]; MERGE3 had heard A holding the older [D|4], and
    B's merge asked A. B suspected A 1.5 s later but waited out merge_timeout, and the
    joiner E (the new D there), queued behind the merge, got in 5.5 s after asking. A
    suspected representative will not answer: the leader stops waiting for it, and the
    requests queued meanwhile are taken up at once, the suspicion with them."""
    own = View(ViewId(5, B), [B, A, C])
    stale = View(ViewId(4, D), [D, B, A, C])
    e = Address(5, "E")
    gms = _member(B, own, max_bundling_time=0.0)
    gms.up_event(Merge((stale, own), (A, B)), 1.0)
    (req,) = _sent(gms, MERGE_REQ)
    assert req.dest == A and gms.merger.busy
    gms.up([Message(B, src=e, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 1.1)
    _run_timers(gms, until=2.5)
    assert _views_up(gms) == []  # the join waits for the merge
    gms.up_event(Suspect((A,)), 2.5)
    assert not gms.merger.busy and _sent(gms, CANCEL_MERGE) == []
    _run_timers(gms, until=2.5)
    (view,) = _views_up(gms)
    assert view.view_id == ViewId(6, B) and view.members == (B, C, e)
    assert gms.stats()["merge_answers_given_up"] == 1
    assert gms.stats()["merge_timeouts"] == 0


def test_gms_leaving_coordinator_cancels_the_merge_it_leads_and_installs_its_leave_view() -> None:
    """Campaign tcp seed 50444: D's last INFO, sent just before it installed [C|7], showed
    [C|6]; D was killed, and C's MERGE3 check started a merge of [C|6] and [C|7] asking D.
    C began to leave 0.6 s later: its own LEAVE_REQ waited behind the merge (merge_timeout
    5 s), the leave ran out first, and C left without the view without itself. The others
    kept the departed C as coordinator, and a new member asking to join found none for
    11 s. A member that starts to leave cancels the merge it leads (CANCEL_MERGE to those
    it asked), so its leave view goes out at once."""
    own = View(ViewId(7, C), [C, D, A])
    stale = View(ViewId(6, C), [C, D, A, B])
    gms = _member(C, own, max_bundling_time=0.0, leave_timeout=1.0)
    gms.up_event(Merge((stale, own), (D, C)), 1.0)
    (req,) = _sent(gms, MERGE_REQ)
    assert req.dest == D and gms.merger.busy
    gms.down_event(Disconnect(), 1.5)
    assert not gms.merger.busy
    out = [m for item in gms.take_down() if isinstance(item, list) for m in item]
    cancels = [m for m in out if m.headers[ids.GMS].type == CANCEL_MERGE]
    assert [m.dest for m in cancels] == [D]
    (view_msg,) = [m for m in out if m.headers[ids.GMS].type == VIEW]
    assert view_msg.headers[ids.GMS].view == View(ViewId(8, C), [D, A])
    assert gms.stats()["merges_dropped_leaving"] == 1
    _run_timers(gms, until=3.0)  # nobody acks: C leaves after leave_timeout
    assert gms.state == "left"
