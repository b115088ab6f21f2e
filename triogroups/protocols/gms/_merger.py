"""The merge half of GMS: turning coexisting views into one MergeView.

The merge leader (chosen by MERGE3) sends MERGE_REQ to one representative
of each view; each answers MERGE_RSP with its view and its multicast
digest, or refuses (view None) while it takes part in another merge or
installs a view. Once all have answered, or ``merge_timeout`` passed (a
member that never answers is left out), the leader builds the MergeView:
its own subgroup first (so it coordinates), then the other subgroups ordered
by their coordinators; the view id is one above the highest merged id. A
member listed only in another subgroup's view is left out when a view the
leader installed after that one removed it, unless it answered for that
view or MERGE3 heard it holding that view since its last check
(`_lineage`: a member that left must not come back through the stale
view of a member that missed its leave; JGroups keeps only the members
whose digests the subgroup coordinators fetched). The leader is one of the
representatives MERGE3 chose, not necessarily the coordinator of its own
view (when no member coordinates the view it holds, see MERGE3): it comes
first in the merge view, so it coordinates it. With
fewer than two answers the merge is cancelled (CANCEL_MERGE), and so it is
when the leader's own view changed while it waited: the merge would be
built from a view it no longer has. A participant whose leader disappears
forgets the merge after ``merge_timeout``, so the next check can elect
another leader.

A representative, the leader too for its own view, answers with its view
less the members it suspects (`Gms.merge_view_answer`, the view id kept).
JGroups' representative answers only for the members that reply to its
GET_DIGEST_REQ within ``merge_timeout`` / 2 (JGRP-948); one that failure
detection suspects has not been heard for its whole timeout and would not
reply either. Campaign udp seed 10908: F was cut off while its coordinator
installed a view with F and then died, and two members left from that view;
D, next in line in F's view, was alive in another view, so F never took over
and spoke for its stale view in a merge 20 s later. The merge view named the
dead coordinator and the two that had left: F's next view held them and
their next view held F, and view order broke. JGroups' whole GET_DIGEST
round was tried here and taken back: a representative waited
``merge_timeout`` / 2 for members that never answered, and the slower merges
failed other seeds; the suspicions are what that round would learn, without
the wait. A member that died or left too recently to be suspected is still
named (`_lineage` covers those the leader saw leave); failure detection
removes it with the next view.

The leader sends INSTALL_MERGE_VIEW with the merged digest to every member,
which installs it after a `MergeDigest` with the entries of the members of
the other subgroups only: its own subgroup (the one whose view it holds) is
in sync already, and moving those windows would skip what is still in
flight in that view. A member whose view is none of the subgroups ignores
the merge view: it moved on after its old view was reported, so what the
merged digest says of it comes from that old view and may name messages it
purged since; the next merge takes it in with its own view. A joiner whose
INSTALL_MERGE_VIEW overtakes its JOIN_RSP (admitted just before its
coordinator's subgroup merged) keeps it and installs it right after the
view of its JOIN_RSP, which is then one of the subgroups; dropping it would
leave the joiner without the merge view and without windows for the other
subgroups (found by a chaos run). So does a member whose INSTALL_MERGE_VIEW
overtakes the VIEW of its subgroup: it holds an older view, one of the
subgroups is a newer view with it in it, and it installs the merge view right
after that view. In JGroups the leader sends the merge view to the subgroup
coordinators, and each multicasts it to its members behind the views it sent
before, so no member gets it ahead of its subgroup's view; ours goes to every
member as a unicast and can. Campaign udp seed 40031: H, admitted by two
coordinators, held A's [A|6] when the merge view [F|9] of [F|2] and D's
[D|8] came; it ignored it, installed [D|8] 0.35 s later, and stayed there
14 s while C and D went on in [F|9] (udp-mcast seed 40496 the same way).
Members answer
with VIEW_ACK, and the leader installs no other view until all have acked
(at most ``view_ack_collection_timeout``), as for any view:
INSTALL_MERGE_VIEW is a unicast and the next VIEW a multicast, so the next
view could otherwise arrive first, and a member that then ignored the older
merge view would never get the merge digest.

While a merge is under way here, as leader or participant, GMS installs no
view from queued JOIN, LEAVE and SUSPECT requests (JGroups suspends its view
handler the same way); they are taken up once the merge ends. Otherwise the
leader could install view n+1 while it merges from view n, then a merge view
with the same id n+1 and other members. Stability is suspended too
(`SuspendStable`, at the leader and every representative): the digests are
taken at the start, and what is multicast after that must still be there to
retransmit to the other subgroups once the merge view is installed.

A `Merge` that comes up while this member installs a view (waits for the
joiners' digest or for VIEW_ACKs) waits for that view, as in JGroups, whose
view handler queues MERGE behind the JOIN, LEAVE and SUSPECT requests it is
working on: it starts once the view is in (the latest one wins; it goes
before the requests queued meanwhile, which then wait for it as above).
Dropping it, as we did, cost a whole MERGE3 ``check_interval`` whenever a
check fell into an ack collection, and after a merge took in members that
never ack (they moved on to other views) every ack collection runs its full
``view_ack_collection_timeout``: campaign tcp seed 10627 merged a member,
alone in its own view, 12 s after the heal, two checks in a row having
fallen into the ack collections of views that dropped crashed members. A
merge that comes up while another is under way is dropped, as in JGroups;
MERGE3's next check asks again.

The leader stops waiting for a representative that failure detection suspects
(`suspected`; an addition beyond JGroups, whose leader waits out
``merge_timeout``): it was not heard for FD_ALL3's whole timeout and will not
answer, and the JOIN, LEAVE and SUSPECT requests queued behind the merge wait
as long as the merge does. Campaign tcp seed 41126: A left while its LEAVE_REQ
went to a dead coordinator, so B, who took over, kept A in its view [B|5];
MERGE3 had heard A holding the older [D|4], and B's merge asked A at 16.7 s.
B suspected A at 18.2 s but waited until 21.7 s, and D, whose JOIN_REQ had
come at 16.0 s, got in only then.

A member that starts to leave cancels the merge it leads (`drop_lead`:
CANCEL_MERGE to the representatives it asked; an addition beyond JGroups,
whose view handler discards the leave of a coordinator that is merging): the
merge view would name it coordinator while it is on its way out, and its own
LEAVE_REQ would wait behind the merge, up to ``merge_timeout``, while its
leave is bounded by ``leave_timeout``. Campaign tcp seed 50444: D's last
INFO, sent just before it installed [C|7], showed [C|6]; D was then killed,
and C's check at 13.4 s merged [C|6] and [C|7] asking D. C began to leave at
14.0 s, its flush ran out at 15.0 s, its LEAVE_REQ waited for the merge, and
it left at 16.0 s without the view without itself: the others kept C as
coordinator until E suspected C, the dead D and A (which left after C) at
24.8 s, and the new D, asking to join since 14.5 s, found no coordinator and
started alone at 25.5 s. Views that still differ once it is gone are merged
by a later MERGE3 check.
"""

