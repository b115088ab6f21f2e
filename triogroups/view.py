"""Views and digests: who is in the group, and how far each member has got.

A `View` is the ordered member list the group agreed on; its `ViewId` is the
coordinator plus a counter that only grows. A `MergeView` is installed when
partitions heal and remembers the subgroups it merged. A `Digest` maps each
member to the highest seqno delivered and the highest received from it: a
joiner creates its receive windows from the digest handed over at join, and
STABLE computes what everyone has delivered from the digests members send.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

from triogroups.address import Address

__all__ = ["Digest", "MergeView", "View", "ViewId"]


class ViewId(NamedTuple):
    """Identifies a view: the coordinator that installed it and a counter.

    Ordered by counter first so "newer" is a plain comparison.
    """

    id: int
    coord: Address

    def __str__(self) -> str:
        return f"{self.coord}|{self.id}"


class View:
    """An installed membership: view id plus members in agreed order.

    The first member is the coordinator. Immutable.
    """

    __slots__ = ("_set", "members", "view_id")

    def __init__(self, view_id: ViewId, members: Iterable[Address]) -> None:
        self.view_id = view_id
        self.members: tuple[Address, ...] = tuple(members)
        if not self.members:
            raise ValueError("a view must have at least one member")
        self._set = frozenset(self.members)
        if len(self._set) != len(self.members):
            raise ValueError(f"view members must be unique, got {self.members}")

    @classmethod
    def create(cls, coord: Address, counter: int, members: Iterable[Address]) -> View:
        """The view ``[coord|counter]`` with ``members`` in order (the first is the coordinator)."""
        return cls(ViewId(counter, coord), members)

    @property
    def coord(self) -> Address:
        """The coordinator: the first member (it installs the next views)."""
        return self.members[0]

    def __contains__(self, member: object) -> bool:
        return member in self._set

    def __iter__(self) -> Iterator[Address]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, View):
            return self.view_id == other.view_id and self.members == other.members
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.view_id, self.members))

    def left_members(self, newer: View) -> list[Address]:
        """Members of this view that are not in ``newer``."""
        return [m for m in self.members if m not in newer]

    def new_members(self, older: View | None) -> list[Address]:
        """Members of this view that were not in ``older``."""
        if older is None:
            return list(self.members)
        return [m for m in self.members if m not in older]

    def __repr__(self) -> str:
        return f"[{self.view_id}] ({len(self.members)}) [{', '.join(map(str, self.members))}]"


class MergeView(View):
    """A view installed by a merge; ``subgroups`` are the views that were merged.

    Subgroups are kept as plain views (a subgroup that was itself a merge
    view loses its own subgroups), so repeated merges do not nest.
    """

    __slots__ = ("subgroups",)

    def __init__(
        self, view_id: ViewId, members: Iterable[Address], subgroups: Iterable[View]
    ) -> None:
        super().__init__(view_id, members)
        self.subgroups: tuple[View, ...] = tuple(
            View(v.view_id, v.members) if isinstance(v, MergeView) else v for v in subgroups
        )

    def __repr__(self) -> str:
        return f"MergeView{super().__repr__()} subgroups={list(self.subgroups)}"


class Digest(Mapping[Address, tuple[int, int]]):
    """Per member: (highest delivered, highest received) seqnos. Immutable."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[Address, tuple[int, int]] | None = None) -> None:
        clean: dict[Address, tuple[int, int]] = {}
        for member, (delivered, received) in (entries or {}).items():
            if delivered < 0 or received < delivered:
                raise ValueError(
                    f"digest entry for {member} needs 0 <= delivered <= received, "
                    f"got ({delivered}, {received})"
                )
            clean[member] = (delivered, received)
        self._entries = clean

    def __getitem__(self, member: Address) -> tuple[int, int]:
        return self._entries[member]

    def __iter__(self) -> Iterator[Address]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def highest_delivered(self, member: Address) -> int | None:
        """The highest seqno delivered from ``member``; None if the digest has no entry."""
        entry = self._entries.get(member)
        return None if entry is None else entry[0]

    def merge(self, other: Digest) -> Digest:
        """Entry-wise maximum of two digests (used when merging subgroups)."""
        merged = dict(self._entries)
        for member, (d, r) in other.items():
            if member in merged:
                od, orr = merged[member]
                merged[member] = (max(d, od), max(r, orr))
            else:
                merged[member] = (d, r)
        return Digest(merged)

    def minimum(self, other: Digest) -> Digest:
        """Entry-wise minimum over the members both know (STABLE's agreement)."""
        return Digest(
            {
                m: (min(d, other[m][0]), min(r, other[m][1]))
                for m, (d, r) in self.items()
                if m in other
            }
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Digest):
            return self._entries == other._entries
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._entries.items()))

    def __repr__(self) -> str:
        inner = ", ".join(f"{m}: {d}/{r}" for m, (d, r) in self._entries.items())
        return f"Digest({inner})"
