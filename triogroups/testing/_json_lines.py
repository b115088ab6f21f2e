"""The member side of the JSON lines that the test kit's member processes speak.

Events are JSON lines on stdout with UUIDs as 32 hex digits (`emit`, `uuid_hex`), for both
member programs: `_member_process` (a stack driven by hand, started by
`_processes.MemberProcess`) and `_group_member` (a channel that joins by itself, run by the
process supervisor). `_member_process` also reads its commands as JSON lines on stdin and
takes the options `MemberProcess.start` passes (`member_arguments`, `serve_commands`), and
stops cleanly when stdin closes or on SIGTERM; `_group_member` reads its commands from
`member_commands` and leaves stopping to the supervisor. What the commands mean stays with
each program.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import trio

from triogroups.address import Address

__all__ = ["emit", "member_arguments", "serve_commands", "uuid_hex"]

Command = dict[str, Any]


def emit(event: str, **fields: Any) -> None:
    """Print one event line (flushed: the parent waits on it)."""
    sys.stdout.write(json.dumps({"event": event, **fields}, default=str) + "\n")
    sys.stdout.flush()


def uuid_hex(address: Address) -> str:
    """How events and commands name a member: its UUID as 32 hex digits."""
    return f"{address.uuid:032x}"


def member_arguments(doc: str) -> argparse.ArgumentParser:
    """A parser with the options `MemberProcess.start` gives every member program."""
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    parser.add_argument("--stack", default="udp", help="preset name or TOML file")
    parser.add_argument("--cluster", default="test")
    parser.add_argument("--name", default="")
    parser.add_argument("--props", default="{}", help='JSON: {"LAYER": {"property": value}}')
    return parser


async def _read_commands(handle: Callable[[Command], Awaitable[None]]) -> None:
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    buffer = b""
    async with stdin:
        while True:
            chunk = await stdin.receive_some(65536)
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    await handle(json.loads(line))


async def serve_commands(
    nursery: trio.Nursery,
    signals: AsyncIterator[int] | None,
    handle: Callable[[Command], Awaitable[None]],
) -> None:
    """Await ``handle`` on each command, in order, until stdin closes or a signal comes.

    Either way ``nursery`` (the member's tasks) is cancelled, so the program
    stops and prints ``bye``. ``signals`` is opened by the caller before the
    member starts, so a SIGTERM during start-up is not lost; None leaves
    signals to `open_channel`, as in an application.
    """

    async def stop_on_signal(signals: AsyncIterator[int]) -> None:
        async for _ in signals:
            nursery.cancel_scope.cancel()

    if signals is not None:
        nursery.start_soon(stop_on_signal, signals)
    await _read_commands(handle)
    nursery.cancel_scope.cancel()
