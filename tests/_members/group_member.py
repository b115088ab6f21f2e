"""A GMS-driven member, run by the process supervisor, driven by JSON: membership tests.

`group_member` is the application that `group_processes.GroupMember` starts through
`open_process_group` (one member per group, never restarted): its channel is the
supervisor's (`open_channel` with a `Ledger` as its state: discovery, JOIN, state transfer) on
the stack with DISCARD inserted just above the transport (`stack_with_discard`). It takes
commands from `member_commands` and prints events as JSON lines on stdout, which the
supervisor hands to the parent as output lines. Unlike `member_process`, membership is the
group's own business here: nothing installs views by hand.

Commands::

    {"cmd": "send", "to": uuid | null, "payloads": ["..", ...]}
    {"cmd": "burst", "to": uuid | null, "prefix": "x", "count": 100}   x-0 .. x-99
    {"cmd": "partition", "members": [uuid, ...]}   DISCARD drops all from/to them
    {"cmd": "heal"}                                DISCARD drops nothing any more
    {"cmd": "stats"}

Events: ``state`` (applied: the replicated state received on join),
``ready`` (uuid, name, physical; once joined), ``view`` (one per installed
view, see `_view_event`), ``deliver`` (msgs: [[src uuid, payload], ...],
one line per batch), ``sent``, ``partitioned``, ``healed``, ``stats`` and
``bye``. The replicated state is the list of multicasts applied so far, as
[src uuid, payload] pairs. UUIDs are 32 hex digits. Stopping is the
supervisor's: SIGTERM, on which the member leaves the group gracefully and
exits with status 0.
"""

from __future__ import annotations

from typing import Any

import trio

from tests._members.json_lines import emit, uuid_hex
from triogroups._channel import Channel, ChannelClosed
from triogroups.address import Address
from triogroups.config import StackConfig
from triogroups.protocols.discard import Discard
from triogroups.supervisor import member_commands
from triogroups.view import MergeView, View

__all__ = ["Ledger", "group_member", "stack_with_discard"]


def _members(view: View) -> list[list[str]]:
    return [[uuid_hex(m), m.name] for m in view.members]


def _view_event(view: View) -> dict[str, Any]:
    """A view as JSON: id (counter, coordinator uuid), members, merge subgroups."""
    merge = isinstance(view, MergeView)
    return {
        "id": [view.view_id.id, uuid_hex(view.view_id.coord)],
        "coord": uuid_hex(view.coord),
        "members": _members(view),
        "merge": merge,
        "subgroups": (
            [
                {"id": [v.view_id.id, uuid_hex(v.view_id.coord)], "members": _members(v)}
                for v in view.subgroups  # type: ignore[attr-defined]
            ]
            if merge
            else []
        ),
    }


class Ledger:
    """The replicated state: every multicast applied, as [src uuid, payload], in order."""

    def __init__(self) -> None:
        self.applied: list[list[str]] = []

    def get_state(self) -> list[list[str]]:
        return list(self.applied)

    def set_state(self, state: list[list[str]]) -> None:
        self.applied = [[str(src), str(payload)] for src, payload in state]
        emit("state", applied=self.applied)


def stack_with_discard(
    stack: str, props: dict[str, dict[str, Any]], *, discard: bool = True
) -> StackConfig:
    """The stack named ``stack`` with ``props`` applied and DISCARD right above the transport
    (not with ``discard`` False: the preset as it is, e.g. ``tcp`` without retransmission)."""
    config = StackConfig.resolve(stack)
    if discard and "DISCARD" not in config.names():
        config = config.insert_above(config.names()[0], "DISCARD")
    for layer, values in props.items():
        config = config.configure(layer, **values)
    return config


class _Member:
    def __init__(self, channel: Channel, ledger: Ledger) -> None:
        self.channel = channel
        self.ledger = ledger

    def _address(self, uuid: str) -> Address:
        """The member of the current view with this uuid (NotAMember on send if none)."""
        wanted = int(uuid, 16)
        return next((m for m in self.channel.view.members if m.uuid == wanted), Address(wanted))

    def _discard(self) -> Discard:
        discard = self.channel.stack.protocol("DISCARD")
        assert isinstance(discard, Discard)
        return discard

    async def read_views(self) -> None:
        async for view in self.channel.views():
            emit("view", **_view_event(view))

    async def read_messages(self) -> None:
        channel = self.channel
        while True:
            try:
                batch = [await channel.receive()]
                while True:
                    batch.append(channel.receive_nowait())
            except trio.WouldBlock:
                pass
            except ChannelClosed:
                return
            msgs = [[uuid_hex(m.src), str(m.payload)] for m in batch]
            self.ledger.applied.extend(p for m, p in zip(batch, msgs, strict=True) if m.multicast)
            emit("deliver", msgs=msgs)

    async def command(self, cmd: dict[str, Any]) -> None:
        kind = cmd.get("cmd")
        if kind in ("send", "burst"):
            to = cmd.get("to")
            dest = None if to is None else self._address(to)
            if kind == "send":
                payloads = [str(p) for p in cmd["payloads"]]
            else:
                payloads = [f"{cmd['prefix']}-{i}" for i in range(int(cmd["count"]))]
            for payload in payloads:
                await self.channel.send(payload, dest)
            emit("sent", count=len(payloads))
        elif kind == "partition":
            others = [self._address(u) for u in cmd["members"]]
            self._discard().ignore(*others)
            self._discard().drop_to(*others)
            emit("partitioned", members=[uuid_hex(m) for m in others])
        elif kind == "heal":
            self._discard().reset()
            emit("healed")
        elif kind == "stats":
            emit("stats", stats={"channel": self.channel.stats(), **self.channel.stack.stats()})
        else:
            emit("error", detail=f"unknown command {kind!r}")


async def group_member(channel: Channel, ledger: Ledger) -> None:
    """Say ``ready``, then print views and deliveries and serve commands until stopped."""
    me = channel.address
    physical = getattr(channel.stack.protocols[0], "physical", ("", 0))
    emit("ready", uuid=uuid_hex(me), name=me.name, physical=list(physical))
    member = _Member(channel, ledger)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(member.read_views)
            nursery.start_soon(member.read_messages)
            async for command in member_commands():
                await member.command(command)
            nursery.cancel_scope.cancel()
    finally:
        emit("bye")
