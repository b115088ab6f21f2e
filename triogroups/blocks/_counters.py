"""Named cluster-wide counters: `open_counter_service` and `Counter`.

The service's talking; the rules are in `_countertable`. In the manner of JGroups'
COUNTER: the coordinator keeps every counter and copies each update to
``num_backups`` members before it answers, so a counter keeps its value when the
coordinator crashes; the next coordinator rebuilds the counters from the copies.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from triogroups._channel import Channel
from triogroups.address import Address
from triogroups.blocks._countertable import (
    Caller,
    CounterCopy,
    CounterEntry,
    CounterReport,
    CounterTable,
    StaleUpdate,
    rebuild_counters,
)
from triogroups.blocks._service import RETRY, CoordinatedService, open_service
from triogroups.view import View

__all__ = ["Counter", "CounterService", "open_counter_service"]

_PREFIX = "triogroups.counters."
_services: weakref.WeakKeyDictionary[Channel, Any] = weakref.WeakKeyDictionary()
#: each channel's update seqnos, kept across the services opened on it one after another:
#: the coordinator refuses a seqno below the highest done_below it saw from the member
_seqnos: weakref.WeakKeyDictionary[Channel, Iterator[int]] = weakref.WeakKeyDictionary()


class CounterService(CoordinatedService):
    """Named counters shared by the members of a group (made by `open_counter_service`).

    ``counter(name)`` gives a `Counter`. Every operation is linearisable: it takes
    effect at one instant between its call and its return, as if on one integer,
    including across the coordinator's crash (an update the old coordinator made and
    copied is answered again, not applied twice). Any number of tasks may update at
    once. On a merge the merge leader's side
    wins (`rebuild_counters`). A member that leaves the view keeps its answers for
    twice ``timeout``, so one dropped and merged back that asks again for an update
    the kept side applied gets that update's answer instead of a second add.
    """

    def __init__(
        self,
        channel: Channel,
        *,
        num_backups: int = 1,
        rebuild_timeout: float = 5.0,
        timeout: float = 10.0,
    ) -> None:
        super().__init__(
            channel,
            _PREFIX,
            num_backups=num_backups,
            rebuild_timeout=rebuild_timeout,
            timeout=timeout,
        )
        # a caller asks again for one update for up to ``timeout`` (its own, the same
        # on every member): twice that covers a request still on its way
        self._keep_departed = 2 * timeout
        self._table = CounterTable(keep_departed=self._keep_departed)
        self._copy = CounterCopy()
        self._seqnos = _seqnos.setdefault(channel, itertools.count(1))
        self._in_flight: set[int] = set()  # seqnos of updates waiting for their answer

    def counter(self, name: str) -> Counter:
        """The counter ``name`` (a counter never set reads 0)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"counter name must be a non-empty str, got {name!r}")
        return Counter(self, name)

    def stats(self) -> dict[str, Any]:
        """A plain snapshot: the coordinator's counters (when it coordinates) and counts."""
        return {
            **self._stats(),
            "counters": len(self._table.counters) if self._coordinating else None,
            "copies": len(self._copy.entries),
        }

    # --- the caller's side ------------------------------------------------------

    async def _update(self, op: str, name: str, *args: int) -> Any:
        for value in args:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"counter values must be int, got {type(value).__name__}")
        seqno = next(self._seqnos)
        self._in_flight.add(seqno)
        try:
            caller = [self._channel.address.to_bytes(), seqno, min(self._in_flight)]
            answer = await self._ask(op, name, list(args), caller)
        finally:
            self._in_flight.discard(seqno)
        return answer[1]

    # --- the coordinator's side -------------------------------------------------

    async def _on_get(self, name: str) -> list[Any] | str:
        term = await self._serving()
        if term is None:
            return RETRY
        # a read waits for the copies of the updates before it, as an update does
        value = self._table.get(name)
        await self._replicate()
        return ["value", value] if self._still(term) else RETRY

    async def _on_update(
        self, op: str, name: str, args: list[int], raw_caller: list[Any]
    ) -> list[Any] | str:
        term = await self._serving()
        if term is None:
            return RETRY
        table = self._table
        table.expire(trio.current_time())
        caller = Caller(bytes(raw_caller[0]), int(raw_caller[1]), int(raw_caller[2]))
        if Address.from_bytes(caller.member) not in self._channel.view:
            # the table forgot the answers of a member that left the view, so a resent
            # update would be applied twice, and on a side of a split the caller is not on
            # (campaign udp-total-blocks seed 72152): it asks its own view's coordinator
            return RETRY
        try:
            if op == "set":
                table.set(name, args[0], caller)
                result: Any = None
            elif op == "add_and_get":
                result = table.add_and_get(name, args[0], caller)
            else:
                result = table.compare_and_set(name, args[0], args[1], caller)
        except StaleUpdate:
            # a resend whose caller gave up on it long ago (a caller still waiting has
            # no later update whose done_below passed it): nobody waits for this answer
            return RETRY
        await self._replicate()
        return ["value", result] if self._still(term) else RETRY

    async def _on_set(self, *args: Any) -> list[Any] | str:
        return await self._on_update("set", *args)

    async def _on_add_and_get(self, *args: Any) -> list[Any] | str:
        return await self._on_update("add_and_get", *args)

    async def _on_compare_and_set(self, *args: Any) -> list[Any] | str:
        return await self._on_update("compare_and_set", *args)

    def _methods(self) -> tuple[str, ...]:
        return ("get", "set", "add_and_get", "compare_and_set")

    def _view_installed(self, view: View, coordinating: bool) -> None:
        if coordinating:
            self._table.install_view(view.members, trio.current_time())

    def _report(self) -> list[Any]:
        entries = {e.name: e for e in self._copy.entries.values()}
        for entry in self._table.entries():  # a coordinator that stepped down (merge)
            have = entries.get(entry.name)
            if have is None or entry.version > have.version:
                entries[entry.name] = entry
        return [e.encode() for e in entries.values()]

    def _rebuild(self, view: View, reports: dict[Address, Any], side: list[Address] | None) -> None:
        decoded = {
            m: CounterReport(m, [CounterEntry.decode(e) for e in raw]) for m, raw in reports.items()
        }
        self._table = rebuild_counters(decoded, side, keep_departed=self._keep_departed)
        self._table.install_view(view.members, trio.current_time())

    def _full_copy(self) -> list[Any]:
        return [[e.encode() for e in self._table.entries()], self._table.version]

    def _apply_copy(self, copy: list[Any]) -> None:
        self._copy.replace([CounterEntry.decode(e) for e in copy[0]], int(copy[1]))

    def _take_changes(self) -> list[Any] | None:
        changes = self._table.take_outbox()
        return [e.encode() for e in changes] if changes else None

    def _apply_changes(self, changes: list[Any]) -> None:
        self._copy.apply(CounterEntry.decode(e) for e in changes)


