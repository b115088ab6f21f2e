"""What the lock and counter services share: a coordinator, its backups and its rebuild.

One member's side of a service that the view's coordinator runs, over the channel's
public group RPC only (the service is an application of the channel, as JGroups'
LockService and CounterService sit on top of their protocols). Every member runs the
same service; the coordinator keeps the table and answers requests, and copies each
change to the ``num_backups`` members after it in the view before it answers
(JGroups' ``num_backups``). A member that becomes coordinator (the old one crashed or
left), and the coordinator of a merged view, first asks every member for what it
knows (`_report`) and rebuilds the table from the answers (`_rebuild`); requests wait
until that is done. Callers whose coordinator went away ask the next one
(`_ask`). The rules live in the sans-IO tables; this module only talks.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

from triogroups._channel import Channel
from triogroups._errors import ChannelClosed, MemberGone, NotAMember
from triogroups._rpc import RpcTimeout, UnknownMethod
from triogroups.address import Address
from triogroups.view import MergeView, View

__all__ = ["RETRY", "RETRY_INTERVAL", "CoordinatedService", "open_service"]

_log = logging.getLogger("triogroups.blocks")

#: The answer of a member that cannot serve a request now (it is not the coordinator
#: of its view, or stopped being it while the request waited): the caller asks again.
RETRY = "retry"

#: How long a caller told to retry waits for a new view before it asks again (views
#: reach members at slightly different times).
RETRY_INTERVAL = 0.1

_S = TypeVar("_S", bound="CoordinatedService")


class CoordinatedService:
    """Base of the lock and counter services: coordinator role, backups, rebuild, asking.

    Subclasses name their RPC methods under ``prefix`` and provide the table's part:
    `_report` (what this member knows), `_rebuild` (a new table from the reports),
    `_full_copy` and `_apply_copy` (a whole table for a new backup), `_take_changes` and
    `_apply_changes` (what changed, to the backups), `_view_installed` (each view).
    """

    def __init__(
        self,
        channel: Channel,
        prefix: str,
        *,
        num_backups: int,
        rebuild_timeout: float,
        timeout: float,
    ) -> None:
        if isinstance(num_backups, bool) or not isinstance(num_backups, int):
            raise TypeError(f"num_backups must be an int, got {type(num_backups).__name__}")
        if num_backups < 0:
            raise ValueError(f"num_backups must be >= 0, got {num_backups}")
        for label, value in (("rebuild_timeout", rebuild_timeout), ("timeout", timeout)):
            if not 0 < value < math.inf:
                raise ValueError(f"{label} must be a finite number > 0, got {value}")
        self._channel = channel
        self._prefix = prefix
        self.num_backups = num_backups
        self.rebuild_timeout = rebuild_timeout
        self.timeout = timeout
        self._view: View | None = None
        self._coordinating = False
        self._term = 0  # grows each time this member starts or stops coordinating
        self._ready = trio.Event()  # set once the coordinator's table is rebuilt
        self._backups: list[Address] = []
        # copies to the backups in flight, in the order they went out (a dict, not a set:
        # waiting for them in an order drawn from memory addresses made a campaign seed's
        # scheduling, so its run, differ from one process to the next)
        self._copies: dict[trio.Event, None] = {}
        self._new_view = trio.Event()
        self._nursery: trio.Nursery | None = None
        #: how many reports this member gave to coordinators rebuilding their table
        self._reports = 0
        self._counters: dict[str, int] = {
            "requests": 0,
            "retries": 0,
            "rebuilds": 0,
            "backup_failures": 0,
        }

    # --- for subclasses ---------------------------------------------------------

    def _report(self) -> Any:
        raise NotImplementedError

    def _rebuild(self, view: View, reports: dict[Address, Any], side: list[Address] | None) -> None:
        raise NotImplementedError

    def _full_copy(self) -> Any:
        raise NotImplementedError

    def _apply_copy(self, copy: Any) -> None:
        raise NotImplementedError

    def _take_changes(self) -> Any:
        raise NotImplementedError

    def _apply_changes(self, changes: Any) -> None:
        raise NotImplementedError

    def _view_installed(self, view: View, coordinating: bool) -> None:
        raise NotImplementedError

    def _methods(self) -> tuple[str, ...]:
        """The names (after ``prefix``) of the subclass's own RPC methods."""
        raise NotImplementedError

    def _stepped_down(self) -> None:
        """This member stopped coordinating: requests that wait must answer RETRY."""

    # --- running ----------------------------------------------------------------

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follow the channel's views until it closes (the service's one task)."""
        started = False
        async for view in self._channel.views():
            await self._install(view)
            if not started:
                started = True
                task_status.started()
        if not started:
            task_status.started()

    async def _install(self, view: View) -> None:
        me = self._channel.address
        was = self._coordinating
        previous = self._view
        self._view = view
        now = view.coord == me
        merged = isinstance(view, MergeView)
        if now != was or (now and merged):
            self._term += 1
            self._ready = trio.Event()
            if was:
                self._stepped_down()
        self._coordinating = now
        self._view_installed(view, now)
        self._new_view.set()
        self._new_view = trio.Event()
        if not now:
            self._backups = []
            return
        if not was or merged or previous is None:
            await self._rebuild_round(view)
        backups = [m for m in view.members if m != me][: self.num_backups]
        fresh = [m for m in backups if m not in self._backups]
        self._backups = backups
        if fresh:
            await self._send_to(fresh, "copy", self._full_copy())
        await self._replicate()
        self._ready.set()

    async def _rebuild_round(self, view: View) -> None:
        """Ask every member of ``view`` what it knows and rebuild the table."""
        self._counters["rebuilds"] += 1
        reports: dict[Address, Any] = {}
        try:
            rsps = await self._channel.rpc.call(
                self._prefix + "report", oob=True, timeout=self.rebuild_timeout
            )
        except ChannelClosed:
            return
        for member, rsp in rsps.items():
            if rsp.ok:
                reports[member] = rsp.value
        side = None
        if isinstance(view, MergeView):
            me = self._channel.address
            side = next((list(v.members) for v in view.subgroups if me in v), [me])
        _log.debug("%s rebuilt from %d of %d members", self._prefix, len(reports), len(view))
        self._rebuild(view, reports, side)
        self._backups = []  # every backup gets the rebuilt table whole

    # --- backups ----------------------------------------------------------------

    async def _replicate(self) -> None:
        """Copy every change made so far to the backups; returns once they have it
        (or are gone). Callers answer a request only after this.

        Copies go out at once, side by side (a backup keeps the newest version of each
        entry, whatever order they arrive in); a caller whose change another caller's
        copy took waits for every copy in flight when it came, that one included.
        """
        earlier = list(self._copies)
        changes = self._take_changes()
        if changes is not None and self._backups:
            done = trio.Event()
            self._copies[done] = None
            try:
                await self._send_to(self._backups, "changes", changes)
            finally:
                self._copies.pop(done, None)
                done.set()
        for copy in earlier:
            await copy.wait()

    async def _send_to(self, members: list[Address], what: str, payload: Any) -> None:
        view = self._channel.view
        targets = [m for m in members if m in view]
        if not targets:
            return
        try:
            rsps = await self._channel.rpc.call(
                self._prefix + what, payload, to=targets, oob=True, timeout=self.timeout
            )
        except ChannelClosed:
            return
        if rsps.timed_out or rsps.errors():
            self._counters["backup_failures"] += 1

    def _on_copy(self, copy: Any) -> None:
        self._apply_copy(copy)

    def _on_changes(self, changes: Any) -> None:
        self._apply_changes(changes)

    def _on_report(self) -> Any:
        self._reports += 1
        return self._report()

    # --- serving ----------------------------------------------------------------

    async def _serving(self) -> int | None:
        """The term in which this member serves a request now, or None (answer RETRY):
        waits until the service has installed the channel's view (`_current`) and a new
        coordinator's table is rebuilt."""
        self._counters["requests"] += 1
        while self._coordinating and not self._current():
            await self._new_view.wait()
        if not self._coordinating:
            return None
        term = self._term
        await self._ready.wait()
        return term if self._still(term) else None

    def _still(self, term: int) -> bool:
        """Whether a request served in ``term`` may be answered now: the same term, and
        no view since that the service has still to install."""
        return term == self._term and self._coordinating and self._current()

    def _current(self) -> bool:
        """Whether the service has installed the channel's current view.

        `_install` takes the views one at a time and may wait on the network (a whole
        copy to a fresh backup that does not answer waits up to ``timeout``), while the
        channel goes on installing views. Until the service catches up, its term, table
        and majority are those of a view the group has left: a grant from that table
        is not in the table a merge since rebuilds (issue 42, campaign udp-total-blocks
        seed 70122: C, stuck 11 s in its view 5, granted x to a member of view 8 from
        its view-5 table, then rebuilt merge view 7 without it and granted x again).
        """
        view = self._view
        return view is not None and view.view_id == self._channel.view.view_id

    # --- asking -----------------------------------------------------------------

    async def _ask(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        """Call ``method`` on the coordinator until one answers; returns its answer.

        A coordinator that is gone, not (yet) the coordinator, or that does not run the
        service yet is asked again once the view changes (or after a short wait).
        Raises RpcTimeout when ``timeout`` (default: the service's) passes first.
        """
        answer, _ = await self._ask_reported(method, *args, timeout=timeout)
        return answer

    async def _ask_reported(
        self, method: str, *args: Any, timeout: float | None = None
    ) -> tuple[Any, int]:
        """As `_ask`, with how many reports this member had given when the request that
        was answered went out: a report given since then did not know the answer (a
        rebuilt table may not hold what the answer grants)."""
        limit = self.timeout if timeout is None else timeout
        deadline = trio.current_time() + limit
        while True:
            left = deadline - trio.current_time()
            if left <= 0:
                raise RpcTimeout(f"no answer to {self._prefix}{method} within {limit}s")
            view = self._channel.view
            changed = self._new_view
            reports = self._reports
            try:
                answer = await self._channel.rpc.call_one(
                    self._prefix + method, *args, to=view.coord, oob=True, timeout=left
                )
            except (MemberGone, NotAMember, UnknownMethod):
                answer = RETRY
            if answer != RETRY:
                return answer, reports
            self._counters["retries"] += 1
            with trio.move_on_after(min(RETRY_INTERVAL, max(left, 0.0))):
                await changed.wait()

    def _stats(self) -> dict[str, Any]:
        view = self._view
        return {
            "coordinator": str(view.coord) if view else None,
            "coordinating": self._coordinating,
            "ready": self._ready.is_set(),
            "backups": [str(m) for m in self._backups],
            "num_backups": self.num_backups,
            **self._counters,
        }


@asynccontextmanager
async def open_service(
    channel: Channel,
    make: Callable[[], _S],
    registered: weakref.WeakKeyDictionary[Channel, Any],
    kind: str,
) -> AsyncIterator[_S]:
    """Run the service ``make()`` builds on ``channel`` for the length of the block; one
    of a ``kind`` per channel. Its RPC methods (``_on_<name>`` for each of the base's
    and `_methods`) are registered only once it is built and checked, so a refused
    second service never takes the first one's requests."""
    if channel in registered:
        raise RuntimeError(f"channel {channel.name or channel.cluster} runs a {kind} already")
    service = make()
    methods = ("report", "copy", "changes", *service._methods())
    registered[channel] = service
    for method in methods:
        channel.rpc.register(service._prefix + method, getattr(service, "_on_" + method))
    try:
        async with trio.open_nursery() as nursery:
            service._nursery = nursery
            await nursery.start(service._run)
            try:
                yield service
            finally:
                nursery.cancel_scope.cancel()
    finally:
        del registered[channel]
        for method in methods:
            channel.rpc.unregister(service._prefix + method)
