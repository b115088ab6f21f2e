"""The parent side of the test kit's member processes, which run on the process supervisor.

Each member is the one member of a process group of its own (`open_process_group`, never
restarted), so the real-socket tests launch, stop, kill and command members through the
product's supervisor: its pipes, its graceful stop, its parent-death watch. `MemberEvents`
is what a test sees of a member: the JSON events it printed (they come back as its output
lines) and the commands it takes (`ProcessGroup.send`). `SupervisedMember` runs it;
`MemberProcess` runs `member_process.stack_member` on a bare stack (optionally behind a
launcher such as ``ip netns exec NS``), `group_processes.GroupMember` a channel. Waits are
bounded by the caller's deadlines (``trio.fail_after``), never by sleeps.
"""

from __future__ import annotations

import functools
import json
import signal
from collections.abc import Callable, Sequence
from typing import Any, Self

import trio

from tests._members.member_process import stack_member
from triogroups.actors import Restart
from triogroups.config import StackConfig
from triogroups.supervisor import MemberExited, ProcessGroup, open_process_group

__all__ = [
    "MemberEvents",
    "MemberProcess",
    "SupervisedMember",
    "check_tally",
    "exchange_and_check",
    "layer_stats",
]


class MemberEvents:
    """The events a member has printed so far, and the commands to it: what a test sees of a
    member (see the module)."""

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


class SupervisedMember(MemberEvents):
    """A member run as the one member of a process group of its own (see the module)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.returncode: int | None = None
        self._group: ProcessGroup | None = None
        self._leave = trio.Event()
        self._ended = trio.Event()

    async def _launch(self, nursery: trio.Nursery, app: Any, **options: Any) -> None:
        """Start the member (``open_process_group(app, **options)``) and wait for ``ready``."""
        await nursery.start(functools.partial(self._run, app, **options))
        self._ready(await self.wait_for(lambda e: e["event"] in ("ready", "eof")))

    async def _run(self, app: Any, *, task_status: trio.TaskStatus[None], **options: Any) -> None:
        try:
            async with open_process_group(
                app,
                names=[self.name],
                restart=Restart.TEMPORARY,
                output=self._output,
                **options,
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
    def alive(self) -> bool:
        return not self._ended.is_set()

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the member's process (SIGKILL: it dies; SIGTERM: it stops)."""
        if self._group is not None and not self._ended.is_set():
            self._group.kill(self.name, signum)

    async def wait(self) -> int:
        """The member's exit status, once its process ended."""
        await self._ended.wait()
        assert self.returncode is not None
        return self.returncode

    async def stop(self) -> int:
        """Stop the member as the supervisor does (SIGTERM, SIGKILL after its stop_timeout);
        its exit status."""
        self._leave.set()
        return await self.wait()

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self._leave.set()


class MemberProcess(SupervisedMember):
    """One `member_process` member (a bare stack) and the events it has printed so far."""

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
    ) -> MemberProcess:
        """Launch a member and return once it printed ``ready``.

        ``props`` are applied to ``stack`` ({"LAYER": {"property": value}}); ``prefix``
        is the launcher its command runs behind. With ``tally`` the member counts
        deliveries instead of printing them (see `tally`); `delivered` then stays empty.
        """
        config = StackConfig.resolve(stack)
        for layer, values in (props or {}).items():
            config = config.configure(layer, **values)
        member = cls(name)
        await member._launch(
            nursery,
            stack_member,
            stack=config,
            cluster=cluster,
            args=(tally,),
            bare=True,
            launcher=prefix,
        )
        return member


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
