"""The command channel and the state object of a process group with real member processes:
`ProcessGroup.send` in the test, `member_commands` in the member (issue 13: the test kit's
members take commands through the supervisor, not a launcher of their own)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
import trio
from supervisor_kit import STEP, fast_udp

from triogroups import Channel, member_commands, open_process_group
from triogroups.testing import wait_until

pytestmark = pytest.mark.real


async def echo(ch: Channel) -> None:
    """Print every command as ``got <json>``; ``{"say": text}`` is also multicast, and
    every member prints what it delivers as ``delivered <text>``."""

    async def deliveries() -> None:
        async for msg in ch:
            print("delivered", msg.payload.decode(), flush=True)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(deliveries)
        async for command in member_commands():
            print("got", json.dumps(command, sort_keys=True), flush=True)
            if isinstance(command, dict) and "say" in command:
                await ch.send(command["say"].encode())


class Lines:
    """Every member's output lines, by name, and a way to wait for one."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[str]] = defaultdict(list)
        self._changed = trio.Event()

    def __call__(self, name: str, line: str) -> None:
        self.by_name[name].append(line)
        self._changed.set()
        self._changed = trio.Event()

    def got(self, name: str) -> list[Any]:
        return [json.loads(x[4:]) for x in self.by_name[name] if x.startswith("got ")]

    async def changed(self) -> None:
        await self._changed.wait()

    async def wait(self, name: str, count: int) -> list[Any]:
        with trio.fail_after(STEP):
            while len(self.got(name)) < count:
                await self.changed()
        return self.got(name)


async def test_commands_reach_their_member_in_order_and_only_its_incarnation() -> None:
    """Commands to A arrive at A only, in the order sent, as the JSON values sent; the app
    acts on them (a multicast that B delivers). A restarted A starts with an empty channel:
    it gets what is sent after the restart, nothing of before."""
    lines = Lines()
    async with open_process_group(echo, 2, stack=fast_udp(), output=lines) as group:
        with trio.fail_after(STEP):
            await group.wait_for_view(2)
        sent: list[Any] = [{"n": i, "text": "line\nbreak"} for i in range(50)]
        sent += [[1, 2.5, None, True], "plain", {"say": "hello b"}]
        for command in sent:
            await group.send("A", command)
        assert await lines.wait("A", len(sent)) == sent
        assert lines.got("B") == []
        await wait_until(lambda: "delivered hello b" in lines.by_name["B"], timeout=STEP)
        await group.restart("A")
        lines.by_name["A"].clear()
        await group.send("A", {"after": "restart"})
        assert await lines.wait("A", 1) == [{"after": "restart"}]


async def test_send_refuses_what_json_cannot_carry_and_members_not_running() -> None:
    """TypeError for a value JSON cannot carry (nothing is sent); RuntimeError for an
    unknown member (KeyError) and, once the group ended, for a member that ended."""
    lines = Lines()
    async with open_process_group(echo, 1, stack=fast_udp(), output=lines) as group:
        with pytest.raises(TypeError, match="command must be plain JSON data"):
            await group.send("A", {"bytes": b"raw"})
        with pytest.raises(TypeError, match="command must be plain JSON data"):
            await group.send("A", float("nan"))
        with pytest.raises(KeyError, match="no member 'Z'"):
            await group.send("Z", 1)
        await group.send("A", "first")
        assert await lines.wait("A", 1) == ["first"]
    with pytest.raises(RuntimeError, match="has ended"):
        await group.send("A", "too late")


def test_member_commands_outside_a_member_process_is_an_error() -> None:
    """Only a member that a process group started has a command channel."""
    with pytest.raises(RuntimeError, match="only in a member of a process group"):
        member_commands()


async def test_state_object_reaches_the_app_and_a_joiner_gets_the_groups_state() -> None:
    """``state=`` is given to each member's `open_channel` and, being the same object as in
    ``args``, is what the app updates: a member added later starts with the notes the
    group took before it joined."""
    from member_apps import Notes, take_notes

    lines = Lines()
    notes = Notes()
    async with open_process_group(
        take_notes, 1, stack=fast_udp(), args=(notes,), state=notes, output=lines
    ) as group:
        for note in ("one", "two"):
            await group.send("A", note)
        with trio.fail_after(STEP):
            while 'notes ["one", "two"]' not in lines.by_name["A"]:
                await lines.changed()
        await group.add_member("B")
        with trio.fail_after(STEP):
            while not any(x.startswith("started with") for x in lines.by_name["B"]):
                await lines.changed()
        assert 'started with ["one", "two"]' in lines.by_name["B"]
