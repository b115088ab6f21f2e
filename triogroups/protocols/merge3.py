"""MERGE3: notices when partitions have healed and different views coexist.

Every member multicasts an INFO carrying its current view at a random
interval in [``min_interval``, ``max_interval``] (so a large group does not
send in lock step). Every ``check_interval`` each member looks at the views
it heard since the last check. If there is more than one, it picks one
representative per view: a member that still has that view, its coordinator
if that one does, else the first of its members that does (a coordinator
that has moved on to another view speaks for that one, not for the view it
left behind, or the members it left would never be merged). The merge
leader is the lowest of the representatives that coordinate the view they
represent, as in JGroups; if there is none, the lowest representative. If
that is this member, it passes `Merge` up: GMS then runs the merge as
leader. Only one member leads; the others see the same views and stay quiet.
`Merge` also names the members heard holding each view since the last check:
they are alive and still in it, so the leader may take them back even where
its own later views removed them (see GMS `_lineage`).

Every member checks, not only coordinators (JGRP-2092, MergeTest5): when
A holds (B,A,C), B holds (C,A,B) and C holds (A,B,C), no member coordinates
the view it holds, and a check run by coordinators only never starts a
merge. The leader there is a member that does not think it coordinates
anything; its merge view names it coordinator. A member presumes that its
own view's coordinator still holds that view unless it heard otherwise, so
a lost INFO from its coordinator does not make an ordinary member lead a
merge in the usual case (partitions, each with a coordinator).

The presumption covers one lost INFO, not a coordinator that is gone (issue
42, campaign udp-total-blocks 70194): one not heard for two checks in a row
and for more than two INFO intervals (``2 x max_interval``: a check interval
set below ``max_interval`` must not turn one lost INFO into silence) is taken
to be gone. The others, who never hear it either, do not presume it, so a
member that kept presuming a departed coordinator disagreed with all of them
about the leader: A, stranded in the view of D, which had left, computed D as
leader while every other member computed A, and no merge ever started.

INFO is sent with NO_RELIABILITY (and OOB): it must reach members of other
views, whose reliability layers would drop a multicast from a non-member.
Over a transport whose multicast reaches only the current view (TCP, see
`Transport.supports_multicasting`), members of other views would never hear
it, so, as JGroups does, MERGE3 runs a discovery (`FindMembers`) instead and
sends the INFO as a unicast to every member that answered.

A member that left the group (`Disconnect` coming down from GMS) forgets its
view and stops: an INFO with the view it left would make the others merge
it back in. For the same reason a view that removes members forgets the
INFOs they sent before it (issue 38): the last INFO of a member that left
gracefully made the next check start a merge with it, which timed out after
``merge_timeout`` while UNICAST3 resent the request to the departed member
for ``max_retransmit_time``. A member cut off by a partition loses nothing:
what it said before it was removed is what the view already superseded, and
its INFOs after the view are heard as before.

Choices the design leaves open: the INFO carries the whole view rather than
only its id (no extra round trip to learn a view's members, at the cost of a
larger INFO in large groups); the interval randomness comes from a generator
seeded by the member's address, so simulated runs repeat exactly.
"""

from __future__ import annotations

import math
import random
from typing import Any, NamedTuple

from triogroups.address import Address
from triogroups.events import Disconnect, Event, FindMembers, MembersFound, Merge
from triogroups.message import Flag, Message
from triogroups.properties import Duration, Int, at_least, positive
from triogroups.protocol import Passes, Protocol
from triogroups.protocols import ids
from triogroups.protocols._batch import carries
from triogroups.view import View
from triogroups.wire import register_header

__all__ = ["INFO", "Merge3", "Merge3Header", "merge_leader", "representatives"]

_ID = ids.MERGE3
INFO = 1
_INFO_FLAGS = int(Flag.NO_RELIABILITY | Flag.OOB | Flag.INTERNAL)


class Merge3Header(NamedTuple):
    type: int
    view: View | None


register_header(_ID, Merge3Header)


