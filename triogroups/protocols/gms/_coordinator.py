"""The coordinator's half of GMS: one view at a time for queued requests.

The coordinator queues JOIN, LEAVE and SUSPECT requests and installs one
new view for a batch of them (collected for ``max_bundling_time``): view ids
only grow. It takes a digest from the multicast layer for joiners
(`GetDigest`/`DigestReply`), multicasts VIEW, answers JOIN_RSP and
LEAVE_RSP, installs the view itself and waits for VIEW_ACK from every member
(at most ``view_ack_collection_timeout``) before the next batch, so views are
installed one at a time. Duplicate or late JOIN_RSPs are ignored; a joiner
that is already a member gets the current view again, with the digest the
multicast layer had when that view was installed (JGroups sends the digest as
it is now, and the joiner never delivers what was multicast in the view
before the answer: a `tcp` chaos run lost 231 messages that way at a joiner
whose first coordinator crashed after accepting it).

A view is sent only while it is newer than the view installed here, JGroups'
rule for installing one (``installView`` drops a view whose id is not above
the current one). JGroups takes the digest within the same call; ours comes
back as an event, and a view can be installed meanwhile: an INSTALL_MERGE_VIEW
from a leader that merged this coordinator's view (its digest came from
another member of it) is not refused while a view is being installed.
Campaign udp seed 41714: B, coordinator of [B|7], computed [B|8] (a joiner, two
suspects) and asked for the digest; C's merge view [C|8] of [C|3] and [B|7]
came in the same batch and was installed; then the digest came, and B sent
[B|8] and installed it after [C|8]. The view is dropped instead and its
requests go back to the queue, to be taken up against the view installed now,
or dropped if this member no longer coordinates (the joiners ask again, failure
detection suspects again).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from triogroups.address import Address
from triogroups.events import GetDigest, TmpView
from triogroups.message import Flag, Message
from triogroups.protocols import ids
from triogroups.protocols.gms._context import GmsContext
from triogroups.protocols.gms._header import (
    JOIN_REQ,
    JOIN_RSP,
    LEAVE_REQ,
    LEAVE_RSP,
    VIEW,
    GmsHeader,
)
from triogroups.view import Digest, View, ViewId

__all__ = ["SUSPECT_REQ", "Coordinator"]

SUSPECT_REQ = 100  # queue-only request kind (never on the wire)

_log = logging.getLogger("triogroups.protocols.gms")


class _Install:
    """A view the coordinator is installing.

    Phases, as in JGroups: wait for the joiners' digest; send VIEW to the
    existing members and wait for their acks; only then send JOIN_RSP to the
    joiners (so no member still in the old view receives a joiner's first
    multicasts) and wait for their acks.
    """

    def __init__(
        self,
        view: View,
        old_members: set[Address],
        joiners: list[Address],
        leavers: list[Address],
        requests: list[tuple[int, Address]] | None = None,
        base: ViewId | None = None,
    ) -> None:
        self.view = view
        self.base = base  # the view it was made from: its VIEW's ref_view_id
        self.old_members = old_members
        self.joiners = joiners
        self.leavers = leavers
        self.requests = requests or []  # the queued requests it answers
        self.digest: Digest | None = None
        self.awaiting_digest = False
        self.joiners_told = False
        self.acks: set[Address] = set()
        self.deadline = math.inf


class Coordinator:
    """Request queue of one GMS and the view it is installing, if any."""

    def __init__(self, gms: GmsContext) -> None:
        self.gms = gms
        self._requests: list[tuple[int, Address]] = []
        self._joiners: set[Address] = set()  # the distinct joiners in _requests
        self._bundle_deadline = math.inf
        self._pending: _Install | None = None

    @property
    def installing(self) -> bool:
        """True while a view is being installed (digest, VIEW_ACKs, JOIN_RSPs)."""
        return self._pending is not None

    def next_deadline(self) -> float:
        if self._pending is not None and not self._pending.awaiting_digest:
            return min(self._bundle_deadline, self._pending.deadline)
        return self._bundle_deadline

    def request(self, kind: int, member: Address, now: float) -> None:
        """Queue a JOIN_REQ, LEAVE_REQ or SUSPECT_REQ of ``member``.

        Limits against abuse (an addition beyond JGroups): a JOIN_REQ of a new
        joiner is dropped and counted when ``max_pending_joins`` distinct
        joiners are queued (``join_requests_dropped_pending``) or when the view
        and the queued joiners already make ``max_members``
        (``join_requests_dropped_max_members``); a member already in the view
        (a rejoin) takes no room. A dropped joiner retries (``join_timeout``)
        and gets in once there is room.
        """
        gms = self.gms
        view = gms.view if self._pending is None else self._pending.view
        if (
            kind == JOIN_REQ
            and member not in self._joiners
            and (view is None or member not in view)
        ):
            if len(self._joiners) >= gms.max_pending_joins:
                gms.counters["join_requests_dropped_pending"] += 1
                return
            if (len(view) if view is not None else 0) + len(self._joiners) >= gms.max_members:
                gms.counters["join_requests_dropped_max_members"] += 1
                return
            self._joiners.add(member)
        self._requests.append((kind, member))
        if self._bundle_deadline == math.inf:
            self._bundle_deadline = now + self.gms.max_bundling_time
        self._process(now)

    def collect_acks(self, view: View, now: float) -> None:
        """A merge view was installed here: the next view waits for the members' acks."""
        install = _Install(view, set(view.members), [], [])
        install.joiners_told = True
        install.acks = set(view.members) - {self.gms.local_address}
        install.deadline = now + self.gms.view_ack_collection_timeout
        self._pending = install
        if not install.acks:
            self._install_done(now)

    def resume_requests(self, now: float) -> None:
        """A merge ended: install what the requests queued meanwhile ask for."""
        if self._requests and self._bundle_deadline == math.inf:
            self._bundle_deadline = now
            self._process(now)

    def forget(self) -> None:
        """Drop the queue and any view being installed (this member left the group)."""
        self._pending = None
        self._requests = []
        self._joiners = set()
        self._bundle_deadline = math.inf

    def _process(self, now: float) -> None:
        """Start installing the next view if requests wait and no install is under way.

        Not during a merge: the requests wait and `resume_requests` takes them up.
        """
        gms = self.gms
        if self._pending is not None or now < self._bundle_deadline:
            return
        if gms.merging:
            self._bundle_deadline = math.inf
            return
        if not self._requests or not gms.coordinates() or gms.view is None:
            self._requests = []
            self._joiners = set()
            self._bundle_deadline = math.inf
            return
        batch, self._requests = self._requests, []
        self._joiners = set()
        self._bundle_deadline = math.inf
        current = gms.view
        gone = {m for kind, m in batch if kind != JOIN_REQ}
        leavers = list(dict.fromkeys(m for kind, m in batch if kind == LEAVE_REQ))
        joiners = list(dict.fromkeys(m for kind, m in batch if kind == JOIN_REQ and m not in gone))
        members = [m for m in current.members if m not in gone]
        members += [j for j in joiners if j not in current]
        if not members:
            gms.finish_leave()
            return
        if members == list(current.members):
            view = current  # only rejoins or unknown leavers: answer with the current view
        else:
            view = View(ViewId(current.view_id.id + 1, gms.local_address), members)  # type: ignore[arg-type]
        install = _Install(view, set(current.members), joiners, leavers, batch, current.view_id)
        self._pending = install
        if view is not current:
            _log.info(
                "%s: installing view [%s]%s",
                gms.local_address,
                view.view_id,
                _requests(
                    joiners,
                    leavers,
                    [m for kind, m in batch if kind == SUSPECT_REQ and m in current],
                ),
            )
        if joiners and gms.has_digest:
            install.awaiting_digest = True
            gms.pass_down(TmpView(view))  # TCP fans multicasts out to the joiners from here on
            # Only rejoins: they are in the view already, and everyone has multicast to them
            # since it was installed; their windows start at the digest of its installation.
            gms.pass_down(GetDigest(gms.name, view.view_id if view is current else None))
        else:
            self._send_view(install, None, now)

    def digest_ready(self, digest: Digest, now: float) -> None:
        """The joiners' digest arrived: the view can go out, if it is still newer than the
        view installed here (see the module docstring)."""
        install = self._pending
        if install is None or not install.awaiting_digest:
            return
        install.awaiting_digest = False
        current = self.gms.view
        if (
            current is not None
            and install.view is not current
            and install.view.view_id.id <= current.view_id.id
        ):
            self._drop(install, current, now)
            return
        self._send_view(install, digest, now)

    def _drop(self, install: _Install, current: View, now: float) -> None:
        """``current``, installed meanwhile, made ``install`` stale: its requests go back to
        the queue, before those that came since."""
        gms = self.gms
        gms.counters["stale_views_dropped"] += 1
        _log.info(
            "%s: view [%s] dropped: [%s] was installed meanwhile",
            gms.local_address,
            install.view.view_id,
            current.view_id,
        )
        self._pending = None
        self._requests = install.requests + self._requests
        self._joiners = {m for kind, m in self._requests if kind == JOIN_REQ and m not in current}
        self._next(now)

    def _send_view(self, install: _Install, digest: Digest | None, now: float) -> None:
        gms = self.gms
        view = install.view
        me = gms.local_address
        install.digest = digest
        new = view is not gms.view  # else only rejoins: no VIEW goes out, no ack comes back
        if new:
            gms.send_down_one(
                Message(
                    None,
                    flags=Flag.INTERNAL,
                    headers={ids.GMS: GmsHeader(VIEW, view, ref_view_id=install.base)},
                )
            )
        for leaver in install.leavers:
            gms.counters["leaves"] += 1
            if leaver != me:  # a leaving coordinator is done once the others acked the view
                gms.send_down_one(gms.control(leaver, GmsHeader(LEAVE_RSP)))
        if me in view and new:
            gms.install(view, now)
        install.acks = (
            {m for m in view.members if m in install.old_members} - {me} if new else set()
        )
        # A leaving coordinator stays until the others have the view (so it can
        # still be retransmitted), but no longer than leave_timeout.
        wait = gms.view_ack_collection_timeout if me in view else gms.leave_timeout
        install.deadline = now + wait
        if not install.acks:
            self._tell_joiners(install, now)

    def _tell_joiners(self, install: _Install, now: float) -> None:
        """Existing members have the view (or timed out): now send JOIN_RSPs."""
        gms = self.gms
        install.joiners_told = True
        for joiner in install.joiners:
            gms.counters["joins"] += 1
            rsp = GmsHeader(JOIN_RSP, install.view, install.digest)
            gms.send_down_one(gms.control(joiner, rsp))
        install.acks = {j for j in install.joiners if j in install.view}
        install.deadline = now + gms.view_ack_collection_timeout
        if not install.acks:
            self._install_done(now)

    def _acks_complete_or_late(self, install: _Install, now: float) -> None:
        if install.acks:
            self.gms.counters["view_acks_missing"] += len(install.acks)
        if install.joiners_told:
            self._install_done(now)
        else:
            self._tell_joiners(install, now)

    def view_ack(self, msg: Message, hdr: GmsHeader, now: float) -> None:
        """A member has the view being installed (acks for other views are ignored)."""
        install = self._pending
        if install is None or hdr.view is None or msg.src is None:
            return
        if hdr.view.view_id == install.view.view_id and msg.src in install.acks:
            install.acks.discard(msg.src)
            if not install.acks and not install.awaiting_digest:
                self._acks_complete_or_late(install, now)

    def _install_done(self, now: float) -> None:
        install = self._pending
        self._pending = None
        if install is not None and self.gms.local_address not in install.view:
            self.gms.finish_leave()
            return
        self._next(now)

    def _next(self, now: float) -> None:
        """No view is being installed: the merge that waited, else the queued requests."""
        self.gms.start_deferred_merge(now)  # queued requests then wait for the merge
        if self._requests:
            self._bundle_deadline = min(self._bundle_deadline, now)
            self._process(now)

    # --- timers ---------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        if self._pending is not None and now >= self._pending.deadline:
            self._acks_complete_or_late(self._pending, now)
        if now >= self._bundle_deadline:
            if self._pending is None:
                self._process(now)
            else:
                self._bundle_deadline = math.inf  # _install_done takes the queue up

    def stats(self) -> dict[str, Any]:
        return {
            "queued_requests": len(self._requests),
            "queued_joiners": len(self._joiners),
            "installing": str(self._pending.view.view_id) if self._pending else None,
        }


def _requests(joiners: list[Address], leavers: list[Address], suspects: list[Address]) -> str:
    """What a view is made of, for the log: "; joins: C; leaves: B; suspected: D"."""
    return "".join(
        f"; {label}: {', '.join(map(str, dict.fromkeys(who)))}"
        for label, who in (("joins", joiners), ("leaves", leavers), ("suspected", suspects))
        if who
    )
