"""GMS: a VIEW is installed only by a member that holds the view it was made from.

Sans-IO units of `follows` (`triogroups.protocols.gms._header`): the coordinator names in
its VIEW the view it made it from (``ref_view_id``, JGroups' delta view's), and a member
installs a newer VIEW only from that view, or from a newer view of the coordinator of the
view it holds (one of its lineage it missed); one made from another view is dropped
without a VIEW_ACK, and MERGE3 later merges the member in with a digest.
"""

from __future__ import annotations

from triogroups import Address, Message, View, ViewId
from triogroups.events import BecomeServer, Connect, MembersFound, PingData, SetDigest, ViewChange
from triogroups.protocols import ids
from triogroups.protocols.gms import Gms, GmsHeader
from triogroups.protocols.gms._header import JOIN_REQ, JOIN_RSP, VIEW, VIEW_ACK, follows
from triogroups.view import Digest

A, B, C, D, F, H = (
    Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C"), (4, "D"), (6, "F"), (8, "H"))
)


def _joined(me: Address, view: View, digest: Digest) -> Gms:
    """A GMS at ``me`` that joined ``view`` through its coordinator's JOIN_RSP."""
    gms = Gms()
    gms.check_stack([], [])
    gms._has_discovery = True
    gms.start(me, "test", 0.0)
    gms.down_event(Connect(), 0.0)
    gms.up_event(MembersFound((PingData(view.coord, ("h", 1), True),)), 0.0)
    gms.up([Message(me, src=view.coord, headers={ids.GMS: GmsHeader(JOIN_RSP, view, digest)})], 0)
    gms.take_down(), gms.take_up()
    return gms


def _view(gms: Gms, src: Address, view: View, ref: ViewId | None, now: float) -> list[Message]:
    """``src``'s VIEW of ``view`` made from ``ref`` arrives; what GMS sent back."""
    hdr = GmsHeader(VIEW, view, ref_view_id=ref)
    gms.up([Message(None, src=src, headers={ids.GMS: hdr})], now)
    return [m for item in gms.take_down() if isinstance(item, list) for m in item]


def test_gms_joiner_ignores_a_view_made_from_another_view_than_the_one_it_joined() -> None:
    """Campaign udp seed 72368: D admitted H into [D|7] (made from D's [D|6]), but the
    JOIN_RSP was lost; H then joined through A's [A|6], split off from D's views, and A's
    join digest counted B1-20 delivered, which B had sent in [D|7]. H fetched D's VIEW
    [D|7] by retransmission and installed it (a newer id), so B1-20 was owed to H and
    never delivered, while H's STABLE reports, counting from the join digest, told B,
    leaving, that it was (flushed_leave). [D|7] was not made from [A|6]: H keeps [A|6]
    and sends no VIEW_ACK, and takes A's [A|7], made from [A|6]."""
    joined = View(ViewId(6, A), [A, D, B, H])
    gms = _joined(H, joined, Digest({A: (3, 3), D: (5, 5), B: (20, 20), H: (0, 0)}))
    other = View(ViewId(7, D), [D, B, H])
    assert _view(gms, D, other, ViewId(6, D), 1.0) == []
    assert gms.view == joined and gms.take_up() == []
    assert gms.stats()["views_not_following_mine"] == 1
    nxt = View(ViewId(7, A), [A, D, B, H])
    (ack,) = _view(gms, A, nxt, ViewId(6, A), 1.1)
    assert ack.dest == A and ack.headers[ids.GMS] == GmsHeader(VIEW_ACK, nxt)
    assert gms.view == nxt and gms.take_up() == [ViewChange(nxt)]


def test_gms_member_ignores_a_newer_view_made_from_a_view_it_skipped() -> None:
    """A later view of the other lineage ([B|8], B took over from [D|7]) is not made from
    the view held either; nor is a VIEW that names no view it was made from."""
    joined = View(ViewId(6, A), [A, D, B, H])
    gms = _joined(H, joined, Digest({A: (3, 3), D: (5, 5), B: (20, 20), H: (0, 0)}))
    assert _view(gms, B, View(ViewId(8, B), [B, H]), ViewId(7, D), 1.0) == []
    assert _view(gms, B, View(ViewId(8, B), [B, H]), None, 1.1) == []
    assert gms.view == joined and gms.stats()["views_not_following_mine"] == 2


