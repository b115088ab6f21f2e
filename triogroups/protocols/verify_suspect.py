"""VERIFY_SUSPECT: double-check a suspicion before membership acts on it.

A failure detector suspects on silence, and silence can be a lost burst or a
short partition. When `Suspect(members)` comes up from below, this layer
sends ARE_YOU_DEAD to each new suspect (a unicast, ``num_msgs`` times, each
in a datagram of its own so one loss does not take them all) and waits
``timeout``. A member that answers I_AM_NOT_DEAD, or from which any other
message arrives meanwhile (as in JGroups: a message is proof of life too),
is cleared: `Unsuspect` goes up (GMS forgets the suspicion) and down (the
failure detector refills the member's slots). `Unsuspect` from below clears
a pending verification as well. After ``timeout`` the members not cleared go
up in one `Suspect`, and GMS excludes them.

A member never suspects itself; a suspect already under verification is not
verified again (its deadline stands); members that leave the view are
dropped from verification. Verification messages carry OOB | INTERNAL |
NO_RELIABILITY: nobody retransmits a probe to a dead member, and the
application never sees them. ARE_YOU_DEAD is answered whoever asks, until
this member left the group (`Disconnect` from GMS): from then on it verifies
nobody and answers nobody, since to the group it is gone (a leave whose
view never got through must end in the others excluding it).

The default ``timeout`` is 1 s (JGroups 5 uses 1 s too): on loopback, a
LAN or between Spark executors an answer takes milliseconds, so a second is
ample for a live member, even one that is busy, and keeps a killed member's
exclusion at about FD_ALL3's ``timeout`` plus one interval plus this.

Sans-IO: never awaits, never reads a clock; ``now`` is passed in.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from triogroups.address import Address
from triogroups.events import Disconnect, Event, Suspect, Unsuspect
from triogroups.message import Flag, Message
from triogroups.properties import Duration, Int, at_least, positive
from triogroups.protocol import Passes, Protocol
from triogroups.protocols import ids
from triogroups.protocols._batch import carries
from triogroups.view import View
from triogroups.wire import register_header

__all__ = ["ARE_YOU_DEAD", "I_AM_NOT_DEAD", "VerifyHeader", "VerifySuspect"]

_ID = ids.VERIFY_SUSPECT
_CONTROL = int(Flag.OOB | Flag.INTERNAL | Flag.NO_RELIABILITY | Flag.DONT_BUNDLE)

ARE_YOU_DEAD = 1
I_AM_NOT_DEAD = 2


class VerifyHeader(NamedTuple):
    """ARE_YOU_DEAD or I_AM_NOT_DEAD; the message's source is the one asking or answering."""

    type: int


register_header(_ID, VerifyHeader)


class VerifySuspect(Protocol):
    """Verifies suspicions from below before passing them up (see the module docstring)."""

    name = "VERIFY_SUSPECT"
    COUNTERS = (
        "verifications",
        "confirmed",
        "cleared",
        "are_you_dead_sent",
        "i_am_not_dead_sent",
        "i_am_not_dead_received",
        "malformed",
    )
    id = _ID

    timeout = Duration(
        1.0,
        doc="how long a suspect has to answer ARE_YOU_DEAD before it goes up",
        check=positive,
    )
    num_msgs = Int(
        1,
        doc="ARE_YOU_DEAD messages sent to each suspect",
        check=at_least(1),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._pending: dict[Address, float] = {}
        self._left = False

    # --- events ----------------------------------------------------------------------

    def up_event(self, event: Event, now: float) -> None:
        if isinstance(event, Suspect):
            self._verify(event.members, now)
        elif isinstance(event, Unsuspect):
            if self._pending.pop(event.member, None) is not None:
                self.counters["cleared"] += 1
            self.pass_up(event)
        else:
            super().up_event(event, now)

    def view_changed(self, view: View, now: float) -> None:
        super().view_changed(view, now)
        self._pending = {m: d for m, d in self._pending.items() if m in view}

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, Disconnect):
            self.view = None
            self._pending = {}
            self._left = True
        super().down_event(event, now)

    def _verify(self, members: tuple[Address, ...], now: float) -> None:
        if self._left:
            return
        me = self.local_address
        for member in members:
            if member == me or member in self._pending:
                continue
            self.counters["verifications"] += 1
            self._pending[member] = now + self.timeout
            for _ in range(self.num_msgs):
                self._send(member, ARE_YOU_DEAD)

    def _send(self, dest: Address, kind: int) -> None:
        self.counters["are_you_dead_sent" if kind == ARE_YOU_DEAD else "i_am_not_dead_sent"] += 1
        self.send_down_one(Message(dest, flags=_CONTROL, headers={_ID: VerifyHeader(kind)}))

    def _clear(self, member: Address) -> None:
        """``member`` showed signs of life: stop verifying, tell GMS and the detector."""
        del self._pending[member]
        self.counters["cleared"] += 1
        self.pass_up(Unsuspect(member))
        self.pass_down(Unsuspect(member))

    # --- messages --------------------------------------------------------------------

    @property
    def passes_up(self) -> Passes | None:
        """With no suspect being checked, only its own messages are its business (while
        one is, any message from it clears the suspicion)."""
        return None if self._pending else "all"

    def up(self, batch: list[Message], now: float) -> None:
        if not self._pending and not carries(batch, _ID):  # nothing to verify, nothing to answer
            self.send_up(batch)
            return
        passed: list[Message] = []
        for msg in batch:
            src = msg.src
            if self._pending and src is not None and src in self._pending:
                self._clear(src)
            hdr = msg.headers.get(_ID)
            if hdr is None:
                passed.append(msg)
            elif hdr.type == ARE_YOU_DEAD and src is not None:
                if not self._left:
                    self._send(src, I_AM_NOT_DEAD)
            elif hdr.type == I_AM_NOT_DEAD:
                self.counters["i_am_not_dead_received"] += 1
            else:
                self.counters["malformed"] += 1
        if passed:
            self.send_up(passed)

    # --- timer -----------------------------------------------------------------------

    def next_deadline(self) -> float:
        return min(self._pending.values(), default=math.inf)

    def tick(self, now: float) -> None:
        expired = tuple(m for m, deadline in self._pending.items() if deadline <= now)
        if not expired:
            return
        for member in expired:
            del self._pending[member]
        self.counters["confirmed"] += len(expired)
        self.pass_up(Suspect(expired))

    def gauges(self) -> dict[str, Any]:
        return {"verifying": sorted(map(str, self._pending))}
