"""STABLE: find out what every member has delivered, so NAKACK2 can purge it.

Sans-IO: it never awaits and never reads a clock; gossip is due at `tick`.

Every member sends its digest (highest delivered and received per sender,
taken from the multicast layer below with `GetDigest`) to the coordinator
as a STABLE_GOSSIP, every ``desired_avg_gossip`` on average (each interval
drawn uniformly from [0.5, 1.5] times it, so members do not gossip in step)
and also as soon as ``max_bytes`` of multicast payload have come up that
its last digest did not cover. A member's own multicasts sent with DONT_LOOPBACK never
come up, so their payload is counted on the way down (JGRP-2605): a member
that only sends those still gossips, and the round that frees its buffer
completes. ``desired_avg_gossip = 0`` turns the periodic gossip off (rounds
start only from ``max_bytes``); one of the two must be > 0, or nothing would
ever be purged. A STABILITY forgets only the bytes that the member's own
digest covered: what came up (or went down) after that digest was taken,
while the round ran, still counts towards the next round, so with the
periodic gossip off a burst that started a round mid-way is purged by the
next ``max_bytes`` too. Once the coordinator holds a digest from every member
of the current view it merges them (per sender: the minimum of the highest
delivered, the maximum of the highest received) and multicasts the result
as STABILITY. Every member passes it down as `StableDigest`: NAKACK2 purges
what is stable and asks for messages that someone received and it did not.

Decisions: gossip and STABILITY travel as OOB, NO_RELIABILITY messages (a
lost round is redone by the next one, and they take no seqnos, so a quiet
group purges down to nothing); collected digests are dropped on every view
change and after every round; messages for another view are ignored; a
member that left the group (`Disconnect` from GMS) gossips no more. The
interval jitter comes from an RNG seeded with the member's address, so a
simulated run repeats exactly.

While a merge is under way GMS suspends stability (`SuspendStable`, until
`ResumeStable` or its timeout, as JGroups' SUSPEND_STABLE): no gossip is
sent, no round completes and no STABILITY is applied, so nothing is purged
that the merge digest, taken at the start of the merge, says is still to be
received by the other subgroups.

A leaving member (an addition beyond JGroups, issue 37) waits until what it
multicast is stable (GMS's `FlushRequest`, passing down through STABLE), and
a round every ``desired_avg_gossip`` would keep it waiting for seconds. So
from the `FlushRequest` until the multicast layer answers `FlushDone` (or the
member leaves) its STABLE gossips every `FLUSH_GOSSIP_INTERVAL` (0.25 s) and
multicasts GOSSIP_NOW with it: every member of the view that gets it sends
its digest to the coordinator at once, so a round completes within about one
interval, repeated until one shows everyone delivered the leaver's last
multicast: until every layer below whose flush waits for stability (NAKACK2 or
MCAST, and SEQUENCER, whose leaver waits for its ordered messages to be stable)
answered. Members that do not know GOSSIP_NOW ignore it (counted).
"""

from __future__ import annotations

import math
import random
from types import ModuleType
from typing import Any, NamedTuple

from triogroups import _compiled
from triogroups.address import Address
from triogroups.events import (
    DigestReply,
    Disconnect,
    Event,
    FlushDone,
    FlushRequest,
    GetDigest,
    ResumeStable,
    StableDigest,
    SuspendStable,
)
from triogroups.message import Flag, Message
from triogroups.properties import Duration, PropertyError, Size, at_least
from triogroups.protocol import Passes, Protocol
from triogroups.protocols import ids
from triogroups.view import Digest, View, ViewId
from triogroups.wire import register_header

__all__ = [
    "FLUSH_GOSSIP_INTERVAL",
    "GOSSIP_NOW",
    "STABILITY",
    "STABLE_GOSSIP",
    "Stable",
    "StableHeader",
]

_ID = ids.STABLE
_CONTROL = int(Flag.OOB | Flag.INTERNAL | Flag.NO_RELIABILITY)
_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)

