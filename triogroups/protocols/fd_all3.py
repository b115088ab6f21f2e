"""FD_ALL3: failure detection by heartbeats, a bitmap of time slots per member.

Every member multicasts a HEARTBEAT every ``interval``, and any message
received from a member counts as a sign of life (the heartbeat only makes
sure there is one while the member is idle). As in JGroups, each tracked
member has a bitmap of ``ceil(timeout / interval)`` slots, all set at first.
Every ``interval`` the checker suspects each member whose slots are all
empty, then advances to the next slot and clears it; a message from a member
sets the current slot. Receiving therefore costs one bit-or (no clock read
per message), and a member silent since time t is suspected at the first
check in [t + timeout, t + timeout + interval): never before ``timeout``
(hence ceil), at most one interval late.

Suspects go up as one `Suspect(members)` per check, for VERIFY_SUSPECT to
double-check. The event is repeated at every check while a member stays
silent and in the view, so a suspicion that died with a crashed coordinator
reaches the next one. A suspected member that is heard from again goes up
as `Unsuspect`. `Unsuspect` coming down (VERIFY_SUSPECT got an answer)
clears the suspicion and fills the member's current slot.

Only the other members of the current view are tracked: a view change adds
new members with a full bitmap (a joiner gets a whole timeout) and forgets
those that left, so memory follows the view. Nothing runs while this member
is alone, nor once it left the group (`Disconnect` from GMS): its heartbeats
would keep the others from excluding it. Heartbeats carry NO_RELIABILITY |
OOB | INTERNAL, so reliability layers let them pass without seqnos and they
never reach the application, and DONT_LOOPBACK, since a member does not
watch itself.

Defaults: ``interval`` 1 s and ``timeout`` 5 s, not JGroups' 8 s / 40 s.
JGroups tunes for data centres where a JVM's garbage collection can stop a
member for tens of seconds. The users here run members on one host, on a
LAN or as Spark executors: a datagram takes well under a millisecond, and a
CPython member's long silences are a stalled process (an event loop blocked
by the application, a starved container). With the defaults a killed member
is suspected 5-6 s after its last message, VERIFY_SUSPECT (1 s) confirms
it, and GMS installs the view without it at about 6-7 s instead of 45 s; a
member whose event loop is blocked for more than about 6 s is excluded, so
an application that blocks its loop longer must raise ``timeout``. The cost
is one heartbeat per member per second (one datagram over UDP, one frame to
each member over TCP, bundled with other traffic). Both fit
the membership timers around them: GMS's join and view-ack timeouts (2 s)
are shorter than a suspicion, MERGE3's 1-10 s INFO rounds are alike.

Sans-IO: never awaits, never reads a clock; ``now`` is passed in.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from triogroups.address import Address
from triogroups.events import Disconnect, Event, Suspect, Unsuspect
from triogroups.message import Flag, Message
from triogroups.properties import Duration, PropertyError, positive
from triogroups.protocol import Protocol
from triogroups.protocols import ids
from triogroups.view import View
from triogroups.wire import register_header

__all__ = ["FdAll3", "HeartbeatHeader"]

_ID = ids.FD_ALL3
_HEARTBEAT_FLAGS = int(Flag.NO_RELIABILITY | Flag.OOB | Flag.INTERNAL | Flag.DONT_LOOPBACK)


class HeartbeatHeader(NamedTuple):
    """Marks a HEARTBEAT; empty, because the message's source says who is alive."""


register_header(_ID, HeartbeatHeader)


def _slots(interval: float, timeout: float) -> int:
    """Bitmap size: enough slots that nobody is suspected before ``timeout``."""
    return math.ceil(round(timeout / interval, 9))


def _check_times(interval: float, timeout: float) -> None:
    if interval >= timeout:
        raise PropertyError(f"FD_ALL3.interval must be < timeout ({timeout}), got {interval}")


