"""The leave of GMS: the flush on `Disconnect`, then LEAVE_REQ or the view without us.

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

A member that starts to leave cancels a merge it leads (`Merger.drop_lead`):
as coordinator its LEAVE_REQ would otherwise wait behind the merge, longer
than the leave may take (campaign tcp seed 50444).

A coordinator that leaves installs a view without itself (the next member
coordinates) and stays until the others acked it (at most ``leave_timeout``):
it sends no LEAVE_RSP to itself, which used to end its leave after
``max_bundling_time``, before anyone had the view.

Owns the flush, the leave deadline and whether the member left as coordinator;
`Gms.finish_leave` (through `GmsContext`) ends the leave.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from triogroups.events import FlushRequest
from triogroups.protocols.gms._context import GmsContext
from triogroups.protocols.gms._header import LEAVE_REQ, GmsHeader
from triogroups.protocols.gms._roles import Role, RoleInput

__all__ = ["Leaver"]

_log = logging.getLogger("triogroups.protocols.gms")

#: The layers that answer a `FlushRequest` with `FlushDone` (SEQUENCER: once what it
#: forwarded to the coordinator came back in the total order).
_FLUSHERS = frozenset({"NAKACK2", "MCAST", "UNICAST3", "SEQUENCER"})


class Leaver:
    """The leave of one GMS, from `Disconnect` to `Gms.finish_leave`."""

    def __init__(self, gms: GmsContext) -> None:
        self.gms = gms
        self._deadline = math.inf
        self._was_coordinator = False
        self._flushers: frozenset[str] = frozenset()
        #: Layers whose `FlushDone` a leaving member still waits for; None: not flushing.
        self._waiting: set[str] | None = None
        self._flushed: bool | None = None

    def check_stack(self, below: list[str]) -> None:
        """Learn which of the layers ``below`` (their names) will flush."""
        flushers = {name for name in below if name in _FLUSHERS}
        if "STABLE" not in below:
            flushers.discard("NAKACK2")  # nothing would ever tell it its multicasts are stable
        self._flushers = frozenset(flushers)

    @property
    def was_coordinator(self) -> bool:
        """True if the member coordinated when it started to leave (or when its flush
        ended): it installs the view without itself."""
        return self._was_coordinator

    @property
    def flushing(self) -> bool:
        """True while the member waits for the layers below to flush."""
        return self._waiting is not None

    def next_deadline(self) -> float:
        return self._deadline

    def disconnect(self, now: float) -> None:
        """`Disconnect` came down: flush, then leave (see the module docstring)."""
        gms = self.gms
        view = gms.view
        if gms.state in (Role.CLIENT, Role.LEFT) or view is None:
            gms.finish_leave()
            return
        if gms.state == Role.LEAVING:
            return  # on the way out already
        me = gms.local_address
        assert me is not None
        self._was_coordinator = gms.state == Role.COORDINATOR
        _log.info("%s: leaving %r", me, gms.cluster)
        gms.move(RoleInput.DISCONNECT)
        self._deadline = now + gms.leave_timeout
        gms.drop_merge_lead(now)  # its own leave must not wait behind it (module docstring)
        if self._flushers and len(view) > 1:
            self._waiting = set(self._flushers)
            gms.pass_down(FlushRequest())
        else:
            self._leave_now(True, now)

    def flush_answered(self, protocol: str, now: float) -> None:
        """A layer below flushed; the last answer lets the leave go on."""
        waiting = self._waiting
        if waiting is None or self.gms.state != Role.LEAVING:
            return
        waiting.discard(protocol)
        if not waiting:
            self._leave_now(True, now)

    def _leave_now(self, flushed: bool, now: float) -> None:
        """The flush is over (or timed out): LEAVE_REQ, or the view without us as coordinator.

        Who coordinates is taken from the view installed now: views may have
        come while the member flushed.
        """
        gms = self.gms
        view, me = gms.view, gms.local_address
        assert view is not None and me is not None
        self._waiting = None
        self._flushed = flushed
        if not flushed:
            gms.counters["leaves_unflushed"] += 1
        self._was_coordinator = view.coord == me
        if self._was_coordinator:
            # its install waits for VIEW_ACKs at most leave_timeout after bundling
            self._deadline = now + gms.max_bundling_time + gms.leave_timeout
            gms.request(LEAVE_REQ, me, now)
        else:
            self._deadline = now + gms.leave_timeout
            gms.send_down_one(gms.control(view.coord, GmsHeader(LEAVE_REQ)))

    def finish(self) -> bool:
        """The member left: no more flush or deadline. Whether the leave was flushed."""
        self._waiting = None
        if self._flushed is None:
            self._flushed = True  # never in a view with others: nothing to flush
        self._deadline = math.inf
        return self._flushed

    def tick(self, now: float) -> None:
        """The flush ran out (leave unflushed), or LEAVE_RSP never came (leave anyway)."""
        gms = self.gms
        if self._waiting is not None and now >= self._deadline:
            _log.warning(
                "%s: leaving %r unflushed: %s did not flush within leave_timeout %ss",
                gms.local_address,
                gms.cluster,
                ", ".join(sorted(self._waiting)),
                gms.leave_timeout,
            )
            self._leave_now(False, now)
        elif gms.state == Role.LEAVING and now >= self._deadline:
            gms.counters["leave_timeouts"] += 1
            _log.warning(
                "%s: left %r without an answer within leave_timeout %ss",
                gms.local_address,
                gms.cluster,
                gms.leave_timeout,
            )
            gms.finish_leave()

    def gauges(self) -> dict[str, Any]:
        return {
            "flushing": sorted(self._waiting) if self._waiting is not None else None,
            "leave_flushed": self._flushed,
        }
