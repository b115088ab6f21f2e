"""Events that travel through a stack beside message batches.

Items on the channels between layers are either a batch (a ``list`` of
`Message`) or one of these events; both travel in one channel per direction
so an event keeps its place relative to the messages around it (a view is
installed before the messages sent in it are handled).
"""

from __future__ import annotations

from dataclasses import dataclass

from triogroups.address import Address
from triogroups.message import Message
from triogroups.view import Digest, View, ViewId

__all__ = [
    "AddPhysicalAddress",
    "BecomeServer",
    "Connect",
    "DigestReply",
    "Disconnect",
    "Disconnected",
    "Event",
    "FindMembers",
    "FlushDone",
    "FlushRequest",
    "ForeignEndpoint",
    "GetDigest",
    "InjectView",
    "Item",
    "LocalPhysicalAddress",
    "MembersFound",
    "Merge",
    "MergeDigest",
    "PingData",
    "ResumeStable",
    "SetDigest",
    "SetPhysicalAddresses",
    "StableDigest",
    "Suspect",
    "SuspendStable",
    "TmpView",
    "Unsuspect",
    "ViewChange",
]


class Event:
    """Marker base class of stack events."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ViewChange(Event):
    """A new view is installed (goes down from GMS, then up to the application)."""

    view: View


@dataclass(frozen=True, slots=True)
class InjectView(Event):
    """Install ``view`` here as if the coordinator had sent it (goes down to GMS; tests).

    JGroups' ``injectView``: a test drives membership without a real join,
    leave or merge. GMS installs it only when this member is in it and its id
    is newer than the current view's (as for a VIEW from the coordinator) and
    sends no VIEW_ACK (nobody waits for one). ``digest`` is what a joiner or a
    merge would get with the view: a member without a view yet (a client)
    starts its receive windows from it (`SetDigest`) and becomes a server; with
    a `MergeView` it goes down as the `MergeDigest` of the other subgroups.
    """

    view: View
    digest: Digest | None = None


@dataclass(frozen=True, slots=True)
class SetDigest(Event):
    """A joiner's receive windows start from this digest (goes down to NAKACK2/MCAST)."""

    digest: Digest


@dataclass(frozen=True, slots=True)
class TmpView(Event):
    """The coordinator's next view, sent down before it takes the joiners' digest.

    Transports that fan a multicast out member by member (TCP) add the
    joiners to their fan-out list at once, so every multicast after the
    digest (the VIEW itself included) reaches them; otherwise a joiner's
    window would wait forever for seqnos it was never sent (JGroups'
    TMP_VIEW). MCAST keeps what it multicasts from here on until the joiners
    ack it (their digest starts here). Nothing installs it: only ViewChange does.
    """

    view: View


@dataclass(frozen=True, slots=True)
class GetDigest(Event):
    """Ask the multicast layer (going down) for its digest; answered by `DigestReply`.

    ``requester`` is the asking protocol's name (e.g. "STABLE", "GMS"); the
    reply carries it so only the asker consumes it. With ``view_id``, the
    digest as it was when this member installed that view, if it is the view
    installed now (else as it is now): what a coordinator gives a joiner that
    is already in the view, whose JOIN_RSP was lost, so that its windows start
    before what was multicast in that view since.
    """

    requester: str
    view_id: ViewId | None = None


@dataclass(frozen=True, slots=True)
class DigestReply(Event):
    """NAKACK2's or MCAST's digest (goes up) in answer to `GetDigest`."""

    requester: str
    digest: Digest


@dataclass(frozen=True, slots=True)
class StableDigest(Event):
    """What every member has delivered (goes down from STABLE): purge up to it."""

    digest: Digest


@dataclass(frozen=True, slots=True)
class SuspendStable(Event):
    """No stability rounds for ``timeout`` seconds, or until `ResumeStable` (goes down
    from GMS to STABLE while a merge is under way).

    The merge digest is taken when the merge starts; what members send after
    that must still be there to retransmit to the other subgroups once the
    merge view is installed, so nothing may be purged meanwhile (JGroups'
    SUSPEND_STABLE).
    """

    timeout: float


@dataclass(frozen=True, slots=True)
class ResumeStable(Event):
    """The merge ended: stability rounds go on (goes down from GMS to STABLE)."""