class FdAll3(Protocol):
    """Heartbeat failure detector (see the module docstring)."""

    name = "FD_ALL3"
    COUNTERS = (
        "heartbeats_sent",
        "heartbeats_received",
        "suspect_events",
        "suspected",
        "unsuspects",
    )
    id = _ID

    interval = Duration(
        1.0,
        doc="how often a heartbeat is multicast and the slots are checked",
        check=positive,
    )
    timeout = Duration(
        5.0,
        doc="silence after which a member is suspected",
        check=positive,
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        _check_times(self.interval, self.timeout)
        self._num_slots = _slots(self.interval, self.timeout)
        self._bits: dict[Address, int] = {}
        self._slot = 0
        self._suspected: set[Address] = set()
        self._next_check = math.inf

    # --- configuration ---------------------------------------------------------------

    def set_property(self, key: str, value: Any, now: float) -> None:
        if key in ("interval", "timeout"):
            new = self._properties[key].validate(self.name, value)
            interval = new if key == "interval" else self.interval
            _check_times(interval, new if key == "timeout" else self.timeout)
        super().set_property(key, value, now)

    def property_changed(self, key: str, now: float) -> None:
        """New timings: everyone gets a fresh, full bitmap of the new size."""
        if key in ("interval", "timeout"):
            self._num_slots = _slots(self.interval, self.timeout)
            self._slot = 0
            full = (1 << self._num_slots) - 1
            self._bits = dict.fromkeys(self._bits, full)
            if self._bits:
                self._next_check = now + self.interval

    # --- membership ------------------------------------------------------------------

    def view_changed(self, view: View, now: float) -> None:
        super().view_changed(view, now)
        full = (1 << self._num_slots) - 1
        old = self._bits
        me = self.local_address
        self._bits = {m: old.get(m, full) for m in view.members if m != me}
        self._suspected &= self._bits.keys()
        if not self._bits:
            self._next_check = math.inf
        elif self._next_check == math.inf:
            self._send_heartbeat()
            self._next_check = now + self.interval

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, Disconnect):
            self.view = None
            self._bits = {}
            self._suspected = set()
            self._next_check = math.inf
        elif isinstance(event, Unsuspect):
            self._suspected.discard(event.member)
            if event.member in self._bits:
                self._bits[event.member] |= 1 << self._slot
        super().down_event(event, now)

    # --- messages --------------------------------------------------------------------

    def up(self, batch: list[Message], now: float) -> None:
        bits = self._bits
        suspected = self._suspected
        mark = 1 << self._slot
        heartbeats = 0
        last: Address | None = None  # a batch holds runs from one sender: mark each run once
        for msg in batch:
            src = msg.src
            if src is not last:
                last = src
                # two `Address.__hash__` calls (Python calls) per run, and none for the
                # suspects while there are none
                seen = None if src is None else bits.get(src)
                if src is not None and seen is not None:
                    bits[src] = seen | mark
                    if suspected and src in suspected:
                        self._unsuspect(src)
            if _ID in msg.headers:
                heartbeats += 1
        if heartbeats:
            self.counters["heartbeats_received"] += heartbeats
            batch = [m for m in batch if _ID not in m.headers]
        if batch:
            self.send_up(batch)

    def _unsuspect(self, member: Address) -> None:
        self._suspected.discard(member)
        self.counters["unsuspects"] += 1
        self.pass_up(Unsuspect(member))

    def _send_heartbeat(self) -> None:
        self.counters["heartbeats_sent"] += 1
        self.send_down_one(Message(None, flags=_HEARTBEAT_FLAGS, headers={_ID: HeartbeatHeader()}))

    # --- timer -----------------------------------------------------------------------

    def next_deadline(self) -> float:
        return self._next_check

    def tick(self, now: float) -> None:
        if now < self._next_check:
            return
        self._send_heartbeat()
        bits = self._bits
        suspects = tuple(m for m, b in bits.items() if not b)
        if suspects:
            self._suspected.update(suspects)
            self.counters["suspect_events"] += 1
            self.counters["suspected"] += len(suspects)
            self.pass_up(Suspect(suspects))
        self._slot = (self._slot + 1) % self._num_slots
        clear = ~(1 << self._slot)
        for member in bits:
            bits[member] &= clear
        self._next_check += self.interval
        if self._next_check <= now:  # the host was late: re-phase rather than catch up
            self._next_check = now + self.interval

    def gauges(self) -> dict[str, Any]:
        width = self._num_slots
        return {
            "members": len(self._bits),
            "slots": width,
            "suspected_members": sorted(map(str, self._suspected)),
            "bitmaps": {str(m): format(b, f"0{width}b") for m, b in self._bits.items()},
        }
