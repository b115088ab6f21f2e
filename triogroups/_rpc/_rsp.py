"""The results of a group call: one `Rsp` per member, collected in an `RspList`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from triogroups._rpc._errors import RpcTimeout
from triogroups.address import Address

__all__ = ["Rsp", "RspList"]


class Rsp:
    """One member's answer: a value, an exception, or nothing (gone, or no answer in time).

    ``received`` is True once the member answered (a value or a raised
    exception); ``suspected`` is True when it left the view or was suspected
    first. `result` returns the value or raises what went wrong.
    """

    __slots__ = ("exception", "member", "received", "suspected", "value")

    def __init__(self, member: Address) -> None:
        self.member = member
        self.value: Any = None
        self.exception: BaseException | None = None
        self.received = False
        self.suspected = False

    @property
    def ok(self) -> bool:
        """True when the member answered with a value."""
        return self.received and self.exception is None

    def result(self) -> Any:
        """The value; raises the remote (or membership) exception, or RpcTimeout."""
        if self.exception is not None:
            raise self.exception
        if not self.received:
            raise RpcTimeout(f"no answer from {self.member}")
        return self.value

    def __repr__(self) -> str:
        if self.exception is not None:
            what = f"{type(self.exception).__name__}: {self.exception}"
        elif self.received:
            what = repr(self.value)
        else:
            what = "no answer"
        return f"<Rsp {self.member} {what}>"


class RspList(Mapping[Address, Rsp]):
    """Per target member its `Rsp`, in the order the targets were given.

    ``timed_out`` is True when the call's timeout ended the wait before the
    mode was satisfied.
    """

    def __init__(self, rsps: Mapping[Address, Rsp], arrivals: list[Address], timed_out: bool):
        self._rsps = dict(rsps)
        self._arrivals = list(arrivals)
        self.timed_out = timed_out

    def __getitem__(self, member: Address) -> Rsp:
        return self._rsps[member]

    def __iter__(self) -> Iterator[Address]:
        return iter(self._rsps)

    def __len__(self) -> int:
        return len(self._rsps)

    @property
    def received(self) -> list[Address]:
        """Members that answered, in arrival order."""
        return list(self._arrivals)

    @property
    def suspected(self) -> list[Address]:
        """Members that left or were suspected before answering."""
        return [m for m, r in self._rsps.items() if r.suspected]

    def first(self) -> Rsp | None:
        """The first answer that arrived, if any."""
        return self._rsps[self._arrivals[0]] if self._arrivals else None

    def results(self) -> dict[Address, Any]:
        """The values of the members that answered with one."""
        return {m: r.value for m, r in self._rsps.items() if r.ok}

    def errors(self) -> dict[Address, BaseException]:
        """Per member that failed (raised, left, or was suspected), its exception."""
        return {m: r.exception for m, r in self._rsps.items() if r.exception is not None}

    def __repr__(self) -> str:
        late = " timed out" if self.timed_out else ""
        return f"<RspList{late} {list(self._rsps.values())}>"
