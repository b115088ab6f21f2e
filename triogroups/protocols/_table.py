"""SeqnoTable: a window of messages keyed by consecutive seqnos.

The one data structure every reliable protocol here needs (JGroups calls it
Table): a receiver adds messages as they arrive, in any order and possibly
twice, and removes the run that is ready for delivery; a sender keeps what
it sent until acked or stable and purges below that. It also answers which
seqnos are missing between the delivered and the highest received.

Positions, named as JGroups' Table names them (the one window vocabulary of
NAKACK2, UNICAST2 and UNICAST3; only MCAST says ``low`` and ``high``, as its
seed defines its window, in `RingBuffer`; stats keys keep the names they were
published under, and `reliable_stats` spells them out):
- ``hd`` (highest delivered; for a sender: highest acked or purged): every
  seqno <= hd is gone from the table;
- ``hr`` (highest received; for a sender: highest sent);
- stored seqnos lie in (hd, hr]; the gaps there are the missing ones.

Seqnos start at ``offset + 1``. Plain Python, no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

__all__ = ["SeqnoTable"]

T = TypeVar("T")


class SeqnoTable(Generic[T]):
    """Messages by seqno in (hd, hr]; see the module docstring."""

    __slots__ = ("_items", "hd", "hr")

    def __init__(self, offset: int = 0) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self.hd = offset
        self.hr = offset
        self._items: dict[int, T] = {}

    def add(self, seqno: int, item: T) -> bool:
        """Store ``item``; False if ``seqno`` was delivered or is stored already."""
        if seqno <= self.hd or seqno in self._items:
            return False
        self._items[seqno] = item
        if seqno > self.hr:
            self.hr = seqno
        return True

    def add_many(self, items: Iterable[tuple[int, T]]) -> int:
        """Add several; returns how many were new."""
        return sum(1 for seqno, item in items if self.add(seqno, item))

    def append_run(self, items: list[T]) -> int:
        """Store ``items`` at the seqnos after ``hr`` (a sender numbering what it
        sends); returns the first seqno used."""
        first = self.hr + 1
        if len(items) == 1:  # one request or answer: no zip, range and update for it
            self._items[first] = items[0]
            self.hr = first
            return first
        self._items.update(zip(range(first, first + len(items)), items, strict=True))
        self.hr += len(items)
        return first

    def deliver_next(self, seqno: int) -> bool:
        """Take ``seqno`` as delivered at once if it is the next one and nothing
        waits: what `add` then `remove_ready` would do, without storing it.

        The in-order arrival of a receiver; False changes nothing (use `add`).
        """
        if seqno != self.hd + 1 or self._items:
            return False
        self.hd = seqno
        if seqno > self.hr:
            self.hr = seqno
        return True

    def get(self, seqno: int) -> T | None:
        return self._items.get(seqno)

    def __contains__(self, seqno: object) -> bool:
        return seqno in self._items

    def remove_ready(self, limit: int = 0) -> list[T]:
        """Remove and return the consecutive run after ``hd`` (at most ``limit`` if > 0)."""
        out: list[T] = []
        items = self._items
        nxt = self.hd + 1
        while nxt in items:
            out.append(items.pop(nxt))
            nxt += 1
            if limit and len(out) >= limit:
                break
        self.hd = nxt - 1
        return out

    def has_ready(self) -> bool:
        return self.hd + 1 in self._items

    def purge(self, up_to: int) -> int:
        """Drop everything <= ``up_to`` (acked or stable); returns how many were dropped.

        ``hd`` moves to ``up_to`` (never backwards), and ``hr`` with it if it
        was lower: a purge past what was received skips those seqnos.
        """
        hd = self.hd
        if up_to <= hd:
            return 0
        items = self._items
        if len(items) == self.hr - hd:  # no gap (a sender's table): all of (hd, top] is here
            top = min(up_to, self.hr)
            for s in range(hd + 1, top + 1):
                del items[s]
            dropped = top - hd
        else:
            if len(items) < up_to - hd:
                drop = [s for s in items if s <= up_to]
            else:
                drop = [s for s in range(hd + 1, up_to + 1) if s in items]
            for s in drop:
                del items[s]
            dropped = len(drop)
        self.hd = up_to
        if self.hr < up_to:
            self.hr = up_to
        return dropped

    def missing(self, limit: int = 0) -> list[int]:
        """Seqnos in (hd, hr] not stored, lowest first (at most ``limit`` if > 0)."""
        if len(self._items) == self.hr - self.hd:
            return []
        out: list[int] = []
        items = self._items
        for s in range(self.hd + 1, self.hr + 1):
            if s not in items:
                out.append(s)
                if limit and len(out) >= limit:
                    break
        return out

    def lowest(self) -> int | None:
        """The lowest stored seqno, or None when empty."""
        if not self._items:
            return None
        s = self.hd + 1
        while s not in self._items:
            s += 1
        return s

    def items(self) -> Iterator[tuple[int, T]]:
        """Stored (seqno, item) pairs in seqno order."""
        for s in sorted(self._items):
            yield s, self._items[s]

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"SeqnoTable(hd={self.hd}, hr={self.hr}, size={len(self._items)})"