@dataclass(frozen=True, slots=True)
class MergeDigest(Event):
    """After a merge (goes down from GMS): windows for the members of the other subgroups.

    Unlike `SetDigest`, it never names a member of this member's own
    subgroup (those windows are in sync already): GMS leaves them out. A
    missing window is added, one behind the digest is moved forward.
    """

    digest: Digest


@dataclass(frozen=True, slots=True)
class Merge(Event):
    """MERGE3 found coexisting views and this member leads the merge (goes up to GMS).

    ``views`` are the different views; ``coords`` the member to ask for each
    view's state (its coordinator, or the first reachable member of it);
    ``holders``, if given, the members MERGE3 heard holding each view since its
    last check: alive, and still in that view, as the members whose digests a
    JGroups subgroup coordinator fetches for the merge are (JGRP-948).
    """

    views: tuple[View, ...]
    coords: tuple[Address, ...]
    holders: tuple[frozenset[Address], ...] = ()


@dataclass(frozen=True, slots=True)
class BecomeServer(Event):
    """The joiner's view is installed: queued multicasts may be delivered now."""


@dataclass(frozen=True, slots=True)
class Suspect(Event):
    """Failure detection suspects these members (goes up towards VERIFY_SUSPECT/GMS)."""

    members: tuple[Address, ...]


@dataclass(frozen=True, slots=True)
class Unsuspect(Event):
    """A suspected member showed signs of life."""

    member: Address


@dataclass(frozen=True, slots=True)
class Connect(Event):
    """Join the cluster (goes down from the channel to GMS)."""


@dataclass(frozen=True, slots=True)
class Disconnect(Event):
    """The member is leaving: GMS leaves the view, then layers flush and close connections."""


@dataclass(frozen=True, slots=True)
class Disconnected(Event):
    """GMS has left the group (goes up; the channel may close now).

    ``flushed``: every member of the last view had what this member sent before it
    left (see `FlushRequest`); False when ``leave_timeout`` ran out first.
    """

    flushed: bool = True


@dataclass(frozen=True, slots=True)
class FlushRequest(Event):
    """A leaving member's GMS asks the reliable layers below (going down) to flush.

    NAKACK2, MCAST and UNICAST3 each answer once with `FlushDone` going up, as
    soon as what this member sent is stable at the members of the current view
    (at once if nothing is pending), SEQUENCER once what it forwarded came back
    in the total order; until then they go on retransmitting,
    answering XMIT requests and announcing their highest seqno (tail loss).
    STABLE, which it passes on the way, runs stability rounds quickly until
    NAKACK2 answers. GMS sends LEAVE_REQ (or, as coordinator, installs the view
    without itself) once every answer is in, or ``leave_timeout`` ran out.
    """


@dataclass(frozen=True, slots=True)
class FlushDone(Event):
    """``protocol`` (NAKACK2, MCAST, UNICAST3 or SEQUENCER) has flushed (goes up to GMS): see
    `FlushRequest`."""

    protocol: str


@dataclass(frozen=True, slots=True)
class SetPhysicalAddresses(Event):
    """Physical addresses learned outside the stack (e.g. a Spark barrier's allGather).

    Goes down to discovery and the transport; entries are ``(ip, port)``.
    """

    addresses: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class PingData:
    """One member's answer to discovery: who it is, where, whether it coordinates, and
    whether it is in a view (a server) at all."""

    address: Address
    physical: tuple[str, int]
    is_coord: bool
    is_server: bool = False


@dataclass(frozen=True, slots=True)
class FindMembers(Event):
    """Ask discovery (going down) who is in the cluster; answered by `MembersFound` going up."""

    timeout: float


@dataclass(frozen=True, slots=True)
class MembersFound(Event):
    """Discovery's answer to `FindMembers` (goes up)."""

    responses: tuple[PingData, ...]


@dataclass(frozen=True, slots=True)
class AddPhysicalAddress(Event):
    """Discovery tells the transport where a member can be reached (goes down)."""

    address: Address
    physical: tuple[str, int]


@dataclass(frozen=True, slots=True)
class LocalPhysicalAddress(Event):
    """The transport announces the (ip, port) it listens on (goes up once bound)."""

    physical: tuple[str, int]


@dataclass(frozen=True, slots=True)
class ForeignEndpoint(Event):
    """The transport reached ``physical`` but found no member of this cluster there (goes
    up): another cluster or program listens on it; ``detail`` says what happened."""

    physical: tuple[str, int]
    detail: str


#: What one channel item between two layers is.
Item = list[Message] | Event