#: The byte counts of every batch that comes up, compiled or pure (`triogroups._compiled`).
UP_SCANS: ModuleType = _compiled.load("protocols._up_scans")
#: The send path's loops (`triogroups.protocols._down_loops`: `unlooped_bytes`) in the form
#: this process runs: compiled where the build made it.
DOWN_LOOPS: ModuleType = _compiled.load("protocols._down_loops")
_DIGEST_PROVIDERS = frozenset({"NAKACK2", "MCAST"})
#: The layers below whose leave flush waits for stability: the digest providers, and
#: SEQUENCER (its messages are its coordinator's multicasts, stable by the digests too)
_STABLE_FLUSHERS = _DIGEST_PROVIDERS | {"SEQUENCER"}

STABLE_GOSSIP = 1
STABILITY = 2
GOSSIP_NOW = 3  # a leaving member asks everyone for a digest now (the digest is empty)
#: Seconds between a leaving member's rounds (see the module docstring): a few per
#: NAKACK2 ``xmit_interval``, so a repaired tail is seen stable soon after.
FLUSH_GOSSIP_INTERVAL = 0.25

_COUNTERS = (
    "digest_requests",
    "gossip_sent",
    "gossip_received",
    "stability_rounds",
    "stability_received",
    "gossip_now_sent",
    "gossip_now_received",
    "max_bytes_reached",
    "ignored",
    "suspensions",
    "ignored_while_suspended",
)


class StableHeader(NamedTuple):
    """STABLE_GOSSIP (member -> coordinator), STABILITY (coordinator -> all) or
    GOSSIP_NOW (a leaving member -> all)."""

    type: int
    view_id: ViewId
    digest: Digest


register_header(_ID, StableHeader)


