"""The parent side of `_group_member`: GMS-driven member processes on the supervisor.

`GroupMember` runs `_group_member.group_member` as the one member of a process group of its
own (`open_process_group`, never restarted), so these tests start, stop, kill and command
members through the product's supervisor: its pipes, its graceful stop, its parent-death
watch. The member's JSON lines come back as its output lines; commands go through
`ProcessGroup.send`. `start_group` starts several, the first alone so it becomes the
coordinator; `wait_same_view` waits until a set of members agree on one view. Waits are
bounded by the caller's deadlines (``trio.fail_after``), never by sleeps.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Sequence
from typing import Any

import trio

from triogroups.actors import Restart
from triogroups.supervisor import MemberExited, ProcessGroup, open_process_group
from triogroups.testing._group_member import Ledger, group_member, stack_with_discard
from triogroups.testing._processes import MemberEvents

__all__ = ["GroupMember", "describe", "start_group", "wait_same_view"]

_POLL = 0.05


class GroupMember(MemberEvents):
    """One `_group_member` process, supervised, and the events it has printed so far."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.returncode: int | None = None
        self._group: ProcessGroup | None = None
        self._leave = trio.Event()
        self._ended = trio.Event()

    @classmethod
    async def start(
        cls,
        nursery: trio.Nursery,
        name: str,
        *,
        stack: str,
        cluster: str,
        props: dict[str, dict[str, Any]],
    ) -> GroupMember:
        """Launch a member and return once it joined and printed ``ready``."""
        member = cls(name)
        await nursery.start(member._run, stack_with_discard(stack, props), cluster)
        member._ready(await member.wait_for(lambda e: e["event"] in ("ready", "eof")))
        return member

    async def _run(self, config: Any, cluster: str, *, task_status: trio.TaskStatus[None]) -> None:
        ledger = Ledger()
        try:
            async with open_process_group(
                group_member,
                names=[self.name],
                stack=config,
                cluster=cluster,
                args=(ledger,),
                state=ledger,
                restart=Restart.TEMPORARY,
                output=self._output,
            ) as group:
                self._group = group
                task_status.started()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._watch, group)
                    await self._leave.wait()
                    nursery.cancel_scope.cancel()
        finally:
            self._exited(None)

    async def _watch(self, group: ProcessGroup) -> None:
        """The member's exit ends this member (``eof``), also when it was killed."""
        async for event in group.events():
            if isinstance(event, MemberExited):
                self._exited(event.returncode)
        self._leave.set()

    def _exited(self, returncode: int | None) -> None:
        if self._ended.is_set():
            return
        if returncode is None and self._group is not None:
            returncode = self._group.member(self.name).returncode
        self.returncode = returncode
        self._ended.set()
        self._event({"event": "eof"})
        self._leave.set()

    def _output(self, name: str, line: str) -> None:
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except ValueError:
                return
            if isinstance(event, dict) and "event" in event:
                self._event(event)

    async def command(self, cmd: str, **fields: Any) -> None:
        assert self._group is not None
        await self._group.send(self.name, {"cmd": cmd, **fields})

    @property
    def view(self) -> dict[str, Any] | None:
        """The last view this member installed (see `_group_member._view_event`)."""
        return next((e for e in reversed(self.events) if e["event"] == "view"), None)

    def view_members(self) -> set[str]:
        view = self.view
        return set() if view is None else {uuid for uuid, _ in view["members"]}

    def view_index(self, view: dict[str, Any]) -> int:
        """Where ``view`` is in this member's events (for what it delivered since)."""
        return next(i for i, e in enumerate(self.events) if e is view)

    def delivered_since(self, index: int) -> list[tuple[str, str]]:
        """(sender uuid, payload) of every message delivered after event ``index``."""
        return [
            (src, payload)
            for event in self.events[index:]
            if event["event"] == "deliver"
            for src, payload in event["msgs"]
        ]

    async def wait_delivered_since(
        self, index: int, done: Callable[[list[tuple[str, str]]], bool]
    ) -> list[tuple[str, str]]:
        """Wait until what was delivered after event ``index`` passes ``done``; return it."""
        await self.wait_until(lambda _: done(self.delivered_since(index)))
        return self.delivered_since(index)

    def state(self) -> list[tuple[str, str]] | None:
        """The state this member received on join, or None if it got none."""
        event = next((e for e in self.events if e["event"] == "state"), None)
        return None if event is None else [(src, payload) for src, payload in event["applied"]]

    @property
    def alive(self) -> bool:
        return not self._ended.is_set()

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the member's process (SIGKILL: it dies; SIGTERM: it leaves)."""
        if self._group is not None and not self._ended.is_set():
            self._group.kill(self.name, signum)

    async def wait(self) -> int:
        """The member's exit status, once its process ended."""
        await self._ended.wait()
        assert self.returncode is not None
        return self.returncode

    async def stop(self) -> int:
        """Stop the member as the supervisor does (SIGTERM: it leaves the group and exits);
        its exit status."""
        self._leave.set()
        return await self.wait()

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self._leave.set()


async def start_group(
    nursery: trio.Nursery,
    names: Sequence[str],
    *,
    stack: str,
    cluster: str,
    props: dict[str, dict[str, Any]],
) -> list[GroupMember]:
    """Start ``names[0]`` (it becomes the coordinator), then the others at once.

    Returns them in ``names`` order once each has joined some view.
    """
    first = await GroupMember.start(nursery, names[0], stack=stack, cluster=cluster, props=props)
    started: dict[str, GroupMember] = {}

    async def start_one(name: str) -> None:
        started[name] = await GroupMember.start(
            nursery, name, stack=stack, cluster=cluster, props=props
        )

    async with trio.open_nursery() as starting:
        for name in names[1:]:
            starting.start_soon(start_one, name)
    return [first, *(started[name] for name in names[1:])]


async def wait_same_view(
    members: Sequence[GroupMember],
    *,
    check: Callable[[dict[str, Any]], bool] = lambda view: True,
) -> dict[str, Any]:
    """Wait until the members' last views have one id, exactly these members, and pass ``check``.

    Returns that view (as ``members[0]`` printed it).
    """
    wanted = {m.uuid for m in members}
    while True:
        for m in members:
            if not m.alive:
                raise RuntimeError(f"member {m.name} exited while waiting for a view")
        views = [m.view for m in members]
        if all(v is not None and {u for u, _ in v["members"]} == wanted for v in views):
            ids = {tuple(v["id"]) for v in views if v is not None}
            first = views[0]
            if len(ids) == 1 and first is not None and check(first):
                return first
        await trio.sleep(_POLL)


def describe(members: Sequence[GroupMember]) -> str:
    """Each member's name, uuid prefix and last view: for failure messages."""
    names = {m.uuid: m.name for m in members}
    lines = []
    for m in members:
        view = m.view
        if view is None:
            shown = "no view"
        else:
            who = ",".join(names.get(u, n or u[:6]) for u, n in view["members"])
            kind = "merge " if view["merge"] else ""
            shown = f"{kind}view {view['id'][0]} [{who}]"
        state = "alive" if m.alive else "gone"
        lines.append(f"{m.name} ({m.uuid[:6]}, {state}): {shown}")
    return "; ".join(lines)
