"""Member applications the supervisor tests launch by name (``member_apps.py:views``)."""

from __future__ import annotations

import json
import logging
from typing import Any

import trio

from triogroups import Channel


async def views(ch: Channel, *args: str) -> None:
    """Print every installed view as ``view A,B,C`` until stopped."""
    async for view in ch.views():
        print("view", ",".join(m.name for m in view.members), flush=True)


async def crash(ch: Channel) -> None:
    """Fail at once, every time: a member that can never start."""
    print(f"{ch.name} is about to fail", flush=True)
    raise RuntimeError("boom at start-up")


async def echo_args(ch: Channel, *args: str) -> None:
    """Print the arguments the member got, as JSON, and end (exit status 0)."""
    print("args", json.dumps(args), flush=True)


async def logs(ch: Channel) -> None:
    """Log one warning and print one plain line, then wait to be stopped."""
    logging.getLogger("app").warning("hello from %s", ch.name)
    print("a plain line", flush=True)
    await trio.sleep_forever()


async def returns(ch: Channel) -> None:
    """End at once, normally: the member leaves and exits with status 0."""
    print(f"{ch.name} is done", flush=True)


class Notes:
    """A replicated list of notes: the state a joining member receives."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def get_state(self) -> list[str]:
        return list(self.notes)

    def set_state(self, state: list[str]) -> None:
        self.notes = list(state)


async def take_notes(ch: Channel, notes: Notes) -> None:
    """Print the notes this member started with; a command adds a note to every member's
    (as a multicast); prints ``notes [...]`` after each."""
    from triogroups import member_commands

    print("started with", json.dumps(notes.notes), flush=True)

    async def apply() -> None:
        async for msg in ch:
            notes.notes.append(msg.payload.decode())
            print("notes", json.dumps(notes.notes), flush=True)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(apply)
        async for command in member_commands():
            await ch.send(str(command).encode())


async def bare(stack: Any) -> None:
    """A member on a bare stack: print its layers, its address and an environment mark."""
    import os

    layers = ",".join(p.name for p in stack.protocols)
    print("layers", layers, "address", stack.address, flush=True)
    print("mark", os.environ.get("TRIOGROUPS_TEST_MARK", "-"), flush=True)
    await trio.sleep_forever()
