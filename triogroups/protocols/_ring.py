"""RingBuffer: MCAST's fixed-capacity window of messages keyed by seqno.

The MCAST seed asks for a window that never grows: ``capacity`` slots, a
seqno stored at index ``seqno % capacity``. Positions, as the seed defines
them:

- on a sender, ``low`` is the highest seqno acked by every member (purged),
  ``high`` the highest seqno sent;
- on a receiver, ``low`` is the highest seqno delivered, ``high`` the highest
  received.

Stored seqnos lie in (low, high]. A seqno fits only if ``seqno - low <
capacity`` (the seed's rule: a sender blocks when ``S - low >= capacity``, a
receiver drops what lies outside ``[low, low + capacity)``), so at most
``capacity - 1`` messages are held and no two stored seqnos share a slot.

Plain Python, no clock, no I/O; never grows past ``capacity`` slots.
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["RingBuffer"]

T = TypeVar("T")


class RingBuffer(Generic[T]):
    """Messages by seqno in (low, high], in ``capacity`` fixed slots."""

    __slots__ = ("_size", "_slots", "capacity", "high", "low")

    def __init__(self, capacity: int, offset: int = 0) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be >= 2, got {capacity}")
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self.capacity = capacity
        self.low = offset
        self.high = offset
        self._slots: list[T | None] = [None] * capacity
        self._size = 0

    def fits(self, seqno: int) -> bool:
        """True if ``seqno`` is above ``low`` and inside the window."""
        return self.low < seqno and seqno - self.low < self.capacity

    def beyond(self, seqno: int) -> bool:
        """True if ``seqno`` lies past the window (``>= low + capacity``)."""
        return seqno - self.low >= self.capacity

    def expect(self, seqno: int) -> None:
        """Its sender sent ``seqno`` (which may lie past the window): every seqno below
        it was sent too, so ``high`` moves up to it, at most to the window's last slot,
        and `missing` names the empty slots up to there."""
        top = min(seqno, self.low + self.capacity - 1)
        if top > self.high:
            self.high = top

    def add(self, seqno: int, item: T) -> bool:
        """Store ``item``; False if ``seqno`` does not fit or is stored already."""
        if not self.fits(seqno):
            return False
        index = seqno % self.capacity
        if self._slots[index] is not None:
            return False
        self._slots[index] = item
        self._size += 1
        if seqno > self.high:
            self.high = seqno
        return True

    def deliver_next(self, seqno: int) -> bool:
        """Take ``seqno`` as delivered at once if it is the next one and nothing
        waits: what `add` then `remove_ready` would do, without storing it.

        The in-order arrival of a receiver; False changes nothing (use `add`).
        """
        if seqno != self.low + 1 or self._size:
            return False
        self.low = seqno
        if seqno > self.high:
            self.high = seqno
        return True

    def get(self, seqno: int) -> T | None:
        """The item stored for ``seqno``, or None."""
        if self.low < seqno <= self.high:
            return self._slots[seqno % self.capacity]
        return None

    def remove_ready(self) -> list[T]:
        """Remove and return the consecutive run after ``low``; ``low`` moves past it."""
        out: list[T] = []
        slots = self._slots
        capacity = self.capacity
        seqno = self.low + 1
        while seqno <= self.high:
            index = seqno % capacity
            item = slots[index]
            if item is None:
                break
            out.append(item)
            slots[index] = None
            seqno += 1
        self.low = seqno - 1
        self._size -= len(out)
        return out

    def purge(self, up_to: int) -> int:
        """Drop everything <= ``up_to``; returns how many were dropped.

        ``low`` moves to ``up_to`` (never backwards), and ``high`` with it if
        it was lower: a receiver told to start later (a join digest) skips
        those seqnos.
        """
        if up_to <= self.low:
            return 0
        dropped = 0
        if self._size:
            slots = self._slots
            capacity = self.capacity
            for seqno in range(self.low + 1, min(up_to, self.high) + 1):
                index = seqno % capacity
                if slots[index] is not None:
                    slots[index] = None
                    dropped += 1
        self._size -= dropped
        self.low = up_to
        if self.high < up_to:
            self.high = up_to
        return dropped

    def missing(self, limit: int = 0) -> list[int]:
        """Seqnos in (low, high] not stored, lowest first (at most ``limit`` if > 0)."""
        if self._size == self.high - self.low:
            return []
        out: list[int] = []
        slots = self._slots
        capacity = self.capacity
        for seqno in range(self.low + 1, self.high + 1):
            if slots[seqno % capacity] is None:
                out.append(seqno)
                if limit and len(out) >= limit:
                    break
        return out

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return (
            f"RingBuffer(capacity={self.capacity}, low={self.low}, high={self.high}, "
            f"size={self._size})"
        )
