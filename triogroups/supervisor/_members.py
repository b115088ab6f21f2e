"""A member of a process group across its incarnations, and the snapshot users see.

`MemberSlot` is the supervisor's book-keeping (written by `_supervisor` and `_group` only);
`MemberInfo` is the plain, frozen copy `ProcessGroup.members` hands out. The status lines a
member process prints (`_member`) are read into addresses and views here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from triogroups.actors import Restart
from triogroups.address import Address
from triogroups.supervisor._events import MemberView
from triogroups.supervisor._process import Incarnation
from triogroups.view import ViewId

__all__ = [
    "MemberInfo",
    "MemberSlot",
    "address_from_status",
    "default_name",
    "view_from_status",
]


def default_name(index: int) -> str:
    """A, B, ... Z, then M27, M28, ...: short names that read well in views and logs."""
    return chr(ord("A") + index) if index < 26 else f"M{index + 1}"


@dataclass(frozen=True)
class MemberInfo:
    """A snapshot of one member: its current incarnation, address and last view."""

    name: str
    state: str
    incarnation: int
    pid: int | None
    address: Address | None
    view: MemberView | None
    restarts: int
    returncode: int | None
    output: tuple[str, ...]


class MemberSlot:
    """Book-keeping for one member across its incarnations."""

    def __init__(self, name: str, index: int, restart: Restart, payload: bytes) -> None:
        self.name = name
        self.index = index
        self.restart = restart
        self.payload = payload
        self.state = "new"
        self.restarts = 0
        self.current: Incarnation | None = None
        self.address: Address | None = None
        self.view: MemberView | None = None

    def info(self) -> MemberInfo:
        inc = self.current
        return MemberInfo(
            name=self.name,
            state=self.state,
            incarnation=0 if inc is None else inc.number,
            pid=None if inc is None or inc.process is None else inc.pid,
            address=self.address,
            view=self.view,
            restarts=self.restarts,
            returncode=None if inc is None else inc.returncode,
            output=() if inc is None else tuple(inc.output),
        )


def address_from_status(pair: Sequence[str]) -> Address:
    """An address as a status line gives it: [uuid as 32 hex digits, name]."""
    return Address(int(pair[0], 16), pair[1])


def view_from_status(name: str, address: Address, event: dict[str, Any]) -> MemberView:
    """A ``view`` status line of member ``name`` (at ``address``) as a `MemberView`."""
    counter, coord_uuid, coord_name = event["id"]
    return MemberView(
        name,
        address,
        ViewId(int(counter), address_from_status([coord_uuid, coord_name])),
        tuple(address_from_status(pair) for pair in event["members"]),
    )
