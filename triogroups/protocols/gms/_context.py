"""What GMS's helpers may read and call of the protocol: `GmsContext`, the whole list.

`Coordinator` (`_coordinator`), `Merger` (`_merger`), `Joiner` (`_joiner`) and
`Leaver` (`_leaver`) are typed against this `typing.Protocol`, not against
`Gms`, so they import nothing above them (no ``TYPE_CHECKING`` import of the
package that owns them, which closed an import circle) and a new reach into
the protocol shows up here. `Gms` implements it. Everything here is read-only
to a helper: the role changes only through `move` (the table in `_roles`),
the view only through `install` and `finish_leave`, and what one helper asks
of another goes through a method of `Gms` (``merging``, ``resume_requests``,
...), so each piece of state has one owner.
"""

from __future__ import annotations

from typing import Protocol

from triogroups.address import Address
from triogroups.events import Event, Merge
from triogroups.message import Message
from triogroups.protocols.gms._header import GmsHeader
from triogroups.protocols.gms._roles import Role, RoleInput
from triogroups.view import View

__all__ = ["GmsContext"]


class GmsContext(Protocol):
    """`Gms` as its helpers see it."""

    @property
    def name(self) -> str: ...

    @property
    def local_address(self) -> Address | None: ...

    @property
    def cluster(self) -> str: ...

    @property
    def view(self) -> View | None:
        """The installed view (`install` and `finish_leave` change it)."""
        ...

    @property
    def state(self) -> Role:
        """This member's role (`move` changes it)."""
        ...

    @property
    def counters(self) -> dict[str, int]: ...

    @property
    def has_digest(self) -> bool:
        """True if a multicast layer below (NAKACK2, MCAST) answers `GetDigest`."""
        ...

    @property
    def has_discovery(self) -> bool:
        """True if a discovery layer below (PING, TCPPING) answers `FindMembers`."""
        ...

    @property
    def installing(self) -> bool:
        """True while the coordinator installs a view (digest, VIEW_ACKs, JOIN_RSPs)."""
        ...

    @property
    def merging(self) -> bool:
        """True while a merge is under way here, as leader or participant."""
        ...

    # the properties (JGroups names) the helpers read
    @property
    def join_timeout(self) -> float: ...

    @property
    def max_join_attempts(self) -> int: ...

    @property
    def leave_timeout(self) -> float: ...

    @property
    def view_ack_collection_timeout(self) -> float: ...

    @property
    def max_bundling_time(self) -> float: ...

    @property
    def merge_timeout(self) -> float: ...

    @property
    def max_members(self) -> int: ...

    @property
    def max_pending_joins(self) -> int: ...

    def coordinates(self) -> bool:
        """True while this member installs views: the coordinator, leaving or not."""
        ...

    def merge_view_answer(self) -> View:
        """The view this member speaks for as a merge representative."""
        ...

    def move(self, event: RoleInput) -> None:
        """Change the role through the table (`_roles.ROLES`)."""
        ...

    def install(self, view: View, now: float) -> None:
        """Install ``view`` here: down to the layers below, up to the application."""
        ...

    def finish_leave(self) -> None:
        """Out of the group: no view, no requests, no merge; the layers below stop too."""
        ...

    def request(self, kind: int, member: Address, now: float) -> None:
        """Queue a JOIN_REQ, LEAVE_REQ or SUSPECT_REQ of ``member`` at the coordinator."""
        ...

    def resume_requests(self, now: float) -> None:
        """A merge ended: the coordinator installs what was queued meanwhile."""
        ...

    def collect_acks(self, view: View, now: float) -> None:
        """A merge view was installed here: the next view waits for the members' acks."""
        ...

    def start_merge(self, event: Merge, now: float) -> None:
        """Lead the merge MERGE3 asked for, if this member may."""
        ...

    def start_deferred_merge(self, now: float) -> None:
        """The view being installed is in: start the merge that waited for it, if any."""
        ...

    def drop_merge_lead(self, now: float) -> None:
        """This member starts to leave: cancel the merge it leads, if any."""
        ...

    def merge_after_join(self, now: float) -> None:
        """This joiner installed its first view: the merge view that came first, if any."""
        ...

    def control(self, dest: Address | None, hdr: GmsHeader) -> Message:
        """A GMS control message (OOB, internal) to ``dest`` (not sent)."""
        ...

    def send_down_one(self, msg: Message) -> None: ...

    def pass_down(self, event: Event) -> None: ...
