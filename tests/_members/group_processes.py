"""The parent side of `group_member`: GMS-driven member processes on the supervisor.

`GroupMember` is a `SupervisedMember` (its own process group of one, see `processes`) that
runs `group_member.group_member`, a channel that joins by itself with a `Ledger` as its
state, and knows the views it printed. `start_group` starts several, the first alone so it
becomes the coordinator; `wait_same_view` waits until a set of members agree on one view.
Waits are bounded by the caller's deadlines (``trio.fail_after``), never by sleeps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import trio

from tests._members.group_member import Ledger, group_member, stack_with_discard
from tests._members.processes import SupervisedMember

__all__ = ["GroupMember", "describe", "start_group", "wait_same_view"]

_POLL = 0.05


class GroupMember(SupervisedMember):
    """One `group_member` member (a channel) and the events it has printed so far."""

    @classmethod
    async def start(
        cls,
        nursery: trio.Nursery,
        name: str,
        *,
        stack: str,
        cluster: str,
        props: dict[str, dict[str, Any]],
        discard: bool = True,
    ) -> GroupMember:
        """Launch a member and return once it joined and printed ``ready``; its stack has
        DISCARD above the transport unless ``discard`` is False."""
        ledger = Ledger()
        member = cls(name)
        await member._launch(
            nursery,
            group_member,
            stack=stack_with_discard(stack, props, discard=discard),
            cluster=cluster,
            args=(ledger,),
            state=ledger,
        )
        return member

    @property
    def view(self) -> dict[str, Any] | None:
        """The last view this member installed (see `group_member._view_event`)."""
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