class Merge3(Protocol):
    """Detects coexisting views and asks GMS to merge them (see the module docstring)."""

    name = "MERGE3"
    COUNTERS = (
        "infos_sent",
        "infos_received",
        "checks_with_many_views",
        "merges_started",
        "malformed",
    )
    passes_up: Passes | None = "all"  # INFO is the only message MERGE3 reads
    id = _ID

    min_interval = Duration(
        1.0,
        doc="shortest time between INFOs",
        check=positive,
    )
    max_interval = Duration(
        10.0,
        doc="longest time between INFOs",
        check=positive,
    )
    check_interval = Duration(
        0.0,
        doc="time between checks for coexisting views (0: 1.6 x max_interval, as JGroups)",
        check=at_least(0),
    )
    max_participants_in_merge = Int(
        100,
        doc="most subgroups one merge takes in",
        check=at_least(2),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        if self.min_interval > self.max_interval:
            from triogroups.properties import PropertyError

            raise PropertyError(
                f"MERGE3.min_interval must be <= max_interval, got {self.min_interval} > "
                f"{self.max_interval}"
            )
        self._heard: dict[Address, View] = {}
        self._coord_silent = 0  # checks in a row that our view's coordinator was not heard
        self._coord_heard_at = -math.inf  # when its last INFO came (or our view did)
        self._next_info = math.inf
        self._next_check = math.inf
        self._rng = random.Random()
        self._multicasting = True
        self._finding = False

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        self._multicasting = getattr(below[0], "supports_multicasting", True) if below else True

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self._rng = random.Random(local_address.uuid)
        self._coord_heard_at = now
        self._next_info = now + self._interval()
        self._next_check = now + self._check_every()

    def _interval(self) -> float:
        return self._rng.uniform(self.min_interval, self.max_interval)

    def _check_every(self) -> float:
        return self.check_interval or self.max_interval * 1.6

    def up(self, batch: list[Message], now: float) -> None:
        if not carries(batch, _ID):  # INFO comes every few seconds: the batch goes as it is
            self.send_up(batch)
            return
        passed = []
        for msg in batch:
            hdr = msg.headers.get(_ID)
            if hdr is None:
                passed.append(msg)
            elif hdr.type == INFO and hdr.view is not None and msg.src is not None:
                self.counters["infos_received"] += 1
                self._heard[msg.src] = hdr.view
                if self.view is not None and msg.src == self.view.coord:
                    self._coord_heard_at = now
            else:  # an unknown type, or an INFO without a view: hostile input, counted
                self.counters["malformed"] += 1
        if passed:
            self.send_up(passed)

    def view_changed(self, view: View, now: float) -> None:
        """Forget what the members this view removed said before it (see the module)."""
        old = self.view
        super().view_changed(view, now)
        self._coord_silent = 0
        self._coord_heard_at = now
        if old is not None:
            for member in old.members:
                if member not in view:
                    self._heard.pop(member, None)

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, Disconnect):
            self.view = None
            self._heard = {}
            self._coord_silent = 0
            self._finding = False
            self._next_info = self._next_check = math.inf
        super().down_event(event, now)

    def up_event(self, event: Event, now: float) -> None:
        if isinstance(event, MembersFound) and self._finding:
            self._finding = False
            me = self.local_address
            for data in event.responses:
                if data.address != me:
                    self._send_info(data.address)
        super().up_event(event, now)

    def _send_info(self, dest: Address | None) -> None:
        if self.view is not None:
            self.counters["infos_sent"] += 1
            hdr = Merge3Header(INFO, self.view)
            self.send_down_one(Message(dest, flags=_INFO_FLAGS, headers={_ID: hdr}))

    def next_deadline(self) -> float:
        return min(self._next_info, self._next_check)

    def tick(self, now: float) -> None:
        if now >= self._next_info:
            self._next_info = now + self._interval()
            if self._multicasting:
                self._send_info(None)
            elif self.view is not None:
                self._finding = True
                self.pass_down(FindMembers(self.min_interval))
        if now >= self._next_check:
            self._next_check = now + self._check_every()
            self._check(now)

    def _check(self, now: float) -> None:
        heard, self._heard = self._heard, {}
        me = self.local_address
        if self.view is None or me is None:
            return
        coord_heard = self.view.coord in heard or self.view.coord == me
        self._coord_silent = 0 if coord_heard else self._coord_silent + 1
        heard[me] = self.view
        views = {v.view_id: v for v in heard.values()}
        if len(views) < 2:
            return
        self.counters["checks_with_many_views"] += 1
        chosen = sorted(views.values(), key=lambda v: v.view_id)
        chosen = chosen[: self.max_participants_in_merge]
        gone = self._coord_silent >= 2 and now - self._coord_heard_at > 2 * self.max_interval
        kept, reps = representatives(chosen, heard, me, presume_coord=not gone)
        leader = merge_leader(kept, reps)
        if leader == me:
            self.counters["merges_started"] += 1
            holders = tuple(
                frozenset(m for m, v in heard.items() if v.view_id == view.view_id) for view in kept
            )
            self.pass_up(Merge(tuple(kept), tuple(reps), holders))

    def gauges(self) -> dict[str, Any]:
        return {"views_heard": len({v.view_id for v in self._heard.values()})}


def representatives(
    views: list[View], heard: dict[Address, View], me: Address, *, presume_coord: bool = True
) -> tuple[list[View], list[Address]]:
    """One member per view that speaks for it, and the views that have one, in ``views`` order.

    A view is represented by its coordinator if that one holds it, else by its first member
    that does (``heard`` maps each member heard to the view it holds; ``me`` holds the view
    ``heard[me]``). Our own view's coordinator counts as holding it unless it was heard with
    another one: its INFO may just have been lost, and a member must not speak for its view
    (and perhaps lead a merge) merely because it missed its coordinator's INFO; unless
    ``presume_coord`` is false (the coordinator has been silent too long: it is gone, and
    presuming it would set us apart from the others, who do not). A member represents at
    most one view.
    """
    mine = heard[me]
    reps: list[Address] = []
    kept: list[View] = []
    for view in views:
        holders = {m for m, v in heard.items() if v.view_id == view.view_id}
        if presume_coord and view.view_id == mine.view_id and view.coord not in heard:
            holders.add(view.coord)
        rep = view.coord if view.coord in holders else None
        if rep is None:
            rep = next((m for m in view.members if m in holders), None)
        if rep is not None and rep not in reps:
            reps.append(rep)
            kept.append(view)
    return kept, reps


def merge_leader(views: list[View], reps: list[Address]) -> Address | None:
    """Who leads the merge of ``views`` (spoken for by ``reps``, pairwise): None if fewer
    than two.

    The lowest representative that coordinates the view it speaks for, as in JGroups (the
    usual case: partitions, each with its coordinator); if no view is spoken for by its
    coordinator (each member's view names another member as coordinator, JGRP-2092), the
    lowest representative. Every member that heard the same views computes the same leader.
    """
    if len(reps) < 2:
        return None
    coords = [rep for view, rep in zip(views, reps, strict=True) if rep == view.coord]
    return min(coords or reps)
