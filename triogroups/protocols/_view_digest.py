"""The digest a multicast layer had when it installed its view: NAKACK2's and MCAST's answer
to a `GetDigest` that names the view.

GMS asks for it when a member already in the installed view asks to join again (its
JOIN_RSP was lost, or the coordinator that accepted it crashed before answering, and the
one that took over installed a view with it). A digest taken then would start the joiner's
windows after everything multicast in the view meanwhile, all of which was sent to it, so it
would never deliver those (found by a `tcp` chaos run: 231 multicasts of view 35 missing at
a joiner answered 2 s after the view; without retransmission nothing brought them back).
Started at the view, the joiner delivers them from its become_server_queue, or asks for them.

"When that view was installed" is where the view's VIEW multicast lies in the layer's
deliveries, not when the view reaches the layer: by then the windows may count multicasts
delivered after the VIEW, sent in the new view (found by campaign udp-mcast 40480: a member
paused across a VIEW received it and 11 of another member's multicasts of that view in one
batch, all in its windows before GMS installed the view, recorded them as delivered before the
view, and the rejoiner it answered never got them). So a layer that hands deliveries up in
batches tells `at_controls` about each batch: for the first control multicast (INTERNAL, as a
VIEW is) of each sender since the last view, the digest as it stands at that message, less
what follows it; `record` takes the one from the view's creator, who multicast its VIEW.
A view can also reach the layer before its own VIEW is delivered, from a queue replayed after
the view was recorded: a NAKACK2 joiner installs its first view from the JOIN_RSP and delivers
the VIEW from its become_server_queue when it becomes a server, and a member gets a merge
leader's VIEW from the multicasts kept until the merge view gives the leader a window. Taken
as the next view's VIEW, it would start a rejoiner of the next view before what was multicast
in the view between, which was never owed to it. So in a replay (``replayed``) the recorded
view's creator's first control multicast is passed over.
JGroups answers a rejoin with the digest as it is now (see GMS).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType

from triogroups import _compiled
from triogroups.address import Address
from triogroups.events import GetDigest
from triogroups.message import Flag, Message
from triogroups.view import Digest, ViewId

__all__ = ["Position", "ViewDigest", "lowered"]

_INTERNAL = int(Flag.INTERNAL)

#: The scan for a VIEW in each batch delivered, compiled or pure (`triogroups._compiled`).
UP_SCANS: ModuleType = _compiled.load("protocols._up_scans")

#: A delivered multicast's sender and seqno, None for what the layer did not number.
Position = Callable[[Message], "tuple[Address, int] | None"]


def lowered(digest: Digest, after: Sequence[Message], position: Position) -> Digest:
    """``digest`` with each sender's delivered seqno below its first message in ``after``
    (delivered after the point the digest is wanted for)."""
    entries = dict(digest.items())
    for msg in after:
        where = position(msg)
        if where is None or where[0] not in entries:
            continue
        sender, seqno = where
        delivered, received = entries[sender]
        if seqno <= delivered:
            entries[sender] = (seqno - 1, received)
    return Digest(entries)


class ViewDigest:
    """Holds the digest taken when the current view was installed (`record`) and answers
    `GetDigest` with it or with the digest now (`answer`)."""

    __slots__ = ("_at_control", "_digest", "_view_id")

    def __init__(self) -> None:
        self._view_id: ViewId | None = None
        self._digest: Digest | None = None
        #: Per sender: the digest at its first control multicast delivered since the last view.
        self._at_control: dict[Address, Digest] = {}

    def at_controls(
        self,
        deliver: list[Message],
        now: Callable[[], Digest],
        position: Position,
        *,
        replayed: bool = False,
    ) -> None:
        """``deliver`` goes up next, in order, and ``now()`` already counts all of it: keep
        the digest at each sender's first control multicast in it (see the module
        docstring). ``replayed``: ``deliver`` comes from a queue replayed once the view
        was recorded, whose creator's first control multicast in it is the view's own."""
        if not UP_SCANS.any_flagged(deliver, _INTERNAL):
            return  # the common case: no VIEW in the batch
        at_control = self._at_control
        late = self._view_id.coord if replayed and self._view_id is not None else None
        for i, msg in enumerate(deliver):
            if msg.flags & _INTERNAL:
                where = position(msg)
                if where is None:
                    continue
                if where[0] == late:
                    late = None  # the recorded view's own VIEW, delivered after it
                elif where[0] not in at_control:
                    at_control[where[0]] = lowered(now(), deliver[i + 1 :], position)

    def record(self, view_id: ViewId, digest: Digest) -> None:
        """The view ``view_id`` reached the layer just now, with ``digest`` as the windows
        stand; each entry is taken no higher than at the view's VIEW (`at_controls`, if the
        view's creator multicast it to us)."""
        at_view = self._at_control.get(view_id.coord)
        self._at_control.clear()
        if at_view is not None:
            digest = Digest(
                {
                    m: (min(d, at_view[m][0]), r) if m in at_view else (d, r)
                    for m, (d, r) in digest.items()
                }
            )
        self._view_id, self._digest = view_id, digest

    def answer(self, event: GetDigest, now: Callable[[], Digest]) -> Digest:
        """The digest at the view ``event`` names if that is the view recorded last, else
        ``now()``."""
        if event.view_id is not None and event.view_id == self._view_id:
            assert self._digest is not None
            return self._digest
        return now()

    def forget(self) -> None:
        """The member left the group: no view, nothing to answer from."""
        self._view_id = self._digest = None
        self._at_control.clear()
