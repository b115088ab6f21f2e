"""The parent side of `_member_process`: start members as processes, talk JSON lines.

`MemberProcess.start` launches ``python -m triogroups.testing._member_process``
(optionally behind a prefix such as ``ip netns exec NS``), collects every
event it prints, and lets a test send commands and wait for conditions.
Waits are bounded by the caller's deadlines (``trio.fail_after``), never by
sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import trio

__all__ = ["MemberEvents", "MemberProcess", "check_tally", "exchange_and_check", "layer_stats"]

_ROOT = Path(__file__).resolve().parents[2]


class MemberEvents:
    """The events a member has printed so far, and the commands to it: what a test sees of a
    member, whichever way it runs (`MemberProcess` here, `GroupMember` on the supervisor)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self.uuid = ""
        self.physical: tuple[str, int] = ("", 0)
        self._changed = trio.Event()

    def _event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self._changed.set()
        self._changed = trio.Event()

    def _ready(self, ready: dict[str, Any]) -> None:
        if ready["event"] == "eof":
            raise RuntimeError(f"member {self.name} exited before it was ready")
        self.uuid = ready["uuid"]
        self.physical = (ready["physical"][0], int(ready["physical"][1]))

    async def command(self, cmd: str, **fields: Any) -> None:
        """Send the member one command (``{"cmd": cmd, **fields}``)."""
        raise NotImplementedError

    async def wait_for(self, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first event (seen so far or to come) that passes ``check``."""
        seen = 0
        while True:
            for event in self.events[seen:]:
                if check(event):
                    return event
                if event["event"] == "eof":
                    raise RuntimeError(f"member {self.name} exited before the awaited event")
            seen = len(self.events)
            await self._changed.wait()

    async def wait_until(self, check: Callable[[Self], bool]) -> None:
        """Return once ``check(self)`` holds (re-checked after every output)."""
        while not check(self):
            if self.events and self.events[-1]["event"] == "eof":
                raise RuntimeError(f"member {self.name} exited before the condition held")
            await self._changed.wait()

    def delivered(self) -> list[tuple[str, str]]:
        """(sender uuid, payload) of every message delivered so far, in order."""
        return [
            (src, payload)
            for event in self.events
            if event["event"] == "deliver"
            for src, payload in event["msgs"]
        ]

    async def _ask(self, event: str, cmd: str, **fields: Any) -> dict[str, Any]:
        """Send ``cmd`` and return the next ``event`` printed after it."""
        count = sum(1 for e in self.events if e["event"] == event)
        await self.command(cmd, **fields)
        seen = 0

        def nth(printed: dict[str, Any]) -> bool:
            nonlocal seen
            if printed["event"] == event:
                seen += 1
                return seen > count
            return False

        return await self.wait_for(nth)

    async def stats(self) -> dict[str, Any]:
        return (await self._ask("stats", "stats"))["stats"]  # type: ignore[no-any-return]

    async def burst(
        self, to: str | None, prefix: str, count: int, *, size: int = 100, batch: int = 50
    ) -> None:
        """Have the member send ``count`` generated messages; returns at once."""
        await self.command("burst", to=to, prefix=prefix, count=count, size=size, batch=batch)

    async def tally(self, at_least: int = 0) -> dict[str, Any]:
        """The member's tally (a ``--tally`` member) once it delivered ``at_least`` in all.

        Only one tally may be outstanding per member: answers are matched by order.
        """
        return await self._ask("tally", "tally", at_least=at_least)


class MemberProcess(MemberEvents):
    """One member process and the events it has printed so far."""

    program: ClassVar[str] = "triogroups.testing._member_process"

    def __init__(self, name: str, process: trio.Process) -> None:
        super().__init__(name)
        self.process = process

    @classmethod
    async def start(
        cls,
        nursery: trio.Nursery,
        name: str,
        *,
        stack: str,
        cluster: str,
        props: dict[str, dict[str, Any]] | None = None,
        prefix: Sequence[str] = (),
        tally: bool = False,
    ) -> Self:
        """Launch a member and return once it printed ``ready``.

        With ``tally`` the member counts deliveries instead of printing them
        (see `tally`); `delivered` then stays empty. Subclasses run another
        member program (``program``) that speaks the same lines.
        """
        argv = [
            *prefix,
            sys.executable,
            "-m",
            cls.program,
            "--stack",
            stack,
            "--cluster",
            cluster,
            "--name",
            name,
            "--props",
            json.dumps(props or {}),
            *(["--tally"] if tally else []),
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), env.get("PYTHONPATH")]))
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        member = cls(name, process)
        nursery.start_soon(member._read)
        member._ready(await member.wait_for(lambda e: e["event"] in ("ready", "eof")))
        return member

    async def _read(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    self._event(json.loads(line))
        self._event({"event": "eof"})

    async def command(self, cmd: str, **fields: Any) -> None:
        assert self.process.stdin is not None
        line = json.dumps({"cmd": cmd, **fields}) + "\n"
        await self.process.stdin.send_all(line.encode())

    async def stop(self) -> int:
        """Close stdin (the member's signal to leave) and return its exit status."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        return await self.process.wait()

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


async def exchange_and_check(
    members: list[MemberProcess], *, find_timeout: float, multicasts: int, unicasts: int
) -> None:
    """Discover, install one view, send, and check everything arrived.

    Every member runs a find and must find all the others; then each
    multicasts ``multicasts`` messages and unicasts ``unicasts`` to every
    other member. Each member must deliver every multicast (its own
    included) and every unicast sent to it, multicasts in send order per
    sender. Raises AssertionError naming the member and sender otherwise.
    """
    for m in members:
        await m.command("find", timeout=find_timeout)
    for m in members:
        found = await m.wait_for(lambda e: e["event"] == "found")
        others = {o.uuid for o in members if o is not m}
        got = {f["uuid"] for f in found["members"]}
        if got != others:
            raise AssertionError(f"{m.name} found {sorted(got)}, expected {sorted(others)}")
    view = [[m.uuid, m.name] for m in members]
    for m in members:
        await m.command("view", members=view)
        await m.wait_for(lambda e: e["event"] == "view_sent")
    for m in members:
        await m.command("send", to=None, payloads=[f"{m.name}-mc-{i}" for i in range(multicasts)])
        for other in members:
            if other is not m:
                payloads = [f"{m.name}-uc-{other.name}-{i}" for i in range(unicasts)]
                await m.command("send", to=other.uuid, payloads=payloads)
    for m in members:
        want = {
            o.uuid: [f"{o.name}-mc-{i}" for i in range(multicasts)]
            + ([] if o is m else [f"{o.name}-uc-{m.name}-{i}" for i in range(unicasts)])
            for o in members
        }
        await m.wait_until(_has_delivered(sum(len(v) for v in want.values())))
        per_sender: dict[str, list[str]] = {}
        for src, payload in m.delivered():
            per_sender.setdefault(src, []).append(payload)
        for src, expected in want.items():
            got_all = per_sender.get(src, [])
            if sorted(got_all) != sorted(expected):
                raise AssertionError(f"{m.name} from {src}: got {got_all}, want {expected}")
            in_order = [p for p in got_all if "-mc-" in p]
            if in_order != [p for p in expected if "-mc-" in p]:
                raise AssertionError(f"{m.name} delivered multicasts from {src} out of order")


def _has_delivered(total: int) -> Callable[[MemberEvents], bool]:
    return lambda member: len(member.delivered()) >= total


def check_tally(name: str, tally: dict[str, Any], want: dict[str, tuple[str, int]]) -> None:
    """Check member ``name`` delivered every burst in ``want`` whole, each message once, in order.

    ``tally`` is the member's `MemberProcess.tally` answer; ``want`` maps each
    burst's prefix to (sender uuid, count). Nothing else may have been
    delivered. Raises AssertionError naming the member and burst otherwise.
    """
    got = {
        prefix: (src, report)
        for src, prefixes in tally["senders"].items()
        for prefix, report in prefixes.items()
    }
    if set(got) != set(want):
        raise AssertionError(f"{name} delivered bursts {sorted(got)}, want {sorted(want)}")
    for prefix, (sender, count) in want.items():
        src, report = got[prefix]
        if src != sender:
            raise AssertionError(f"{name} got burst {prefix!r} from {src}, not {sender}")
        expected = {
            "delivered": count,
            "duplicates": 0,
            "out_of_order": 0,
            "first_disorder": None,
            "next": count,
        }
        if report != expected:
            raise AssertionError(f"{name} burst {prefix!r}: got {report}, want {expected}")


def layer_stats(stats: dict[str, Any], protocol: str) -> dict[str, Any]:
    """The protocol's own stats out of a member's ``stats`` answer."""
    for layer in stats["layers"]:
        if layer["protocol"] == protocol:
            return layer["stats"]  # type: ignore[no-any-return]
    raise KeyError(f"stack has no protocol {protocol!r}")
