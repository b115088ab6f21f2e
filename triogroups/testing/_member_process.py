"""A member in a process of its own, driven by JSON lines: for real-socket tests.

Run as ``python -m triogroups.testing._member_process --stack udp --cluster c
--name A [--props '{"UDP": {"mcast_port": 45000}}']``. It runs one `Stack`
and speaks JSON lines: commands on stdin, events on stdout.

Commands::

    {"cmd": "find", "timeout": 2.0}                 FindMembers down the stack
    {"cmd": "view", "members": [[uuid, name], ...]}  install a view (first = coordinator)
    {"cmd": "send", "to": uuid | null, "payloads": ["..", ...]}
    {"cmd": "hosts", "hosts": [[ip, port], ...]}     SetPhysicalAddresses down the stack
    {"cmd": "stats"}

Events: ``ready`` (uuid, name, physical), ``found`` (members), ``view_sent``,
``sent``, ``deliver`` (msgs: [[src uuid, payload], ...], one line per batch),
``stats`` and ``bye``. UUIDs are 32 hex digits. The process exits cleanly,
with status 0, when stdin closes or on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any

import trio

from triogroups.address import Address
from triogroups.config import StackConfig
from triogroups.events import (
    FindMembers,
    LocalPhysicalAddress,
    MembersFound,
    SetPhysicalAddresses,
    ViewChange,
)
from triogroups.message import Message
from triogroups.stack import Stack
from triogroups.view import View

__all__ = ["main"]


def _emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}, default=str) + "\n")
    sys.stdout.flush()


def _address(entry: list[str]) -> Address:
    return Address(int(entry[0], 16), entry[1] if len(entry) > 1 else "")


def _hex(address: Address) -> str:
    return f"{address.uuid:032x}"


class _Member:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.known: dict[str, Address] = {}

    async def read_stack(self) -> None:
        async for item in self.stack.deliveries:
            if type(item) is list:
                msgs = [[_hex(m.src) if m.src else None, m.payload.decode()] for m in item]
                _emit("deliver", msgs=msgs)
            elif isinstance(item, LocalPhysicalAddress):
                me = self.stack.address
                _emit("ready", uuid=_hex(me), name=me.name, physical=list(item.physical))
            elif isinstance(item, MembersFound):
                members = []
                for data in item.responses:
                    self.known[_hex(data.address)] = data.address
                    members.append(
                        {
                            "uuid": _hex(data.address),
                            "name": data.address.name,
                            "physical": list(data.physical),
                            "is_coord": data.is_coord,
                        }
                    )
                _emit("found", members=members)

    async def read_commands(self) -> None:
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
                        await self.command(json.loads(line))

    async def command(self, cmd: dict[str, Any]) -> None:
        kind = cmd["cmd"]
        if kind == "find":
            await self.stack.send(FindMembers(float(cmd["timeout"])))
        elif kind == "view":
            members = [_address(m) for m in cmd["members"]]
            await self.stack.send(ViewChange(View.create(members[0], 1, members)))
            _emit("view_sent")
        elif kind == "hosts":
            hosts = tuple((str(h), int(p)) for h, p in cmd["hosts"])
            await self.stack.send(SetPhysicalAddresses(hosts))
        elif kind == "send":
            to = cmd.get("to")
            dest = None if to is None else self.known.get(to) or Address(int(to, 16))
            await self.stack.send([Message(dest, p.encode()) for p in cmd["payloads"]])
            _emit("sent", count=len(cmd["payloads"]))
        elif kind == "stats":
            _emit("stats", stats=self.stack.stats())
        else:
            _emit("error", detail=f"unknown command {kind!r}")


async def _run(args: argparse.Namespace) -> None:
    config = StackConfig.resolve(args.stack)
    for layer, props in json.loads(args.props).items():
        config = config.configure(layer, **props)
    stack = Stack(config, args.cluster, args.name)
    member = _Member(stack)
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(stack.run)
            nursery.start_soon(member.read_stack)

            async def stop_on_signal() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()

            nursery.start_soon(stop_on_signal)
            await member.read_commands()
            nursery.cancel_scope.cancel()
    _emit("bye")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--stack", default="udp", help="preset name or TOML file")
    parser.add_argument("--cluster", default="test")
    parser.add_argument("--name", default="")
    parser.add_argument("--props", default="{}", help='JSON: {"LAYER": {"property": value}}')
    trio.run(_run, parser.parse_args(argv))


if __name__ == "__main__":
    main()
