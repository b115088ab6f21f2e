"""Cluster-wide locks with fencing tokens: `open_lock_service` and `Lock`.

The service's talking (requests to the coordinator, waiting grants, telling owners);
the rules are in `_locktable` (the coordinator's table) and `_quorum` (majority
mode). In the manner of JGroups' CENTRAL_LOCK: the coordinator grants in arrival
order and copies every change to ``num_backups`` members; beyond it, a grant carries a
fencing token that only grows, and ``majority=True`` grants only in a view that holds
a majority of the last full view.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import trio

from triogroups._channel import Channel
from triogroups._errors import ChannelClosed
from triogroups._rpc import RpcTimeout
from triogroups.address import Address
from triogroups.blocks._locktable import (
    TOKEN_GAP,
    Entry,
    Grant,
    LockCopy,
    LockReport,
    LockTable,
    Owner,
    rebuild_locks,
    refuse_grant,
    token_view,
)
from triogroups.blocks._quorum import Quorum
from triogroups.blocks._service import (
    RETRY,
    RETRY_INTERVAL,
    CoordinatedService,
    open_service,
)
from triogroups.view import View

__all__ = ["Lock", "LockService", "open_lock_service"]

_log = logging.getLogger("triogroups.blocks")
_PREFIX = "triogroups.locks."
_services: weakref.WeakKeyDictionary[Channel, Any] = weakref.WeakKeyDictionary()
#: token_gap stays below this so that a rebuilt table's first token is of its own view
#: (a token's view id is its top bits: `token_view`), and owners do not refuse it
_MAX_TOKEN_GAP = 2**31


class LockService(CoordinatedService):
    """Named locks for the members of a group (made by `open_lock_service`).

    ``lock(name)`` gives a `Lock`; ``async with locks.lock("name") as held:`` waits for
    it, and ``held.token`` is its fencing token. Every member of the group must run
    the service (with the same ``majority``) to take part.
    """

    def __init__(
        self,
        channel: Channel,
        *,
        majority: bool = False,
        num_backups: int = 1,
        token_gap: int = TOKEN_GAP,
        rebuild_timeout: float = 5.0,
        timeout: float = 10.0,
    ) -> None:
        if (
            isinstance(token_gap, bool)
            or not isinstance(token_gap, int)
            or not 1 <= token_gap < _MAX_TOKEN_GAP
        ):
            raise ValueError(f"token_gap must be an int from 1 to 2**31 - 1, got {token_gap!r}")
        super().__init__(
            channel,
            _PREFIX,
            num_backups=num_backups,
            rebuild_timeout=rebuild_timeout,
            timeout=timeout,
        )
        self.majority = majority
        self.token_gap = token_gap
        self._table = LockTable()
        self._copy = LockCopy()
        self._quorum = Quorum()
        self._waiters: dict[tuple[str, Owner], trio.Event] = {}
        # this member's side: what its tasks hold and wait for
        self._tasks: weakref.WeakKeyDictionary[trio.lowlevel.Task, int] = (
            weakref.WeakKeyDictionary()
        )
        self._task_numbers = itertools.count(1)
        self._held: dict[str, Grant] = {}
        self._handles: dict[tuple[str, Owner], Lock] = {}
        self._max_token = 0
        self._seen: dict[str, int] = {}  # per lock, the largest token granted here
        self._counters["refused_grants"] = 0

    def lock(self, name: str) -> Lock:
        """The lock ``name`` (nothing is asked yet): use it in ``async with``, or
        `Lock.acquire` / `Lock.try_lock` and `Lock.release`."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"lock name must be a non-empty str, got {name!r}")
        return Lock(self, name)

    def stats(self) -> dict[str, Any]:
        """A plain snapshot: the coordinator's part (locks held, waiters, last token)
        when this member coordinates, and what this member's tasks hold."""
        return {
            **self._stats(),
            "majority": self.majority,
            "has_majority": self._quorum.has_majority,
            "locks_held": len(self._table.holders) if self._coordinating else None,
            "waiting": sum(len(q) for q in self._table.waiting.values())
            if self._coordinating
            else None,
            "max_token": max(self._max_token, self._table.max_token),
            "held_here": sorted(self._held),
        }

    # --- the owner's side -------------------------------------------------------

    def _owner(self) -> Owner:
        task = trio.lowlevel.current_task()
        number = self._tasks.get(task)
        if number is None:
            number = self._tasks[task] = next(self._task_numbers)
        return Owner(self._channel.address, number)

    async def _acquire(self, handle: Lock, timeout: float | None) -> bool:
        """Ask for ``handle``'s lock for this task; ``timeout`` None: only if free now.

        A grant that reaches this member after a view that took it away (`refuse_grant`:
        majority mode in a minority view, a table rebuilt since the request, a larger
        token seen for the lock, a grant made in another view than this member's) is not
        held: it is released, and asked for again while time is left."""
        name = handle.name
        owner = self._owner()
        held = self._held.get(name)
        if held is not None and held.owner == owner:
            raise RuntimeError(f"lock {name!r} is held by this task already (not reentrant)")
        deadline = None if timeout is None else trio.current_time() + timeout
        while True:
            left = None if deadline is None else max(deadline - trio.current_time(), 0.0)
            try:
                answer, reports = await self._ask_reported(
                    "acquire", name, owner.encode(), timeout is not None, timeout=left
                )
            except RpcTimeout:
                answer, reports = None, self._reports
            except BaseException:
                with trio.CancelScope(shield=True):
                    await self._release_quietly(name, owner)
                raise
            if answer is None or answer == "busy":
                with trio.CancelScope(shield=True):
                    await self._release_quietly(name, owner)
                return False
            grant = Grant(owner, int(answer[1]))
            view_counter = self._channel.view.view_id.id
            why = refuse_grant(
                grant.token,
                view_counter=view_counter,
                may_hold=self._quorum.has_majority or not self.majority,
                reported_since=self._reports != reports,
                newest_seen=self._newest_token(name),
            )
            if why is None:
                break
            self._counters["refused_grants"] += 1
            _log.debug("lock %r: grant with token %d refused: %s", name, grant.token, why)
            with trio.CancelScope(shield=True):
                await self._release_quietly(name, owner)
            if timeout is None:
                return False
            if token_view(grant.token) > view_counter:  # its view is on the way here
                wait = RETRY_INTERVAL
                if deadline is not None:
                    wait = min(wait, max(deadline - trio.current_time(), 0.0))
                with trio.move_on_after(wait):
                    await self._new_view.wait()
        self._max_token = max(self._max_token, grant.token)
        self._seen[name] = max(self._seen.get(name, 0), grant.token)
        self._held[name] = grant
        self._handles[(name, owner)] = handle
        handle._took(grant)
        return True

    def _newest_token(self, name: str) -> int:
        """The largest token this member saw for lock ``name``: its own grants, and the
        entry in its backup copy."""
        entry = self._copy.entries.get(name)
        copied = 0 if entry is None or entry.grant is None else entry.grant.token
        return max(self._seen.get(name, 0), copied)

    async def _release(self, handle: Lock) -> None:
        grant = handle._grant
        if grant is None:
            raise RuntimeError(f"lock {handle.name!r} is not held")
        if grant.owner != self._owner():
            raise RuntimeError(f"lock {handle.name!r} is held by another task")
        handle._let_go()
        self._handles.pop((handle.name, grant.owner), None)
        if self._held.get(handle.name) == grant:
            del self._held[handle.name]
        with trio.CancelScope(shield=True):
            await self._release_quietly(handle.name, grant.owner)

    async def _release_quietly(self, name: str, owner: Owner) -> None:
        """Tell the coordinator; a member that left or closed releases by leaving."""
        # a closed channel: the leave releases
        with trio.move_on_after(self.timeout), contextlib.suppress(RpcTimeout, ChannelClosed):
            await self._ask("release", name, owner.encode())

    def _lose(self, name: str, owner: Owner) -> None:
        grant = self._held.get(name)
        if grant is not None and grant.owner == owner:
            del self._held[name]
        handle = self._handles.pop((name, owner), None)
        if handle is not None:
            handle._lose()

    def _on_lost(self, name: str, raw_owner: list[Any]) -> None:
        self._lose(name, Owner.decode(raw_owner))

    # --- the coordinator's side -------------------------------------------------

    async def _on_acquire(self, name: str, raw_owner: list[Any], wait: bool) -> list[Any] | str:
        term = await self._serving()
        if term is None:
            return RETRY
        owner = Owner.decode(raw_owner)
        if owner.member not in self._channel.view:
            return RETRY
        grant = self._table.request(name, owner)
        if grant is None and not wait:
            self._table.release(name, owner)
            return "busy"
        if grant is None:
            waiter = self._waiters.setdefault((name, owner), trio.Event())
            await waiter.wait()
            grant = self._table.holder(name)
            if not self._still(term) or grant is None or grant.owner != owner:
                return RETRY
        await self._replicate()
        if not self._still(term) or self._table.holder(name) != grant:
            return RETRY
        return ["granted", grant.token]

    async def _on_release(self, name: str, raw_owner: list[Any]) -> str:
        term = await self._serving()
        if term is None:
            return RETRY
        owner = Owner.decode(raw_owner)
        self._wake([self._table.release(name, owner)])
        waiter = self._waiters.pop((name, owner), None)
        if waiter is not None:
            waiter.set()
        await self._replicate()
        return "released"

    def _wake(self, grants: list[Grant | None]) -> None:
        for grant in grants:
            if grant is None:
                continue
            for (name, owner), waiter in list(self._waiters.items()):
                if owner == grant.owner and self._table.holder(name) == grant:
                    del self._waiters[(name, owner)]
                    waiter.set()

    def _stepped_down(self) -> None:
        for waiter in self._waiters.values():
            waiter.set()
        self._waiters.clear()

    def _methods(self) -> tuple[str, ...]:
        return ("acquire", "release", "lost")

    def _view_installed(self, view: View, coordinating: bool) -> None:
        majority = self._quorum.install(view.members)
        granting = majority or not self.majority
        if self.majority and not majority:
            for name, grant in list(self._held.items()):
                self._lose(name, grant.owner)  # the majority side releases it
        if coordinating:
            grants = self._table.install_view(
                view.members, granting=granting, view_counter=view.view_id.id
            )
            self._wake(list(grants))
            for (name, owner), waiter in list(self._waiters.items()):
                if owner.member not in view:
                    del self._waiters[(name, owner)]
                    waiter.set()

    def _report(self) -> list[Any]:
        report = LockReport(
            self._channel.address,
            list(self._copy.entries.values()),
            max(self._max_token, self._copy.max_token, self._table.max_token),
            dict(self._held),
        )
        return report.encode()

    def _rebuild(self, view: View, reports: dict[Address, Any], side: list[Address] | None) -> None:
        decoded = {m: LockReport.decode(m, raw) for m, raw in reports.items()}
        granting = self._quorum.has_majority or not self.majority
        table, refused = rebuild_locks(
            decoded,
            view.members,
            granting=granting,
            token_gap=self.token_gap,
            view_counter=view.view_id.id,
        )
        self._stepped_down()
        self._table = table
        for name, grant in refused:
            self._tell_lost(name, grant)

    def _tell_lost(self, name: str, grant: Grant) -> None:
        if grant.owner.member == self._channel.address:
            self._lose(name, grant.owner)
            return
        nursery = self._nursery
        if nursery is not None:
            nursery.start_soon(self._send_lost, name, grant)

    async def _send_lost(self, name: str, grant: Grant) -> None:
        view = self._channel.view
        if grant.owner.member in view:
            await self._channel.rpc.call(
                _PREFIX + "lost", name, grant.owner.encode(), to=grant.owner.member, mode="none"
            )

    def _full_copy(self) -> list[Any]:
        table = self._table
        return [[e.encode() for e in table.entries()], table.max_token, table.version]

    def _apply_copy(self, copy: list[Any]) -> None:
        self._copy.replace([Entry.decode(e) for e in copy[0]], int(copy[1]), int(copy[2]))

    def _take_changes(self) -> list[Any] | None:
        changes = self._table.take_outbox()
        if not changes:
            return None
        return [[e.encode() for e in changes], self._table.max_token]

    def _apply_changes(self, changes: list[Any]) -> None:
        self._copy.apply([Entry.decode(e) for e in changes[0]], int(changes[1]))


