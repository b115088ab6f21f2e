"""A member that runs a bare stack, run by the process supervisor, driven by JSON: real tests.

`stack_member` is the application that `processes.MemberProcess` starts through
`open_process_group` with ``bare=True`` (one member per group, never restarted): it gets the
member's started `Stack` (no channel, no GMS: views are installed by hand), takes commands
from `member_commands` and prints events as JSON lines on stdout, which the supervisor hands
to the parent as output lines.

Commands::

    {"cmd": "find", "timeout": 2.0}                 FindMembers down the stack
    {"cmd": "view", "members": [[uuid, name], ...]}  install a view (first = coordinator)
    {"cmd": "send", "to": uuid | null, "payloads": ["..", ...]}
    {"cmd": "burst", "to": uuid | null, "prefix": "A", "count": 10000,
     "size": 100, "batch": 50}                      send generated messages (see below)
    {"cmd": "tally", "at_least": 0}                 the tally, once that many were delivered
    {"cmd": "hosts", "hosts": [[ip, port], ...]}     SetPhysicalAddresses down the stack
    {"cmd": "stats"}

Events: ``ready`` (uuid, name, physical), ``found`` (members), ``view_sent``,
``sent``, ``deliver`` (msgs: [[src uuid, payload], ...], one line per batch),
``burst_done`` (prefix, count), ``tally`` (total, maxrss_kb, senders),
``stats`` and ``bye``. UUIDs are 32 hex digits. Stopping is the supervisor's:
on SIGTERM the member stops its stack and exits with status 0.

Load tests: ``burst`` makes ``count`` messages inside the member, payload
``b"<prefix>:<index>:"`` padded with ``x`` to ``size`` bytes, and hands them to
the stack ``batch`` at a time as fast as it accepts them; it runs in the
background, so other commands are served meanwhile, and prints ``burst_done``
once the last batch was accepted. With ``tally`` the member prints no
``deliver`` lines; it counts instead, per sender and prefix: ``delivered``,
``duplicates`` (an index delivered again), ``out_of_order`` (a new index
that was not the next one, with the ``first_disorder`` as [expected, got])
and ``next`` (the lowest index not yet delivered). ``tally`` with
``at_least`` N answers once N messages in all were delivered, so a test waits
for 10,000s of deliveries without a line per message. Payloads that do not
parse are counted under the prefix ``"?"``.
"""

from __future__ import annotations

import resource
from typing import Any

import trio

from tests._members.json_lines import emit, uuid_hex
from triogroups.address import Address
from triogroups.events import (
    FindMembers,
    LocalPhysicalAddress,
    MembersFound,
    SetPhysicalAddresses,
    ViewChange,
)
from triogroups.message import Message
from triogroups.stack import Stack
from triogroups.supervisor import member_commands
from triogroups.view import View

__all__ = ["stack_member"]


def _address(entry: list[str]) -> Address:
    return Address(int(entry[0], 16), entry[1] if len(entry) > 1 else "")


class _Tally:
    """Deliveries from one sender with one prefix: counts, duplicates, order."""

    __slots__ = ("delivered", "duplicates", "first_disorder", "next", "out_of_order", "seen")

    def __init__(self) -> None:
        self.delivered = 0
        self.duplicates = 0
        self.out_of_order = 0
        self.next = 0
        self.first_disorder: list[int] | None = None
        self.seen = bytearray()

    def add(self, index: int) -> None:
        self.delivered += 1
        seen = self.seen
        if index >= len(seen):
            seen.extend(bytes(max(index + 1 - len(seen), 1024)))
        if seen[index]:
            self.duplicates += 1
            return
        seen[index] = 1
        if index != self.next:
            self.out_of_order += 1
            if self.first_disorder is None:
                self.first_disorder = [self.next, index]
        while self.next < len(seen) and seen[self.next]:
            self.next += 1

    def report(self) -> dict[str, Any]:
        return {
            "delivered": self.delivered,
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
            "first_disorder": self.first_disorder,
            "next": self.next,
        }


def _payload(prefix: str, index: int, size: int) -> bytes:
    return f"{prefix}:{index}:".encode().ljust(size, b"x")


