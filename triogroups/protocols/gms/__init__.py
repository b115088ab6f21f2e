"""GMS: group membership. Joins, leaves, suspicions and the views they make.

Joining (discovery, JOIN_REQ and its retries, the first view) is in
`_joiner`; leaving (the flush, then LEAVE_REQ or the view without us) in
`_leaver`. This module owns the role, the view and the suspicions, installs
views, and routes events, messages and timers to the parts.

Installing views for queued requests, one at a time, is in `_coordinator`;
the roles (client, participant, coordinator, leaving, left) change only
through the table in `_roles`. The parts see `Gms` through `GmsContext`
(`_context`): what they may read and call, nothing more.

A participant that learns (from VERIFY_SUSPECT) that the coordinator is
suspected, and is the first unsuspected member, takes over and installs the
view without the suspects; one that is leaving never does.
Once a member has left (LEAVE_RSP, or ``leave_timeout``) it has no view, no
requests and no merge, and passes `Disconnect` down so the layers below stop
too.

Merging coexisting views (after MERGE3 passes `Merge` up) is in `_merger`;
while a merge is under way, queued requests wait for it. A VIEW is installed
only by a member that holds the view it was made from (`_header.follows`); one
made from another view is left to a merge, as a merge view is that does not
merge the view held.

Logging (logger ``triogroups.protocols.gms``, all parts of GMS): every view
installed, with who joined and who went, a member's own join and leave, the
coordinator admitting joiners and answering leaves, and merges at INFO;
suspicions, coordinator take-overs and a leave that timed out at WARNING.
Membership changes are rare, so this costs nothing on the message path.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from triogroups.address import Address
from triogroups.events import (
    Connect,
    DigestReply,
    Disconnect,
    Disconnected,
    Event,
    FlushDone,
    InjectView,
    MembersFound,
    Merge,
    Suspect,
    Unsuspect,
    ViewChange,
)
from triogroups.message import Flag, Message
from triogroups.properties import Duration, Int, at_least, positive
from triogroups.protocol import Passes, Protocol
from triogroups.protocols import ids
from triogroups.protocols._batch import carries
from triogroups.protocols.gms._coordinator import SUSPECT_REQ, Coordinator
from triogroups.protocols.gms._header import (
    CANCEL_MERGE,
    INSTALL_MERGE_VIEW,
    JOIN_REQ,
    JOIN_RSP,
    LEAVE_REQ,
    LEAVE_RSP,
    MERGE_REQ,
    MERGE_RSP,
    TYPE_NAMES,
    VIEW,
    VIEW_ACK,
    GmsHeader,
    follows,
)
from triogroups.protocols.gms._joiner import Joiner
from triogroups.protocols.gms._leaver import Leaver
from triogroups.protocols.gms._merger import DIGEST_REQUESTER, Merger
from triogroups.protocols.gms._roles import Role, RoleInput, next_role
from triogroups.view import MergeView, View

__all__ = [
    "CANCEL_MERGE",
    "INSTALL_MERGE_VIEW",
    "JOIN_REQ",
    "JOIN_RSP",
    "LEAVE_REQ",
    "LEAVE_RSP",
    "MERGE_REQ",
    "MERGE_RSP",
    "TYPE_NAMES",
    "VIEW",
    "VIEW_ACK",
    "Gms",
    "GmsHeader",
]

_log = logging.getLogger(__name__)

_ID = ids.GMS
_CONTROL = int(Flag.OOB | Flag.INTERNAL)
_DISCOVERY = frozenset({"PING", "TCPPING"})
_DIGEST_PROVIDERS = frozenset({"NAKACK2", "MCAST"})

CLIENT, PARTICIPANT, COORDINATOR, LEAVING, LEFT = (
    Role.CLIENT,
    Role.PARTICIPANT,
    Role.COORDINATOR,
    Role.LEAVING,
    Role.LEFT,
)


class Gms(Protocol):
    """Group membership service (see the module docstring)."""

    name = "GMS"
    COUNTERS = (
        "merges_not_started",
        "discovery_runs",
        "join_attempts_exhausted",
        "join_requests_sent",
        "discovery_without_coord",
        "join_responses_ignored",
        "views_installed",
        "injected_views_ignored",
        "old_views_ignored",
        "views_not_following_mine",
        "stale_views_dropped",
        "views_injected",
        "views_without_me",
        "suspects",
        "coordinator_takeovers",
        "leaves_unflushed",
        "join_requests_not_coordinator",
        "join_timeouts",
        "leave_timeouts",
        "join_requests_dropped_pending",
        "join_requests_dropped_max_members",
        "leaves",
        "joins",
        "view_acks_missing",
        "merges_deferred",
        "merges_led",
        "merge_responses_ignored",
        "merge_rejections",
        "merges_cancelled",
        "merges_done",
        "merge_requests_refused",
        "merge_views_not_from_my_view",
        "merge_views_before_their_subgroup",
        "merge_timeouts",
        "merge_answers_given_up",
        "merges_dropped_leaving",
        "merge_participations_expired",
    )
    passes_up: Passes | None = "all"  # only membership messages are its business
    id = _ID

    join_timeout = Duration(
        2.0,
        doc="time to wait for a JOIN_RSP (and for discovery)",
        check=positive,
    )
    max_join_attempts = Int(
        10,
        doc="JOIN_REQ attempts before starting alone (0: forever)",
        check=at_least(0),
    )
    leave_timeout = Duration(
        5.0,
        doc="time a leaving member waits for its messages to be stable at every member "
        "(the flush), then again for LEAVE_RSP",
        check=positive,
    )
    view_ack_collection_timeout = Duration(
        2.0,
        doc="time the coordinator waits for VIEW_ACKs",
        check=positive,
    )
    max_bundling_time = Duration(
        0.05,
        doc="time the coordinator collects requests into one view",
        check=at_least(0),
    )
    merge_timeout = Duration(
        5.0,
        doc="time a merge may take (used by MERGE3)",
        check=positive,
    )
    max_members = Int(
        1000,
        doc="members a coordinator accepts in its view; JOIN_REQs beyond are dropped",
        check=at_least(1),
    )
    max_pending_joins = Int(
        100,
        doc="JOIN_REQs of distinct joiners a coordinator queues; more are dropped",
        check=at_least(1),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.state: Role = CLIENT
        self._has_discovery = False
        self.has_digest = False
        self._suspected: set[Address] = set()
        self.joiner = Joiner(self)
        self.leaver = Leaver(self)
        self.merger = Merger(self)
        self.coordinator = Coordinator(self)

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        self._has_discovery = any(p.name in _DISCOVERY for p in below)
        self.has_digest = any(p.name in _DIGEST_PROVIDERS for p in below)
        self.leaver.check_stack([p.name for p in below])

    @property
    def has_discovery(self) -> bool:
        """True if a discovery layer below (PING, TCPPING) answers `FindMembers`."""
        return self._has_discovery

    # --- events ---------------------------------------------------------------------

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, Connect):
            if self.state == CLIENT:
                self.joiner.connect(now)
        elif isinstance(event, Disconnect):
            self.leaver.disconnect(now)
        elif isinstance(event, InjectView):
            self._inject(event, now)
        else:
            super().down_event(event, now)

    def up_event(self, event: Event, now: float) -> None:
        if isinstance(event, MembersFound) and self.state == CLIENT:
            self.joiner.members_found(event, now)
        elif isinstance(event, DigestReply) and event.requester == self.name:
            self.coordinator.digest_ready(event.digest, now)
        elif isinstance(event, DigestReply) and event.requester == DIGEST_REQUESTER:
            self.merger.digest_ready(event.digest, now)
        elif isinstance(event, FlushDone):
            self.leaver.flush_answered(event.protocol, now)
        elif isinstance(event, Merge):
            self.start_merge(event, now)
        elif isinstance(event, Suspect):
            self._suspect(event.members, now)
            self.pass_up(event)
        elif isinstance(event, Unsuspect):
            if event.member in self._suspected:
                _log.info("%s: %s no longer suspected", self.local_address, event.member)
            self._suspected.discard(event.member)
            self.pass_up(event)
        else:
            super().up_event(event, now)

    def start_merge(self, event: Merge, now: float) -> None:
        """Lead the merge MERGE3 asked for: never while leaving; a participant leads when no
        member coordinates the view it holds (MERGE3 chose it: see there)."""
        if self.state in (COORDINATOR, PARTICIPANT):
            self.merger.start(event, now)
        else:
            self.counters["merges_not_started"] += 1

    # --- views ---------------------------------------------------------------------------

    def install(self, view: View, now: float) -> None:
        """Install ``view`` here: down to the layers below, up to the application."""
        _log_view(self.local_address, self.view, view)
        self.view = view
        self.counters["views_installed"] += 1
        self.merger.view_installed(view)
        self._suspected &= set(view.members)
        mine = view.coord == self.local_address
        self.move(RoleInput.VIEW_AS_COORD if mine else RoleInput.VIEW_AS_PARTICIPANT)
        self.pass_down(ViewChange(view))
        self.pass_up(ViewChange(view))

    def _inject(self, event: InjectView, now: float) -> None:
        """Install an injected view as if the coordinator had sent it (see `InjectView`)."""
        view, digest = event.view, event.digest
        if self.local_address not in view or self.state == LEFT:
            self.counters["injected_views_ignored"] += 1
            return
        if self.view is not None and view.view_id.id <= self.view.view_id.id:
            self.counters["old_views_ignored"] += 1
            return
        self.counters["views_injected"] += 1
        if self.state == CLIENT:
            self.joiner.install_injected(view, digest, now)
        elif isinstance(view, MergeView):
            self.merger.install_injected(view, digest, now)
        else:
            self.install(view, now)

    def _view_message(self, msg: Message, hdr: GmsHeader, now: float) -> None:
        view = hdr.view
        if view is None or msg.src == self.local_address:
            return
        if self.local_address not in view:
            self.counters["views_without_me"] += 1
            return
        if self.state in (CLIENT, LEFT):
            return
        current = self.view
        installed = current is None or follows(hdr, current.view_id)
        if installed:
            self.install(view, now)
        elif current is not None and view.view_id.id > current.view_id.id:
            # made from another view: no ack, as JGroups' dropped delta view (`follows`)
            self.counters["views_not_following_mine"] += 1
            return
        else:
            self.counters["old_views_ignored"] += 1
        if msg.src is not None:
            self.send_down_one(_control(msg.src, GmsHeader(VIEW_ACK, view)))
        if installed:  # the merge view of this view that overtook it, if any (see `_merger`)
            self.merger.install_early(now)

    # --- coordinating and suspicions ----------------------------------------------------

    def coordinates(self) -> bool:
        """True while this member installs views: the coordinator, leaving or not.

        A participant that is leaving never does, even when its coordinator is
        suspected: it is on its way out, the next member takes over.
        """
        return self.state == COORDINATOR or (self.state == LEAVING and self.leaver.was_coordinator)

    def merge_view_answer(self) -> View:
        """The view this member speaks for as a merge representative: the one it holds,
        less the members it suspects, with the same id (see `_merger`, JGRP-948). One
        suspected wrongly stays in that view and comes in with the next merge. Only
        while it holds a view."""
        view = self.view
        assert view is not None
        if not self._suspected & set(view.members):
            return view
        return View(view.view_id, [m for m in view.members if m not in self._suspected])

    @property
    def installing(self) -> bool:
        """True while a view is being installed (digest, VIEW_ACKs, JOIN_RSPs)."""
        return self.coordinator.installing

    def _suspect(self, members: tuple[Address, ...], now: float) -> None:
        if self.view is None or self.state in (CLIENT, LEFT):
            return
        fresh = [m for m in members if m in self.view and m != self.local_address]
        news = [m for m in fresh if m not in self._suspected]
        if news:  # FD_ALL3 repeats a suspicion at every check: say it once
            _log.warning("%s: suspects %s", self.local_address, _names(news))
        self._suspected.update(fresh)
        self.counters["suspects"] += len(fresh)
        if self.state == PARTICIPANT and self.view.coord in self._suspected:
            heir = next((m for m in self.view.members if m not in self._suspected), None)
            if heir == self.local_address:
                _log.warning("%s: coordinator %s suspected; taking over", heir, self.view.coord)
                self.counters["coordinator_takeovers"] += 1
                self.move(RoleInput.TAKEOVER)
                fresh = sorted(self._suspected)  # earlier suspects too: they left no request
        if self.coordinates():
            for member in fresh:
                self.coordinator.request(SUSPECT_REQ, member, now)
        self.merger.suspected(fresh, now)  # after the requests: the merge's end takes them up

    # --- the role, and the end of a leave ----------------------------------------------

    def move(self, event: RoleInput) -> None:
        """Change the role only through the table (`_roles.ROLES`)."""
        self.state = next_role(self.state, event)

    def finish_leave(self) -> None:
        """Out of the group: no view, no requests, no merge; the layers below stop too."""
        if self.state == LEFT:
            return
        if self.view is not None:
            _log.info("%s: left %r", self.local_address, self.cluster)
        self.move(RoleInput.LEFT_GROUP)
        self.view = None
        flushed = self.leaver.finish()
        self.joiner.stop()
        self.coordinator.forget()
        self.merger.forget()
        self.pass_down(Disconnect())
        self.pass_up(Disconnected(flushed))

    # --- what the parts ask of each other (`GmsContext`) --------------------------------

    @property
    def merging(self) -> bool:
        """True while a merge is under way here, as leader or participant."""
        return self.merger.busy

    def start_deferred_merge(self, now: float) -> None:
        """The view being installed is in: start the merge that waited for it, if any."""
        self.merger.start_deferred(now)

    def drop_merge_lead(self, now: float) -> None:
        """This member starts to leave: cancel the merge it leads, if any."""
        self.merger.drop_lead(now)

    def merge_after_join(self, now: float) -> None:
        """This joiner installed its first view: the merge view that came first, if any."""
        self.merger.install_early(now)

    def request(self, kind: int, member: Address, now: float) -> None:
        """Queue a JOIN_REQ, LEAVE_REQ or SUSPECT_REQ of ``member`` at the coordinator."""
        self.coordinator.request(kind, member, now)

    def resume_requests(self, now: float) -> None:
        """A merge ended: the coordinator installs what was queued meanwhile."""
        self.coordinator.resume_requests(now)

    def collect_acks(self, view: View, now: float) -> None:
        """A merge view was installed here: the next view waits for the members' acks."""
        self.coordinator.collect_acks(view, now)

    # --- messages ----------------------------------------------------------------------

    def up(self, batch: list[Message], now: float) -> None:
        if not carries(batch, _ID):  # no membership message: the batch goes as it is
            self.send_up(batch)
            return
        passed = []
        for msg in batch:
            hdr = msg.headers.get(_ID)
            if hdr is None:
                passed.append(msg)
            else:
                self._handle(msg, hdr, now)
        if passed:
            self.send_up(passed)

    def _handle(self, msg: Message, hdr: GmsHeader, now: float) -> None:
        key = f"received_{TYPE_NAMES.get(hdr.type, 'unknown')}"
        self.counters[key] = self.counters.get(key, 0) + 1
        kind = hdr.type
        if kind == JOIN_REQ and msg.src is not None:
            if self.state == COORDINATOR:
                self.coordinator.request(JOIN_REQ, msg.src, now)
            else:
                self.counters["join_requests_not_coordinator"] += 1
        elif kind == JOIN_RSP:
            self.joiner.join_response(hdr, now)
        elif kind == VIEW:
            self._view_message(msg, hdr, now)
        elif kind == VIEW_ACK:
            self.coordinator.view_ack(msg, hdr, now)
        elif kind == LEAVE_REQ and msg.src is not None:
            if self.coordinates():
                self.coordinator.request(LEAVE_REQ, msg.src, now)
        elif kind == LEAVE_RSP and self.state == LEAVING and not self.leaver.flushing:
            self.finish_leave()
        elif kind == MERGE_REQ:
            self.merger.request(msg, hdr, now)
        elif kind == MERGE_RSP:
            self.merger.response(msg, hdr, now)
        elif kind == INSTALL_MERGE_VIEW:
            self.merger.install(msg, hdr, now)
        elif kind == CANCEL_MERGE:
            self.merger.cancel(msg, hdr, now)

    # --- timers -------------------------------------------------------------------------

    def next_deadline(self) -> float:
        return min(
            self.joiner.next_deadline(),
            self.leaver.next_deadline(),
            self.merger.next_deadline(),
            self.coordinator.next_deadline(),
        )

    def tick(self, now: float) -> None:
        self.merger.tick(now)
        self.joiner.tick(now)
        self.coordinator.tick(now)
        self.leaver.tick(now)

    def gauges(self) -> dict[str, Any]:
        view = self.view
        return {
            "state": self.state.value,
            "view": str(view.view_id) if view else None,
            "view_id": view.view_id.id if view else None,
            "coord": str(view.coord) if view else None,
            "members": len(view) if view else 0,
            **self.coordinator.stats(),
            "suspected": sorted(map(str, self._suspected)),
            **self.leaver.gauges(),
        }

    def control(self, dest: Address | None, hdr: GmsHeader) -> Message:
        """A GMS control message (OOB, internal) to ``dest``."""
        return _control(dest, hdr)


def _control(dest: Address | None, hdr: GmsHeader) -> Message:
    return Message(dest, flags=_CONTROL, headers={_ID: hdr})


def _names(members: Iterable[Address]) -> str:
    return ", ".join(map(str, members))


def _log_view(me: Address | None, old: View | None, view: View) -> None:
    """One INFO line per installed view: its id, members, who joined and who went."""
    if not _log.isEnabledFor(logging.INFO):
        return
    what = "merge view" if isinstance(view, MergeView) else "view"
    changes = ""
    if old is not None:  # a member's first view is its join, logged as such
        joined = [m for m in view.members if m not in old]
        gone = [m for m in old.members if m not in view]
        for label, who in (("joined", joined), ("gone", gone)):
            if who:
                changes += f"; {label}: {_names(who)}"
    if isinstance(view, MergeView):
        changes += "; merged " + ", ".join(f"[{v.view_id}]" for v in view.subgroups)
    _log.info("%s: installed %s %s%s", me, what, View.__repr__(view), changes)
