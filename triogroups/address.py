"""Member addresses: one per member incarnation.

An `Address` is a random 128-bit UUID plus a human-readable name. Equality,
hashing and ordering use only the UUID, so a restarted member (a new
incarnation) is a different address even when it keeps its name. The name
travels with the address on the wire so logs and views read well everywhere.
"""

from __future__ import annotations

import uuid as _uuid
from typing import Any

__all__ = ["Address"]


class Address:
    """A member incarnation: UUID identity plus a display name.

    Cheap to hash (the hash is computed once) and to compare (an int).
    Ordering by UUID gives every member the same order for the same set,
    which membership uses to agree on coordinators without talking.
    """

    __slots__ = ("_hash", "name", "uuid")

    uuid: int
    name: str
    _hash: int

    def __init__(self, uuid: int, name: str = "") -> None:
        if not isinstance(uuid, int) or isinstance(uuid, bool):
            raise TypeError(f"address uuid must be int, got {type(uuid).__name__}")
        if not 0 <= uuid < 1 << 128:
            raise ValueError(f"address uuid must fit in 128 bits, got {uuid}")
        if not isinstance(name, str):
            raise TypeError(f"address name must be str, got {type(name).__name__}")
        object.__setattr__(self, "uuid", uuid)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_hash", hash(uuid))

    @classmethod
    def random(cls, name: str = "") -> Address:
        """A fresh address for a new member incarnation."""
        return cls(_uuid.uuid4().int, name)

    def to_bytes(self) -> bytes:
        """The 16-byte UUID, as carried on the wire."""
        return self.uuid.to_bytes(16, "big")

    @classmethod
    def from_bytes(cls, raw: bytes, name: str = "") -> Address:
        """The address whose UUID is the 16 big-endian bytes ``raw`` (ValueError otherwise)."""
        if len(raw) != 16:
            raise ValueError(f"address uuid must be 16 bytes, got {len(raw)}")
        return cls(int.from_bytes(raw, "big"), name)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("address is immutable")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Address):
            return self.uuid == other.uuid
        return NotImplemented

    def __lt__(self, other: Address) -> bool:
        return self.uuid < other.uuid

    def __le__(self, other: Address) -> bool:
        return self.uuid <= other.uuid

    def __gt__(self, other: Address) -> bool:
        return self.uuid > other.uuid

    def __ge__(self, other: Address) -> bool:
        return self.uuid >= other.uuid

    def __reduce__(self) -> tuple[Any, ...]:
        return (Address, (self.uuid, self.name))

    def __repr__(self) -> str:
        return f"Address({self})"

    def __str__(self) -> str:
        return self.name or f"{self.uuid:032x}"[:8]
