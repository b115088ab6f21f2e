"""The digest a multicast layer had when it installed its view: NAKACK2's and MCAST's answer
to a `GetDigest` that names the view.

GMS asks for it when a member already in the installed view asks to join again (its
JOIN_RSP was lost, or the coordinator that accepted it crashed before answering, and the
one that took over installed a view with it). A digest taken then would start the joiner's
windows after everything multicast in the view meanwhile, all of which was sent to it, so it
would never deliver those (found by a `tcp` chaos run: 231 multicasts of view 35 missing at
a joiner answered 2 s after the view; without retransmission nothing brought them back).
Started at the view, the joiner delivers them from its become_server_queue, or asks for them.
"""

from __future__ import annotations

from collections.abc import Callable

from triogroups.events import GetDigest
from triogroups.view import Digest, ViewId

__all__ = ["ViewDigest"]


class ViewDigest:
    """Holds the digest taken when the current view was installed (`record`) and answers
    `GetDigest` with it or with the digest now (`answer`)."""

    __slots__ = ("_digest", "_view_id")

    def __init__(self) -> None:
        self._view_id: ViewId | None = None
        self._digest: Digest | None = None

    def record(self, view_id: ViewId, digest: Digest) -> None:
        """The view ``view_id`` was installed just now, with ``digest`` as the windows stand."""
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