class Stable(Protocol):
    """Stability rounds for the multicast layer below (see the module docstring)."""

    name = "STABLE"
    COUNTERS = _COUNTERS
    passes_down: Passes | None = "unicasts"  # max_bytes counts multicasts sent
    id = _ID

    desired_avg_gossip = Duration(
        20.0,
        doc="average time between two digests a member sends (0: only max_bytes starts rounds)",
        check=at_least(0),
    )
    max_bytes = Size(
        2_000_000,
        doc="multicast bytes received that trigger a digest at once (0: only the timer)",
        check=at_least(0),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        _check_triggers(self.desired_avg_gossip, self.max_bytes)
        self._rng = random.Random(0)
        self._next_gossip = math.inf
        self._awaiting_digest = False
        self._bytes = 0  # multicast payload bytes since the last stability
        self._covered = 0  # of those, what our last gossiped digest covered
        self._votes: dict[Address, Digest] = {}
        self._last_stable: Digest | None = None
        self._suspended_until = -math.inf
        self._left = False
        self._flushing = False  # from a FlushRequest until the layers below flushed
        #: the layers below whose flush waits for stability (None before `check_stack`:
        #: the first digest provider's answer ends the flush), and those yet to answer
        self._flushers: frozenset[str] | None = None
        self._unflushed: set[str] = set()

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self._rng = random.Random(local_address.uuid)
        self._next_gossip = now + self._interval()

    def set_property(self, key: str, value: Any, now: float) -> None:
        if key in ("desired_avg_gossip", "max_bytes"):
            new = self._properties[key].validate(self.name, value)
            gossip = new if key == "desired_avg_gossip" else self.desired_avg_gossip
            _check_triggers(gossip, new if key == "max_bytes" else self.max_bytes)
        super().set_property(key, value, now)

    def property_changed(self, key: str, now: float) -> None:
        """A new ``desired_avg_gossip`` reschedules the gossip (unless the member left)."""
        if key == "desired_avg_gossip" and not self._left:
            self._next_gossip = now + self._interval()

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        if not any(p.name in _DIGEST_PROVIDERS for p in below):
            names = ", ".join(p.name for p in below) or "nothing"
            raise PropertyError(
                f"STABLE needs NAKACK2 or MCAST below it to take digests from, got {names}"
            )
        self._flushers = frozenset(p.name for p in below) & _STABLE_FLUSHERS

    def _interval(self) -> float:
        """Time to the next periodic gossip; infinite when it is off."""
        if not self.desired_avg_gossip:
            return math.inf
        return self.desired_avg_gossip * self._rng.uniform(0.5, 1.5)

    # --- gossip --------------------------------------------------------------------

    def next_deadline(self) -> float:
        return self._next_gossip

    def tick(self, now: float) -> None:
        if now < self._next_gossip:
            return
        if self._flushing:
            self._next_gossip = now + FLUSH_GOSSIP_INTERVAL
            self._ask_for_gossip()
        else:
            self._next_gossip = now + self._interval()
        if self.view is not None and now >= self._suspended_until:
            self._request_digest()

    def _ask_for_gossip(self) -> None:
        """GOSSIP_NOW to the others: each sends its digest to the coordinator at once."""
        view = self.view
        if view is None or len(view) < 2:
            return
        hdr = StableHeader(GOSSIP_NOW, view.view_id, Digest())
        flags = _CONTROL | _DONT_LOOPBACK
        self.send_down_one(Message(None, flags=flags, headers={_ID: hdr}))
        self.counters["gossip_now_sent"] += 1

    def _request_digest(self) -> None:
        self._awaiting_digest = True
        self.counters["digest_requests"] += 1
        self.pass_down(GetDigest(self.name))

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, SuspendStable):
            self.counters["suspensions"] += 1
            self._suspended_until = max(self._suspended_until, now + event.timeout)
            self._votes.clear()
            return
        if isinstance(event, ResumeStable):
            self._suspended_until = -math.inf
            return
        if isinstance(event, FlushRequest) and not self._left:
            self._flushing = True
            self._unflushed = set(self._flushers or ())
            self._next_gossip = now  # the first round starts at once
        if isinstance(event, Disconnect):
            self._flushing = False
            self._left = True
            self.view = None
            self._votes.clear()
            self._next_gossip = math.inf
        super().down_event(event, now)

    def up_event(self, event: Event, now: float) -> None:
        if isinstance(event, DigestReply) and event.requester == self.name:
            self._awaiting_digest = False
            if now >= self._suspended_until:
                self._gossip(event.digest)
        else:
            if isinstance(event, FlushDone) and self._flushing and not self._left:
                self._unflushed.discard(event.protocol)
                if self._flushers is None:
                    done = event.protocol in _DIGEST_PROVIDERS
                else:
                    done = not self._unflushed
                if done:
                    self._flushing = False
                    self._next_gossip = now + self._interval()
            super().up_event(event, now)

    def _gossip(self, digest: Digest) -> None:
        view, me = self.view, self.local_address
        if view is None or me not in view:
            return
        self._covered = self._bytes
        if view.coord == me:
            self._vote(me, digest, view)
            return
        hdr = StableHeader(STABLE_GOSSIP, view.view_id, digest)
        self.send_down_one(Message(view.coord, flags=_CONTROL, headers={_ID: hdr}))
        self.counters["gossip_sent"] += 1

    # --- the coordinator ------------------------------------------------------------

    def _vote(self, member: Address, digest: Digest, view: View) -> None:
        self._votes[member] = digest
        if any(m not in self._votes for m in view.members):
            return
        stable = _merge(view, [self._votes[m] for m in view.members])
        self._votes.clear()
        self.counters["stability_rounds"] += 1
        hdr = StableHeader(STABILITY, view.view_id, stable)
        flags = _CONTROL | _DONT_LOOPBACK
        self.send_down_one(Message(None, flags=flags, headers={_ID: hdr}))
        self._apply(stable)

    def _apply(self, stable: Digest) -> None:
        self._last_stable = stable
        self._bytes -= self._covered
        self._covered = 0
        self.pass_down(StableDigest(stable))

    # --- messages ----------------------------------------------------------------------

    def down(self, batch: list[Message], now: float) -> None:
        """Count our own DONT_LOOPBACK multicasts: they never come up (JGRP-2605)."""
        self.send_down(batch)
        if self.max_bytes:
            sent = DOWN_LOOPS.unlooped_bytes(batch, 0)
            if sent:
                self._bytes += sent
                self._check_bytes(now)

    @property
    def passes_up(self) -> Passes | None:
        """Unicasts add no bytes, so they change nothing unless max_bytes is reached and
        its digest request not yet sent (any handler call may send it: `_check_bytes`)."""
        return None if self._max_bytes_due() and not self._awaiting_digest else "unicasts"

    def up(self, batch: list[Message], now: float) -> None:
        received = UP_SCANS.multicast_bytes(batch, _ID)
        if received >= 0:  # the common batch first: data only, counted and passed as it is
            self._bytes += received
            self._check_bytes(now)
            self.send_up(batch)
            return
        out: list[Message] = []
        received = 0
        for msg in batch:
            hdr = msg.headers.get(_ID)
            if hdr is None:
                if msg.dest is None:
                    received += len(msg.payload)
                out.append(msg)
            elif now < self._suspended_until:
                self.counters["ignored_while_suspended"] += 1
            else:
                self._bytes += received  # in order: what came before a STABILITY counts first
                received = 0
                self._handle(msg, hdr)
        self._bytes += received
        self._check_bytes(now)
        if out:
            self.send_up(out)

    def _max_bytes_due(self) -> bool:
        """``max_bytes`` were received or sent that no digest we sent covered."""
        return bool(self.max_bytes) and self._bytes - self._covered >= self.max_bytes

    def _check_bytes(self, now: float) -> None:
        """``max_bytes`` that no digest we sent covered: send a digest now (one request
        at a time)."""
        if self._max_bytes_due() and not self._awaiting_digest and now >= self._suspended_until:
            self.counters["max_bytes_reached"] += 1
            self._request_digest()

    def _handle(self, msg: Message, hdr: StableHeader) -> None:
        view = self.view
        current = view is not None and hdr.view_id == view.view_id
        if hdr.type == STABLE_GOSSIP:
            self.counters["gossip_received"] += 1
            coord = current and view is not None and view.coord == self.local_address
            if coord and view is not None and msg.src is not None and msg.src in view:
                self._vote(msg.src, hdr.digest, view)
                return
        elif hdr.type == STABILITY:
            self.counters["stability_received"] += 1
            if current:
                self._apply(hdr.digest)
                return
        elif hdr.type == GOSSIP_NOW:
            self.counters["gossip_now_received"] += 1
            if current:
                if not self._awaiting_digest:  # else the digest on its way answers it
                    self._request_digest()
                return
        self.counters["ignored"] += 1

    def view_changed(self, view: View, now: float) -> None:
        super().view_changed(view, now)
        self._votes.clear()

    def gauges(self) -> dict[str, Any]:
        return {
            "votes": len(self._votes),
            "bytes_since_stability": self._bytes,
            "suspended_until": None if self._suspended_until < 0 else self._suspended_until,
            "next_gossip": self._next_gossip,
            "last_stable_digest": None if self._last_stable is None else repr(self._last_stable),
        }


def _check_triggers(desired_avg_gossip: float, max_bytes: int) -> None:
    """Something must start rounds: the timer, ``max_bytes``, or both."""
    if not desired_avg_gossip and not max_bytes:
        raise PropertyError(
            "STABLE.desired_avg_gossip and max_bytes cannot both be 0: no round would ever start"
        )


def _merge(view: View, digests: list[Digest]) -> Digest:
    """Per view member known to every digest: (min highest delivered, max highest received)."""
    entries: dict[Address, tuple[int, int]] = {}
    for member in view.members:
        rows = [d[member] for d in digests if member in d]
        if len(rows) == len(digests):
            entries[member] = (min(r[0] for r in rows), max(r[1] for r in rows))
    return Digest(entries)