class Counter:
    """One named counter (from `CounterService.counter`); every call asks the coordinator.

    Raises RpcTimeout when no coordinator answers within the service's ``timeout``.
    """

    def __init__(self, service: CounterService, name: str) -> None:
        self._service = service
        self.name = name

    async def get(self) -> int:
        """The current value."""
        answer = await self._service._ask("get", self.name)
        value: int = answer[1]
        return value

    async def set(self, value: int) -> None:
        """Set the value."""
        await self._service._update("set", self.name, value)

    async def add_and_get(self, delta: int) -> int:
        """Add ``delta`` and return the new value."""
        value: int = await self._service._update("add_and_get", self.name, delta)
        return value

    async def increment_and_get(self) -> int:
        """`add_and_get` of 1."""
        return await self.add_and_get(1)

    async def compare_and_set(self, expect: int, update: int) -> bool:
        """Set the value to ``update`` if it is ``expect``; True if it was set."""
        done: bool = await self._service._update("compare_and_set", self.name, expect, update)
        return done

    def __repr__(self) -> str:
        return f"<Counter {self.name!r}>"


@asynccontextmanager
async def open_counter_service(
    channel: Channel,
    *,
    num_backups: int = 1,
    rebuild_timeout: float = 5.0,
    timeout: float = 10.0,
) -> AsyncIterator[CounterService]:
    """Run the counter service on ``channel`` for the block; every member should.

    ``num_backups`` members after the coordinator keep a copy of every counter
    (JGroups' ``num_backups``; 0: the counters die with the coordinator).
    ``rebuild_timeout`` bounds how long a new coordinator waits for the members'
    copies; ``timeout`` each call and each copy to the backups, and twice it how
    long the coordinator keeps the answers of a member that left the view (give
    every member the same ``timeout``).
    """
    async with open_service(
        channel,
        lambda: CounterService(
            channel, num_backups=num_backups, rebuild_timeout=rebuild_timeout, timeout=timeout
        ),
        _services,
        "counter service",
    ) as service:
        yield service