from __future__ import annotations

import logging
import math

from triogroups.address import Address
from triogroups.events import GetDigest, Merge, MergeDigest, ResumeStable, SuspendStable
from triogroups.message import Message
from triogroups.protocols.gms._context import GmsContext
from triogroups.protocols.gms._header import (
    CANCEL_MERGE,
    INSTALL_MERGE_VIEW,
    MERGE_REQ,
    MERGE_RSP,
    VIEW_ACK,
    GmsHeader,
)
from triogroups.protocols.gms._lineage import Lineage, still_members
from triogroups.view import Digest, MergeView, View, ViewId

__all__ = ["Merger"]

DIGEST_REQUESTER = "GMS.merge"

_log = logging.getLogger("triogroups.protocols.gms")


class Merger:
    """Merge state of one GMS: as leader, or as participant of someone's merge."""

    def __init__(self, gms: GmsContext) -> None:
        self.gms = gms
        self._ids = 0
        # leader side
        self.merge_id = 0
        self._expected: set[Address] = set()
        self._answers: dict[Address, tuple[View, Digest | None]] = {}
        #: view id -> the members MERGE3 heard holding it (`Merge.holders`)
        self._holders: dict[ViewId, frozenset[Address]] = {}
        self._deadline = math.inf
        self._own_digest_pending = False
        # participant side
        self._leader: tuple[Address, int] | None = None
        self._participant_deadline = math.inf
        self._reply_pending: tuple[Address, int] | None = None
        # the INSTALL_MERGE_VIEW that came before the JOIN_RSP or VIEW of its subgroup
        self._early: tuple[Message, GmsHeader] | None = None
        # a Merge that came up while a view was being installed: it starts after it
        self._deferred: Merge | None = None
        self._lineage = Lineage()

    @property
    def busy(self) -> bool:
        return self.merge_id != 0 or self._leader is not None

    def next_deadline(self) -> float:
        return min(self._deadline, self._participant_deadline)

    def view_installed(self, view: View) -> None:
        """GMS installed ``view``: the leader leaves out whom a later view removed
        (see `_lineage`)."""
        self._lineage.installed(view)

    # --- leader ----------------------------------------------------------------------

    def start(self, event: Merge, now: float) -> None:
        gms = self.gms
        me = gms.local_address
        if self.busy or gms.view is None or me not in event.coords:
            gms.counters["merges_not_started"] += 1
            return
        if gms.installing:  # after the view being installed (see the module docstring)
            gms.counters["merges_deferred"] += 1
            self._deferred = event
            return
        self._ids += 1
        self.merge_id = self._ids
        self._expected = set(event.coords)
        self._answers = {}
        self._holders = {v.view_id: h for v, h in zip(event.views, event.holders, strict=False)}
        self._deadline = now + gms.merge_timeout
        gms.counters["merges_led"] += 1
        _log.info("%s: merge %d: asking %s", me, self.merge_id, ", ".join(map(str, event.coords)))
        gms.pass_down(SuspendStable(gms.merge_timeout))
        for rep in event.coords:
            if rep == me:
                self._own_answer(now)
            else:
                gms.send_down_one(gms.control(rep, GmsHeader(MERGE_REQ, merge_id=self.merge_id)))

    def start_deferred(self, now: float) -> None:
        """The view being installed is in: start the merge that waited for it, if any (GMS
        checks again that this member may lead one)."""
        event, self._deferred = self._deferred, None
        if event is not None:
            self.gms.start_merge(event, now)

    def _own_answer(self, now: float) -> None:
        gms = self.gms
        if gms.has_digest:
            self._own_digest_pending = True
            gms.pass_down(GetDigest(DIGEST_REQUESTER))
        else:
            self._answer(gms.local_address, gms.merge_view_answer(), None, now)  # type: ignore[arg-type]

    def digest_ready(self, digest: Digest, now: float) -> None:
        """Our own digest arrived: as leader it is our answer; as participant our reply."""
        gms = self.gms
        if self._own_digest_pending:
            self._own_digest_pending = False
            self._answer(gms.local_address, gms.merge_view_answer(), digest, now)  # type: ignore[arg-type]
        if self._reply_pending is not None and gms.view is not None:
            leader, merge_id = self._reply_pending
            self._reply_pending = None
            hdr = GmsHeader(MERGE_RSP, gms.merge_view_answer(), digest, merge_id=merge_id)
            gms.send_down_one(gms.control(leader, hdr))

    def response(self, msg: Message, hdr: GmsHeader, now: float) -> None:
        if msg.src is None or hdr.merge_id != self.merge_id or not self.merge_id:
            self.gms.counters["merge_responses_ignored"] += 1
            return
        if hdr.view is None:
            self.gms.counters["merge_rejections"] += 1
            self._expected.discard(msg.src)
            self._maybe_finish(now)
            return
        self._answer(msg.src, hdr.view, hdr.digest, now)

    def suspected(self, members: list[Address], now: float) -> None:
        """Failure detection suspects ``members``: as leader, stop waiting for the answer of
        any of them (see the module docstring: it would only run out ``merge_timeout``)."""
        gone = self._expected & set(members) - set(self._answers) - {self.gms.local_address}
        if not self.merge_id or not gone:
            return
        self.gms.counters["merge_answers_given_up"] += len(gone)
        _log.info(
            "%s: merge %d: not waiting for %s (suspected)",
            self.gms.local_address,
            self.merge_id,
            ", ".join(map(str, sorted(gone))),
        )
        self._expected -= gone
        self._maybe_finish(now)

    def drop_lead(self, now: float) -> None:
        """This member starts to leave: cancel the merge it leads, if any (see the module
        docstring). The representatives asked are told (CANCEL_MERGE); the requests queued
        behind the merge, the leave's own among them, are taken up at once."""
        self._deferred = None
        if not self.merge_id:
            return
        gms = self.gms
        me = gms.local_address
        merge_id = self.merge_id
        asked = sorted((self._expected | set(self._answers)) - {me})
        self._reset_leader()
        gms.counters["merges_dropped_leaving"] += 1
        _log.info("%s: merge %d cancelled: leaving", me, merge_id)
        self._call_off(merge_id, asked, now)

    def _call_off(self, merge_id: int, asked: list[Address], now: float) -> None:
        """The merge ``merge_id`` we led is off: tell the representatives ``asked``
        (CANCEL_MERGE), let STABLE run again and take up the requests queued behind it."""
        gms = self.gms
        for member in asked:
            gms.send_down_one(gms.control(member, GmsHeader(CANCEL_MERGE, merge_id=merge_id)))
        gms.pass_down(ResumeStable())
        gms.resume_requests(now)

    def _answer(self, member: Address, view: View, digest: Digest | None, now: float) -> None:
        self._answers[member] = (view, digest)
        self._maybe_finish(now)

    def _maybe_finish(self, now: float) -> None:
        if self.merge_id and self._expected <= set(self._answers) and not self._own_digest_pending:
            self._finish(now)

    def _finish(self, now: float) -> None:
        gms = self.gms
        me = gms.local_address
        answers = self._answers
        holders = self._holders
        merge_id = self.merge_id
        self._reset_leader()
        views = list(dict((v.view_id, v) for v, _ in answers.values()).values())
        own = answers[me][0] if me is not None and me in answers else None
        stale = own is None or gms.view is None or own.view_id != gms.view.view_id
        if len(views) < 2 or me is None or own is None or stale:
            gms.counters["merges_cancelled"] += 1
            _log.info("%s: merge %d cancelled: %d view(s) to merge", me, merge_id, len(views))
            self._call_off(merge_id, [m for m in answers if m != me], now)
            return
        others = sorted((v for v in views if v.view_id != own.view_id), key=lambda v: v.coord)
        reps = [rep for rep in answers if rep != me]
        members = list(
            dict.fromkeys(
                [
                    me,
                    *own.members,
                    *(
                        m
                        for v in others
                        for m in still_members(
                            v, self._lineage, [*reps, *holders.get(v.view_id, ())]
                        )
                    ),
                ]
            )
        )
        top = max(v.view_id.id for v in views)
        view = MergeView(ViewId(top + 1, me), members, [own, *others])
        digest = _merged_digest([answers[m] for m in answers], set(members))
        gms.counters["merges_done"] += 1
        _log.info(
            "%s: merge %d: merging %s into [%s]",
            me,
            merge_id,
            ", ".join(f"[{v.view_id}]" for v in [own, *others]),
            view.view_id,
        )
        for member in members:
            if member != me:
                hdr = GmsHeader(INSTALL_MERGE_VIEW, view, digest, merge_id=merge_id)
                gms.send_down_one(gms.control(member, hdr))
        self._install(view, digest, now)
        gms.pass_down(ResumeStable())
        gms.collect_acks(view, now)

    def _reset_leader(self) -> None:
        self.merge_id = 0
        self._expected = set()
        self._answers = {}
        self._holders = {}
        self._deadline = math.inf
        self._own_digest_pending = False

    # --- participant -----------------------------------------------------------------

    def request(self, msg: Message, hdr: GmsHeader, now: float) -> None:
        gms = self.gms
        if msg.src is None:
            return
        waiting_in = self._leader
        if waiting_in is not None and waiting_in[0] == msg.src and hdr.merge_id > waiting_in[1]:
            # A leader runs one merge at a time: its newer request means it gave up the one
            # we wait in (it timed out before our late answer came; its cancel went only to
            # those that answered). Waiting out merge_timeout would refuse every retry
            # meanwhile (campaign unicast2 seeds 1215 and 2152: a MERGE_REQ retransmitted
            # after the leader's timeout kept its retries refused for 5 s).
            self._clear_participant()
        if self.busy or gms.installing or gms.view is None:
            gms.counters["merge_requests_refused"] += 1
            refuse = GmsHeader(MERGE_RSP, None, merge_id=hdr.merge_id)
            gms.send_down_one(gms.control(msg.src, refuse))
            return
        self._leader = (msg.src, hdr.merge_id)
        self._participant_deadline = now + gms.merge_timeout
        gms.pass_down(SuspendStable(gms.merge_timeout))
        if gms.has_digest:
            self._reply_pending = (msg.src, hdr.merge_id)
            gms.pass_down(GetDigest(DIGEST_REQUESTER))
        else:
            reply = GmsHeader(MERGE_RSP, gms.merge_view_answer(), None, merge_id=hdr.merge_id)
            gms.send_down_one(gms.control(msg.src, reply))

    def install(self, msg: Message, hdr: GmsHeader, now: float) -> None:
        view = hdr.view
        if view is None or self.gms.local_address not in view:
            return  # not for us
        if self.gms.view is None:
            if self.gms.state == "client" and isinstance(view, MergeView):
                self._early = (msg, hdr)  # the JOIN_RSP is late: install it after the join
            return  # not in a group (yet, or any more)
        if view.view_id.id <= self.gms.view.view_id.id:
            self.gms.counters["old_views_ignored"] += 1
            return
        mine = self.gms.view.view_id
        if isinstance(view, MergeView) and all(sub.view_id != mine for sub in view.subgroups):
            me = self.gms.local_address
            if any(me in sub and sub.view_id.id > mine.id for sub in view.subgroups):
                self.gms.counters["merge_views_before_their_subgroup"] += 1
                self._early = (msg, hdr)  # our subgroup's VIEW is late: install it after that
                return
            self.gms.counters["merge_views_not_from_my_view"] += 1
            return
        self._install(view, hdr.digest, now)
        self._clear_participant()
        if msg.src is not None:
            self.gms.send_down_one(self.gms.control(msg.src, GmsHeader(VIEW_ACK, view)))
        self.gms.resume_requests(now)

    def install_early(self, now: float) -> None:
        """This member installed a view from JOIN_RSP or VIEW: now the merge view that came
        first, if it merges that view (the coordinator admitted us, or installed that view,
        then its subgroup merged). One that merges a view still newer is kept for that view;
        one no newer than this view is dropped."""
        early, self._early = self._early, None
        if early is not None:
            self.install(*early, now)

    def install_injected(self, view: MergeView, digest: Digest | None, now: float) -> None:
        """Install a merge view a test injected (`InjectView`), as INSTALL_MERGE_VIEW would,
        without a VIEW_ACK; a merge this member took part in is over."""
        self._install(view, digest, now)
        self._clear_participant()
        self.gms.resume_requests(now)

    def cancel(self, msg: Message, hdr: GmsHeader, now: float) -> None:
        if self._leader is not None and self._leader == (msg.src, hdr.merge_id):
            self._clear_participant()
            self.gms.resume_requests(now)

    def forget(self) -> None:
        """Drop any merge this member leads or takes part in (it left the group)."""
        self._early = None
        self._deferred = None
        self._lineage.forget()
        self._reset_leader()
        self._clear_participant()

    def _clear_participant(self) -> None:
        if self._leader is not None:
            self.gms.pass_down(ResumeStable())
        self._leader = None
        self._reply_pending = None
        self._participant_deadline = math.inf

    def _install(self, view: View, digest: Digest | None, now: float) -> None:
        gms = self.gms
        if digest is not None and isinstance(view, MergeView) and gms.view is not None:
            others = _other_subgroups(view, gms.view.view_id)
            gms.pass_down(MergeDigest(Digest({m: digest[m] for m in digest if m in others})))
        gms.install(view, now)

    # --- timers ---------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        if now >= self._deadline:
            self.gms.counters["merge_timeouts"] += 1
            missing = ", ".join(map(str, self._expected - set(self._answers)))
            _log.warning(
                "%s: merge %d timed out after merge_timeout %ss (no answer from: %s)",
                self.gms.local_address,
                self.merge_id,
                self.gms.merge_timeout,
                missing or "-",
            )
            self._finish(now)
        if now >= self._participant_deadline:
            self.gms.counters["merge_participations_expired"] += 1
            self._clear_participant()
            self.gms.resume_requests(now)


def _other_subgroups(view: MergeView, mine: ViewId) -> set[Address]:
    """Members of the subgroups other than ``mine`` (the view this member held).

    A member listed in our subgroup and in another too (a coordinator that
    moved on to another view still appears in the one it left) counts as
    other: our window for it may be stale. The digest layer decides what to
    do with it: it is also in the view it holds when `MergeDigest` arrives,
    so it is still with us and may still hold what we lack; NAKACK2 then
    leaves its window alone and asks (see `nakack2._membership`), a layer
    without retransmission moves it.
    """
    return {m for sub in view.subgroups if sub.view_id != mine for m in sub.members}


def _merged_digest(
    answers: list[tuple[View, Digest | None]], members: set[Address]
) -> Digest | None:
    """Each merged member's entry from the digest of its own subgroup (highest wins on
    overlap); a member left out of the merge view has none."""
    merged: Digest | None = None
    for view, digest in answers:
        if digest is None:
            continue
        own = Digest({m: digest[m] for m in view.members if m in digest and m in members})
        merged = own if merged is None else merged.merge(own)
    return merged
