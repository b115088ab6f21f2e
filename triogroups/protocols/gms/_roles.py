"""GMS's roles as data: which role a member has, and what moves it to another.

A member starts as a CLIENT (joining), becomes the COORDINATOR or a
PARTICIPANT with each view it installs, may take over as coordinator when
the coordinator is suspected, goes LEAVING when it disconnects and is LEFT
once the leave is done (or it never joined). Every change goes through
`next_role`, over the table `ROLES` of (role, input) -> role, so "when does
a member coordinate?" has one answer, and the table is tested pair by pair.
Merging is not a role: a merge runs beside the role (`_merger`), and the
coordinator holds its queued requests meanwhile.
"""

from __future__ import annotations

import enum

__all__ = ["ROLES", "Role", "RoleInput", "next_role"]


class Role(enum.StrEnum):
    """A member's role in GMS; the value is what `Gms.stats` reports as ``state``."""

    CLIENT = "client"
    PARTICIPANT = "participant"
    COORDINATOR = "coordinator"
    LEAVING = "leaving"
    LEFT = "left"


class RoleInput(enum.Enum):
    """What changes a member's role."""

    #: A view installed in which this member coordinates (join, merge, its own view).
    VIEW_AS_COORD = "view_as_coord"
    #: A view installed in which another member coordinates.
    VIEW_AS_PARTICIPANT = "view_as_participant"
    #: The coordinator is suspected and this member is the first unsuspected one.
    TAKEOVER = "takeover"
    #: The application disconnects: leave the group.
    DISCONNECT = "disconnect"
    #: The leave is done (LEAVE_RSP or leave_timeout), or a client gave up joining.
    LEFT_GROUP = "left_group"


_C, _P, _K, _L, _X = (Role.CLIENT, Role.PARTICIPANT, Role.COORDINATOR, Role.LEAVING, Role.LEFT)
_VC, _VP, _T, _D, _G = (
    RoleInput.VIEW_AS_COORD,
    RoleInput.VIEW_AS_PARTICIPANT,
    RoleInput.TAKEOVER,
    RoleInput.DISCONNECT,
    RoleInput.LEFT_GROUP,
)

#: (role, input) -> next role, for every pair. A leaving member keeps leaving whatever view
#: arrives; LEFT is final; only a participant takes over; a client that disconnects has
#: nothing to leave (GMS finishes at once, LEFT_GROUP follows).
ROLES: dict[tuple[Role, RoleInput], Role] = {
    (_C, _VC): _K, (_C, _VP): _P, (_C, _T): _C, (_C, _D): _C, (_C, _G): _X,
    (_P, _VC): _K, (_P, _VP): _P, (_P, _T): _K, (_P, _D): _L, (_P, _G): _X,
    (_K, _VC): _K, (_K, _VP): _P, (_K, _T): _K, (_K, _D): _L, (_K, _G): _X,
    (_L, _VC): _L, (_L, _VP): _L, (_L, _T): _L, (_L, _D): _L, (_L, _G): _X,
    (_X, _VC): _X, (_X, _VP): _X, (_X, _T): _X, (_X, _D): _X, (_X, _G): _X,
}  # fmt: skip


def next_role(role: Role, event: RoleInput) -> Role:
    """The role after ``event`` (see `ROLES`)."""
    return ROLES[role, event]
