"""The client side of GMS: discovery, JOIN_REQ and its retries, and the first view.

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

Owns the join attempts and the join deadline; the role, the view and the
merge that may have overtaken the JOIN_RSP belong to `Gms` (`GmsContext`).
"""

from __future__ import annotations

import logging
import math
from collections import Counter

from triogroups.events import BecomeServer, FindMembers, MembersFound, SetDigest
from triogroups.protocols.gms._context import GmsContext
from triogroups.protocols.gms._header import JOIN_REQ, VIEW_ACK, GmsHeader
from triogroups.protocols.gms._roles import Role
from triogroups.view import Digest, View, ViewId

__all__ = ["Joiner"]

_log = logging.getLogger("triogroups.protocols.gms")


class Joiner:
    """The join of one GMS, from `Connect` to its first view."""

    def __init__(self, gms: GmsContext) -> None:
        self.gms = gms
        self._attempts = 0
        self._deadline = math.inf

    def next_deadline(self) -> float:
        return self._deadline

    def stop(self) -> None:
        """No more join timeouts: the member has a view, or left."""
        self._deadline = math.inf

    def connect(self, now: float) -> None:
        """`Connect` came down to a client: join from the first attempt."""
        self._attempts = 0
        self._discover(now)

    def _discover(self, now: float) -> None:
        gms = self.gms
        if not gms.has_discovery:
            self._become_singleton(now)
            return
        gms.counters["discovery_runs"] += 1
        self._deadline = now + gms.join_timeout * 2  # discovery answers within join_timeout
        gms.pass_down(FindMembers(gms.join_timeout))

    def members_found(self, event: MembersFound, now: float) -> None:
        """Discovery answered: JOIN_REQ to the coordinator most named, discover again, or
        start alone (see the module docstring)."""
        gms = self.gms
        me = gms.local_address
        coords = Counter(r.address for r in event.responses if r.is_coord and r.address != me)
        if gms.max_join_attempts and self._attempts >= gms.max_join_attempts:
            gms.counters["join_attempts_exhausted"] += 1
            self._become_singleton(now)
        elif coords:
            target = coords.most_common(1)[0][0]
            self._attempts += 1
            gms.counters["join_requests_sent"] += 1
            gms.send_down_one(gms.control(target, GmsHeader(JOIN_REQ)))
            self._deadline = now + gms.join_timeout
        elif any(r.is_server and r.address != me for r in event.responses):
            gms.counters["discovery_without_coord"] += 1
            self._attempts += 1
            self._discover(now)
        else:
            others = [r.address for r in event.responses if r.address != me]
            assert me is not None
            if not others or min([me, *others]) == me:
                self._become_singleton(now)
            else:
                self._attempts += 1
                self._discover(now)

    def _become_singleton(self, now: float) -> None:
        gms = self.gms
        me = gms.local_address
        assert me is not None
        self._deadline = math.inf
        _log.info("%s: found no coordinator of %r; starting it as coordinator", me, gms.cluster)
        gms.install(View(ViewId(1, me), [me]), now)
        gms.pass_down(BecomeServer())

    def join_response(self, hdr: GmsHeader, now: float) -> None:
        """JOIN_RSP: install its view and digest, ack the view (a client only)."""
        gms = self.gms
        if gms.state != Role.CLIENT or hdr.view is None or gms.local_address not in hdr.view:
            gms.counters["join_responses_ignored"] += 1
            return
        self._deadline = math.inf
        _log.info("%s: joined %r (coordinator %s)", gms.local_address, gms.cluster, hdr.view.coord)
        gms.install(hdr.view, now)
        if hdr.digest is not None:
            gms.pass_down(SetDigest(hdr.digest))
        gms.pass_down(BecomeServer())
        gms.send_down_one(gms.control(hdr.view.view_id.coord, GmsHeader(VIEW_ACK, hdr.view)))
        gms.merge_after_join(now)

    def install_injected(self, view: View, digest: Digest | None, now: float) -> None:
        """Join through an injected view (`InjectView`), as JOIN_RSP would, without a
        VIEW_ACK."""
        gms = self.gms
        self._deadline = math.inf
        gms.install(view, now)
        if digest is not None:
            gms.pass_down(SetDigest(digest))
        gms.pass_down(BecomeServer())

    def tick(self, now: float) -> None:
        """No JOIN_RSP (or no discovery answer) within its time: try again, or start
        alone once ``max_join_attempts`` ran out."""
        gms = self.gms
        if gms.state == Role.CLIENT and now >= self._deadline:
            gms.counters["join_timeouts"] += 1
            self._deadline = math.inf
            if gms.max_join_attempts and self._attempts >= gms.max_join_attempts:
                gms.counters["join_attempts_exhausted"] += 1
                self._become_singleton(now)
            else:
                self._discover(now)