class _Member:
    def __init__(self, stack: Stack, *, tally: bool) -> None:
        self.stack = stack
        self.known: dict[str, Address] = {}
        self.tally = tally
        self.tallies: dict[tuple[str, str], _Tally] = {}
        self.total = 0
        self._waiting: list[int] = []
        self._delivered = trio.Event()

    def _count(self, batch: list[Message]) -> None:
        tallies = self.tallies
        for msg in batch:
            src = uuid_hex(msg.src) if msg.src else "?"
            prefix, _, rest = msg.payload.partition(b":")
            index, colon, _ = rest.partition(b":")
            if not colon or not index.isdigit():
                prefix, index = b"?", b"0"
            key = (src, prefix.decode(errors="replace"))
            tally = tallies.get(key)
            if tally is None:
                tally = tallies[key] = _Tally()
            tally.add(int(index))
        self.total += len(batch)
        self._delivered.set()
        self._delivered = trio.Event()

    def _tally_report(self) -> dict[str, Any]:
        senders: dict[str, dict[str, Any]] = {}
        for (src, prefix), tally in sorted(self.tallies.items()):
            senders.setdefault(src, {})[prefix] = tally.report()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {"total": self.total, "maxrss_kb": rss, "senders": senders}

    async def _answer_tally(self, at_least: int) -> None:
        while self.total < at_least:
            await self._delivered.wait()
        emit("tally", **self._tally_report())

    async def _burst(self, dest: Address | None, cmd: dict[str, Any]) -> None:
        prefix, count = str(cmd["prefix"]), int(cmd["count"])
        size, step = int(cmd.get("size", 100)), max(1, int(cmd.get("batch", 50)))
        for start in range(0, count, step):
            end = min(start + step, count)
            await self.stack.send(
                [Message(dest, _payload(prefix, i, size)) for i in range(start, end)]
            )
        emit("burst_done", prefix=prefix, count=count)

    def _dest(self, to: str | None) -> Address | None:
        return None if to is None else self.known.get(to) or Address(int(to, 16))

    async def read_stack(self) -> None:
        async for item in self.stack.deliveries:
            if type(item) is list:
                if self.tally:
                    self._count(item)
                    continue
                msgs = [[uuid_hex(m.src) if m.src else None, m.payload.decode()] for m in item]
                emit("deliver", msgs=msgs)
            elif isinstance(item, LocalPhysicalAddress):
                me = self.stack.address
                emit("ready", uuid=uuid_hex(me), name=me.name, physical=list(item.physical))
            elif isinstance(item, MembersFound):
                members = []
                for data in item.responses:
                    self.known[uuid_hex(data.address)] = data.address
                    members.append(
                        {
                            "uuid": uuid_hex(data.address),
                            "name": data.address.name,
                            "physical": list(data.physical),
                            "is_coord": data.is_coord,
                        }
                    )
                emit("found", members=members)

    async def command(self, cmd: dict[str, Any], nursery: trio.Nursery) -> None:
        kind = cmd["cmd"]
        if kind == "find":
            await self.stack.send(FindMembers(float(cmd["timeout"])))
        elif kind == "view":
            members = [_address(m) for m in cmd["members"]]
            await self.stack.send(ViewChange(View.create(members[0], 1, members)))
            emit("view_sent")
        elif kind == "hosts":
            hosts = tuple((str(h), int(p)) for h, p in cmd["hosts"])
            await self.stack.send(SetPhysicalAddresses(hosts))
        elif kind == "send":
            dest = self._dest(cmd.get("to"))
            await self.stack.send([Message(dest, p.encode()) for p in cmd["payloads"]])
            emit("sent", count=len(cmd["payloads"]))
        elif kind == "burst":
            nursery.start_soon(self._burst, self._dest(cmd.get("to")), cmd)
        elif kind == "tally":
            nursery.start_soon(self._answer_tally, int(cmd.get("at_least", 0)))
        elif kind == "stats":
            emit("stats", stats=self.stack.stats())
        else:
            emit("error", detail=f"unknown command {kind!r}")


async def stack_member(stack: Stack, tally: bool) -> None:
    """Print what the stack delivers and serve commands until stopped."""
    member = _Member(stack, tally=tally)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(member.read_stack)
            async for command in member_commands():
                await member.command(command, nursery)
            nursery.cancel_scope.cancel()
    finally:
        emit("bye")