class Lock:
    """One cluster-wide lock, as a task of this member holds it (from `LockService.lock`).

    ``async with lock:`` acquires (waiting as long as it takes) and releases on exit;
    `acquire`, `try_lock` and `release` do the same by hand, in the same task. Not
    reentrant. While held, ``token`` is the grant's fencing token: hand it to the
    resource the lock guards, which refuses a token lower than one it has seen, so a
    stale owner (paused, partitioned away, its lock given to another) cannot write.
    ``lost`` becomes True when this member learns that the lock was taken from it
    (majority mode: its view lost the majority; after a merge: an owner with a larger
    token from the other side kept it): the token still protects the resource in between.
    """

    def __init__(self, service: LockService, name: str) -> None:
        self._service = service
        self.name = name
        self._grant: Grant | None = None
        self._lost = False

    @property
    def held(self) -> bool:
        """True from a successful acquire until release, unless the lock was lost."""
        return self._grant is not None and not self._lost

    @property
    def lost(self) -> bool:
        """True when the lock was taken from this owner while held (see the class)."""
        return self._lost

    @property
    def token(self) -> int:
        """The fencing token of the current grant (RuntimeError when not held)."""
        if self._grant is None:
            raise RuntimeError(f"lock {self.name!r} is not held")
        return self._grant.token

    async def acquire(self) -> None:
        """Wait until this task holds the lock (cancellation-safe: a cancelled acquire
        holds nothing)."""
        self._check_free()
        await self._service._acquire(self, math.inf)

    async def try_lock(self, timeout: float = 0.0) -> bool:
        """Wait at most ``timeout`` seconds for the lock; True once held, False when the
        time ran out (then nothing is held). With 0, take it only if it is free now
        (one round trip to the coordinator)."""
        if not timeout >= 0:
            raise ValueError(f"timeout must be >= 0, got {timeout}")
        self._check_free()
        return await self._service._acquire(self, timeout or None)

    async def release(self) -> None:
        """Let go (the same task that acquired); the coordinator grants the next waiter."""
        await self._service._release(self)

    async def __aenter__(self) -> Lock:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._grant is not None:
            await self.release()

    def _check_free(self) -> None:
        if self._grant is not None:
            raise RuntimeError(f"lock {self.name!r} is held through this Lock already")

    def _took(self, grant: Grant) -> None:
        self._grant = grant
        self._lost = False

    def _let_go(self) -> None:
        self._grant = None

    def _lose(self) -> None:
        self._lost = True

    def __repr__(self) -> str:
        state = "lost" if self._lost else f"token {self.token}" if self._grant else "free"
        return f"<Lock {self.name!r} {state}>"


@asynccontextmanager
async def open_lock_service(
    channel: Channel,
    *,
    majority: bool = False,
    num_backups: int = 1,
    token_gap: int = TOKEN_GAP,
    rebuild_timeout: float = 5.0,
    timeout: float = 10.0,
) -> AsyncIterator[LockService]:
    """Run the lock service on ``channel`` for the block; every member should.

    ``majority``: grant only in a view holding a majority of the last full view (see
    `Quorum`); without it, as CENTRAL_LOCK, each side of a partition grants. A
    ``num_backups`` number of members after the coordinator keep a copy of its table.
    ``token_gap`` is added to the largest token known when a new coordinator takes
    over. ``rebuild_timeout`` bounds how long a new coordinator waits for the members'
    reports; ``timeout`` each request and copy to the backups.
    """
    async with open_service(
        channel,
        lambda: LockService(
            channel,
            majority=majority,
            num_backups=num_backups,
            token_gap=token_gap,
            rebuild_timeout=rebuild_timeout,
            timeout=timeout,
        ),
        _services,
        "lock service",
    ) as service:
        yield service
