"""GMS: group membership. Joins, leaves, suspicions and the views they make.

A joiner asks discovery who is there (`FindMembers`), sends JOIN_REQ to the
coordinator it found, and installs the view and digest from JOIN_RSP: first
`ViewChange`, then `SetDigest` (receive windows start where the group is),
then `BecomeServer` (queued multicasts are replayed). If nobody answers, or
only joiners answer (nobody is in a view yet) and this member sorts first, it
becomes the coordinator of a singleton view. When members of a view answer
but no coordinator does (its answer was lost, or it crashed and the next one
has not taken over yet), a group exists: discovery runs again, as JGroups
does, instead of starting a second group that only a merge would bring back;
each such run counts as a join attempt. JOIN_REQ is retried every ``join_timeout`` up to
``max_join_attempts`` times; after that the member starts alone (as JGroups
does) and merging brings the groups together.

Installing views for queued requests, one at a time, is in `_coordinator`;
the roles (client, participant, coordinator, leaving, left) change only
through the table in `_roles`.

Leaving flushes first (issue 37; stronger than JGroups, which needs FLUSH
for it): on `Disconnect` GMS sends `FlushRequest` down, and the member
stays in the group (retransmitting, answering XMIT requests, acking) until
each reliable layer below (NAKACK2 or MCAST, UNICAST3, and SEQUENCER) answers
`FlushDone`: what this member sent is stable at every member of the view.
Only then does it send LEAVE_REQ, or, as coordinator, install the view
without itself: the others drop its window with that view, so whatever they
lacked of it then would be lost for good. ``leave_timeout`` bounds the
flush; a flush that runs out counts in ``leaves_unflushed`` and logs at
WARNING who did not answer (each layer logs what was still unstable). The
LEAVE_REQ exchange that follows gets ``leave_timeout`` again. Without STABLE
below, NAKACK2 never learns that its multicasts are stable: GMS does not
wait for it. ``stats()`` says ``leave_flushed`` (None until the member
left) and `Disconnected` carries it up to the channel. Who coordinates is
read when the flush ends: a member that became coordinator while it flushed
hands over itself.

A coordinator that leaves installs a view without itself (the next member
coordinates) and stays until the others acked it (at most ``leave_timeout``):
it sends no LEAVE_RSP to itself, which used to end its leave after
``max_bundling_time``, before anyone had the view.

A participant that learns (from VERIFY_SUSPECT) that the coordinator is
suspected, and is the first unsuspected member, takes over and installs the
view without the suspects; one that is leaving never does.
Once a member has left (LEAVE_RSP, or ``leave_timeout``) it has no view, no
requests and no merge, and passes `Disconnect` down so the layers below stop
too.

Merging coexisting views (after MERGE3 passes `Merge` up) is in `_merger`;
while a merge is under way, queued requests wait for it.

Logging (logger ``triogroups.protocols.gms``, all parts of GMS): every view
installed, with who joined and who went, a member's own join and leave, the
coordinator admitting joiners and answering leaves, and merges at INFO;
suspicions, coordinator take-overs and a leave that timed out at WARNING.
Membership changes are rare, so this costs nothing on the message path.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from triogroups.address import Address
from triogroups.events import (
    BecomeServer,
    Connect,
    DigestReply,
    Disconnect,
    Disconnected,
    Event,
    FindMembers,
    FlushDone,
    FlushRequest,
    InjectView,
    MembersFound,
    Merge,
    SetDigest,
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
)
from triogroups.protocols.gms._merger import DIGEST_REQUESTER, Merger
from triogroups.protocols.gms._roles import Role, RoleInput, next_role
from triogroups.view import MergeView, View, ViewId

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
#: The layers that answer a `FlushRequest` with `FlushDone` (SEQUENCER: once what it
#: forwarded to the coordinator came back in the total order).
_FLUSHERS = frozenset({"NAKACK2", "MCAST", "UNICAST3", "SEQUENCER"})

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
        "merge_timeouts",
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
        self._join_attempts = 0
        self._join_deadline = math.inf
        self._leave_deadline = math.inf
        self._leaving_coordinator = False
        self._flushers: frozenset[str] = frozenset()
        #: Layers whose `FlushDone` a leaving member still waits for; None: not flushing.
        self._flush_waiting: set[str] | None = None
        self._leave_flushed: bool | None = None
        self._suspected: set[Address] = set()
        self.merger = Merger(self)
        self.coordinator = Coordinator(self)

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        self._has_discovery = any(p.name in _DISCOVERY for p in below)
        self.has_digest = any(p.name in _DIGEST_PROVIDERS for p in below)
        flushers = {p.name for p in below if p.name in _FLUSHERS}
        if not any(p.name == "STABLE" for p in below):
            flushers.discard("NAKACK2")  # nothing would ever tell it its multicasts are stable
        self._flushers = frozenset(flushers)

    # --- events ---------------------------------------------------------------------

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, Connect):
            self._connect(now)
        elif isinstance(event, Disconnect):
            self._disconnect(now)
        elif isinstance(event, InjectView):
            self._inject(event, now)
        else:
            super().down_event(event, now)

    def up_event(self, event: Event, now: float) -> None:
        if isinstance(event, MembersFound) and self.state == CLIENT:
            self._members_found(event, now)
        elif isinstance(event, DigestReply) and event.requester == self.name:
            self.coordinator.digest_ready(event.digest, now)
        elif isinstance(event, DigestReply) and event.requester == DIGEST_REQUESTER:
            self.merger.digest_ready(event.digest, now)
        elif isinstance(event, FlushDone):
            self._flush_answered(event.protocol, now)
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

    # --- joining ----------------------------------------------------------------------

    def _connect(self, now: float) -> None:
        if self.state != CLIENT:
            return
        self._join_attempts = 0
        self._discover(now)

    def _discover(self, now: float) -> None:
        if not self._has_discovery:
            self._become_singleton(now)
            return
        self.counters["discovery_runs"] += 1
        self._join_deadline = now + self.join_timeout * 2  # discovery answers within join_timeout
        self.pass_down(FindMembers(self.join_timeout))

    def _members_found(self, event: MembersFound, now: float) -> None:
        me = self.local_address
        coords = Counter(r.address for r in event.responses if r.is_coord and r.address != me)
        if self.max_join_attempts and self._join_attempts >= self.max_join_attempts:
            self.counters["join_attempts_exhausted"] += 1
            self._become_singleton(now)
        elif coords:
            target = coords.most_common(1)[0][0]
            self._join_attempts += 1
            self.counters["join_requests_sent"] += 1
            self.send_down_one(_control(target, GmsHeader(JOIN_REQ)))
            self._join_deadline = now + self.join_timeout
        elif any(r.is_server and r.address != me for r in event.responses):
            self.counters["discovery_without_coord"] += 1
            self._join_attempts += 1
            self._discover(now)
        else:
            others = [r.address for r in event.responses if r.address != me]
            assert me is not None
            if not others or min([me, *others]) == me:
                self._become_singleton(now)
            else:
                self._join_attempts += 1
                self._discover(now)

    def _become_singleton(self, now: float) -> None:
        me = self.local_address
        assert me is not None
        self._join_deadline = math.inf
        _log.info("%s: found no coordinator of %r; starting it as coordinator", me, self.cluster)
        self.install(View(ViewId(1, me), [me]), now)
        self.pass_down(BecomeServer())

    def _join_response(self, hdr: GmsHeader, now: float) -> None:
        if self.state != CLIENT or hdr.view is None or self.local_address not in hdr.view:
            self.counters["join_responses_ignored"] += 1
            return
        self._join_deadline = math.inf
        _log.info(
            "%s: joined %r (coordinator %s)", self.local_address, self.cluster, hdr.view.coord
        )
        self.install(hdr.view, now)
        if hdr.digest is not None:
            self.pass_down(SetDigest(hdr.digest))
        self.pass_down(BecomeServer())
        self.send_down_one(_control(hdr.view.view_id.coord, GmsHeader(VIEW_ACK, hdr.view)))
        self.merger.joined(now)

    # --- views ---------------------------------------------------------------------------

    def install(self, view: View, now: float) -> None:
        """Install ``view`` here: down to the layers below, up to the application."""
        _log_view(self.local_address, self.view, view)
        self.view = view
        self.counters["views_installed"] += 1
        self.merger.view_installed(view)
        self._suspected &= set(view.members)
        mine = view.coord == self.local_address
        self._move(RoleInput.VIEW_AS_COORD if mine else RoleInput.VIEW_AS_PARTICIPANT)
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
        joining = self.state == CLIENT
        if joining:
            self._join_deadline = math.inf
            self.install(view, now)
            if digest is not None:
                self.pass_down(SetDigest(digest))
            self.pass_down(BecomeServer())
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
        if self.view is None or view.view_id.id > self.view.view_id.id:
            self.install(view, now)
        else:
            self.counters["old_views_ignored"] += 1
        if msg.src is not None:
            self.send_down_one(_control(msg.src, GmsHeader(VIEW_ACK, view)))

    # --- coordinating and suspicions ----------------------------------------------------

    def coordinates(self) -> bool:
        """True while this member installs views: the coordinator, leaving or not.

        A participant that is leaving never does, even when its coordinator is
        suspected: it is on its way out, the next member takes over.
        """
        return self.state == COORDINATOR or (self.state == LEAVING and self._leaving_coordinator)

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
                self._move(RoleInput.TAKEOVER)
                fresh = sorted(self._suspected)  # earlier suspects too: they left no request
        if self.coordinates():
            for member in fresh:
                self.coordinator.request(SUSPECT_REQ, member, now)

    # --- leaving ---------------------------------------------------------------------

    def _disconnect(self, now: float) -> None:
        if self.state in (CLIENT, LEFT) or self.view is None:
            self.finish_leave()
            return
        if self.state == LEAVING:
            return  # on the way out already
        me = self.local_address
        assert me is not None
        self._leaving_coordinator = self.state == COORDINATOR
        _log.info("%s: leaving %r", me, self.cluster)
        self._move(RoleInput.DISCONNECT)
        self._leave_deadline = now + self.leave_timeout
        if self._flushers and len(self.view) > 1:
            self._flush_waiting = set(self._flushers)
            self.pass_down(FlushRequest())
        else:
            self._leave_now(True, now)

    def _flush_answered(self, protocol: str, now: float) -> None:
        """A layer below flushed; the last answer lets the leave go on."""
        waiting = self._flush_waiting
        if waiting is None or self.state != LEAVING:
            return
        waiting.discard(protocol)
        if not waiting:
            self._leave_now(True, now)

    def _leave_now(self, flushed: bool, now: float) -> None:
        """The flush is over (or timed out): LEAVE_REQ, or the view without us as coordinator.

        Who coordinates is taken from the view installed now: views may have
        come while the member flushed.
        """
        view, me = self.view, self.local_address
        assert view is not None and me is not None
        self._flush_waiting = None
        self._leave_flushed = flushed
        if not flushed:
            self.counters["leaves_unflushed"] += 1
        self._leaving_coordinator = view.coord == me
        if self._leaving_coordinator:
            # its install waits for VIEW_ACKs at most leave_timeout after bundling
            self._leave_deadline = now + self.max_bundling_time + self.leave_timeout
            self.coordinator.request(LEAVE_REQ, me, now)
        else:
            self._leave_deadline = now + self.leave_timeout
            self.send_down_one(_control(view.coord, GmsHeader(LEAVE_REQ)))

    def _move(self, event: RoleInput) -> None:
        """Change the role only through the table (`_roles.ROLES`)."""
        self.state = next_role(self.state, event)

    def finish_leave(self) -> None:
        """Out of the group: no view, no requests, no merge; the layers below stop too."""
        if self.state == LEFT:
            return
        if self.view is not None:
            _log.info("%s: left %r", self.local_address, self.cluster)
        self._move(RoleInput.LEFT_GROUP)
        self.view = None
        self._flush_waiting = None
        if self._leave_flushed is None:
            self._leave_flushed = True  # never in a view with others: nothing to flush
        self._leave_deadline = math.inf
        self._join_deadline = math.inf
        self.coordinator.forget()
        self.merger.forget()
        self.pass_down(Disconnect())
        self.pass_up(Disconnected(self._leave_flushed))

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
            self._join_response(hdr, now)
        elif kind == VIEW:
            self._view_message(msg, hdr, now)
        elif kind == VIEW_ACK:
            self.coordinator.view_ack(msg, hdr, now)
        elif kind == LEAVE_REQ and msg.src is not None:
            if self.coordinates():
                self.coordinator.request(LEAVE_REQ, msg.src, now)
        elif kind == LEAVE_RSP and self.state == LEAVING and self._flush_waiting is None:
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
            self._join_deadline,
            self._leave_deadline,
            self.merger.next_deadline(),
            self.coordinator.next_deadline(),
        )

    def tick(self, now: float) -> None:
        self.merger.tick(now)
        if self.state == CLIENT and now >= self._join_deadline:
            self.counters["join_timeouts"] += 1
            self._join_deadline = math.inf
            if self.max_join_attempts and self._join_attempts >= self.max_join_attempts:
                self.counters["join_attempts_exhausted"] += 1
                self._become_singleton(now)
            else:
                self._discover(now)
        self.coordinator.tick(now)
        if self._flush_waiting is not None and now >= self._leave_deadline:
            _log.warning(
                "%s: leaving %r unflushed: %s did not flush within leave_timeout %ss",
                self.local_address,
                self.cluster,
                ", ".join(sorted(self._flush_waiting)),
                self.leave_timeout,
            )
            self._leave_now(False, now)
        elif self.state == LEAVING and now >= self._leave_deadline:
            self.counters["leave_timeouts"] += 1
            _log.warning(
                "%s: left %r without an answer within leave_timeout %ss",
                self.local_address,
                self.cluster,
                self.leave_timeout,
            )
            self.finish_leave()

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
            "flushing": sorted(self._flush_waiting) if self._flush_waiting is not None else None,
            "leave_flushed": self._leave_flushed,
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