def test_gms_member_installs_a_view_made_from_a_view_of_its_lineage_it_missed() -> None:
    """Campaign udp-total-blocks seed 72770: loss kept F's [F|4], made from [F|3], from A
    and C, and F was killed 0.8 s later, so nobody retransmitted it; B, F's heir, made
    [B|5] from [F|4]. A, holding [F|3], dropped [B|5] and B's later views until MERGE3's
    merge 11 s after [F|4] (view_order). [F|4] was made by the coordinator of A's view
    from A's view (or from one made from it): A missed a view of its own lineage, so it
    installs [B|5] and acks it, then [B|6] made from [B|5]."""
    joined = View(ViewId(3, F), [F, B, A, C, D])
    gms = _joined(A, joined, Digest({F: (4, 4), B: (2, 2), A: (0, 0), C: (1, 1), D: (3, 3)}))
    nxt = View(ViewId(5, B), [B, A, C])
    (ack,) = _view(gms, B, nxt, ViewId(4, F), 1.0)
    assert ack.dest == B and ack.headers[ids.GMS] == GmsHeader(VIEW_ACK, nxt)
    assert gms.view == nxt and gms.take_up() == [ViewChange(nxt)]
    assert gms.stats()["views_not_following_mine"] == 0
    then = View(ViewId(6, B), [B, A])
    (ack,) = _view(gms, B, then, ViewId(5, B), 1.1)
    assert gms.view == then and ack.headers[ids.GMS] == GmsHeader(VIEW_ACK, then)


def test_gms_member_still_ignores_a_view_of_another_lineage_after_a_missed_one() -> None:
    """The lineage is the coordinator of the view held: a VIEW made from an older view of
    it, or from another coordinator's view newer than the one held, is still dropped."""
    joined = View(ViewId(6, A), [A, D, B, H])
    gms = _joined(H, joined, Digest({A: (3, 3), D: (5, 5), B: (20, 20), H: (0, 0)}))
    assert _view(gms, D, View(ViewId(8, D), [D, H]), ViewId(5, A), 1.0) == []
    assert _view(gms, D, View(ViewId(9, D), [D, H]), ViewId(8, D), 1.1) == []
    assert gms.view == joined and gms.stats()["views_not_following_mine"] == 2


def test_gms_old_view_is_still_acked_and_ignored() -> None:
    """A VIEW no newer than the view held is acked (its coordinator may wait for us) and
    ignored, whatever it was made from, as before."""
    joined = View(ViewId(6, A), [A, D, B, H])
    gms = _joined(H, joined, Digest({A: (3, 3), H: (0, 0)}))
    (ack,) = _view(gms, D, View(ViewId(6, D), [D, B, H]), ViewId(5, D), 1.0)
    assert ack.dest == D and ack.headers[ids.GMS].type == VIEW_ACK
    assert gms.view == joined and gms.stats()["old_views_ignored"] == 1


def test_gms_coordinator_names_in_its_view_the_view_it_made_it_from() -> None:
    gms = Gms(max_bundling_time=0.0)
    gms.check_stack([], [])
    gms.start(A, "test", 0.0)
    gms.down_event(Connect(), 0.0)  # no discovery below: [A|1] at once
    gms.take_down(), gms.take_up()
    gms.up([Message(A, src=B, headers={ids.GMS: GmsHeader(JOIN_REQ)})], 0.0)
    gms.tick(0.0)
    out = [m for item in gms.take_down() if isinstance(item, list) for m in item]
    (hdr,) = [m.headers[ids.GMS] for m in out if m.headers[ids.GMS].type == VIEW]
    assert hdr.view.view_id == ViewId(2, A) and hdr.ref_view_id == ViewId(1, A)


def test_follows_asks_for_a_newer_view_made_from_the_one_held() -> None:
    view = View(ViewId(7, A), [A, H])
    assert follows(GmsHeader(VIEW, view, ref_view_id=ViewId(6, A)), ViewId(6, A))
    assert not follows(GmsHeader(VIEW, view, ref_view_id=ViewId(6, D)), ViewId(6, A))
    assert not follows(GmsHeader(VIEW, view), ViewId(6, A))
    assert not follows(GmsHeader(VIEW, view, ref_view_id=ViewId(7, A)), ViewId(7, A))
    assert follows(GmsHeader(VIEW, view, ref_view_id=ViewId(5, D)), ViewId(4, D))
    assert not follows(GmsHeader(VIEW, view, ref_view_id=ViewId(5, D)), ViewId(6, D))
    assert not follows(GmsHeader(VIEW, view, ref_view_id=ViewId(6, D)), ViewId(5, A))
    assert not follows(GmsHeader(VIEW, None, ref_view_id=ViewId(6, A)), ViewId(6, A))


def test_joiner_s_first_view_comes_from_its_join_rsp_whatever_it_was_made_from() -> None:
    """The rule is for VIEW only: a joiner holds no view, and takes JOIN_RSP's as ever."""
    view = View(ViewId(6, A), [A, H])
    gms = Gms()
    gms.check_stack([], [])
    gms._has_discovery = True
    gms.start(H, "test", 0.0)
    gms.down_event(Connect(), 0.0)
    gms.up_event(MembersFound((PingData(A, ("h", 1), True),)), 0.0)
    gms.take_down()
    gms.up([Message(H, src=A, headers={ids.GMS: GmsHeader(JOIN_RSP, view, Digest())})], 0.0)
    events = [d for d in gms.take_down() if not isinstance(d, list)]
    assert events == [ViewChange(view), SetDigest(Digest()), BecomeServer()]
