"""A replicated key-value store as actors, with state transfer for late joiners.

Run it in two or more terminals on this host::

    python examples/replicated_kv.py --name A
    python examples/replicated_kv.py --name B     # joins later: gets A's data first

Commands (one per line): ``put KEY VALUE``, ``del KEY``, ``get KEY``, ``dump``.
End with Ctrl-D.

Each node is a `KvStore` group actor under a supervisor. A write is
multicast to the group and applied by every member when it is delivered, so
all members apply each writer's updates in the order they were made; reads
are local. A member that joins late (or restarts after a crash) gets the
current data by state transfer before it applies any write.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from triogroups import (
    ActorRef,
    GroupActor,
    Received,
    SimNetwork,
    StackConfig,
    Strategy,
    Supervisor,
)


@dataclass
class Reply:
    """A one-shot answer from the store actor to a local caller."""

    done: trio.Event = field(default_factory=trio.Event)
    value: Any = None

    def set(self, value: Any) -> None:
        self.value = value
        self.done.set()

    async def wait(self) -> Any:
        await self.done.wait()
        return self.value


@dataclass
class Write:
    """Put ``value`` under ``key`` (``value`` None: delete); replied to once applied here."""

    key: str
    value: Any
    reply: Reply = field(default_factory=Reply)


@dataclass
class Read:
    key: str | None  # None: the whole store
    reply: Reply = field(default_factory=Reply)


class KvStore(GroupActor):
    """The replicated dictionary."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.data: dict[str, Any] = {}
        self._tokens = itertools.count()
        self._waiting: dict[int, Reply] = {}

    def get_state(self) -> dict[str, Any]:
        return self.data

    def set_state(self, state: dict[str, Any]) -> None:
        self.data = dict(state)

    async def handle(self, message: Any) -> None:
        if isinstance(message, Write):
            token = next(self._tokens)
            self._waiting[token] = message.reply
            await self.channel.send([message.key, message.value, token])
        elif isinstance(message, Read):
            value = dict(self.data) if message.key is None else self.data.get(message.key)
            message.reply.set(value)

    async def on_message(self, msg: Received) -> None:
        key, value, token = msg.payload
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value
        if msg.src == self.channel.address:
            reply = self._waiting.pop(token, None)
            if reply is not None:
                reply.set(None)


class KvClient:
    """What the rest of the program uses: calls that go through the store's mailbox."""

    def __init__(self, store: ActorRef) -> None:
        self._store = store

    async def put(self, key: str, value: Any) -> None:
        """Write; returns once the write is applied at this node (and sent to all)."""
        request = Write(key, value)
        await self._store.send(request)
        await request.reply.wait()

    async def delete(self, key: str) -> None:
        await self.put(key, None)

    async def get(self, key: str) -> Any:
        request = Read(key)
        await self._store.send(request)
        return await request.reply.wait()

    async def dump(self) -> dict[str, Any]:
        request = Read(None)
        await self._store.send(request)
        result: dict[str, Any] = await request.reply.wait()
        return result


@asynccontextmanager
async def open_kv_node(
    cluster: str,
    stack: StackConfig | str | Path,
    name: str,
    *,
    network: SimNetwork | None = None,
) -> AsyncIterator[KvClient]:
    """Run one node: the store actor, restarted one-for-one if it crashes."""
    spec = KvStore.child_spec("store", cluster, stack, name, network=network)
    supervisor = Supervisor(f"kv-{name}", [spec], strategy=Strategy.ONE_FOR_ONE)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        yield KvClient(supervisor.ref("store"))
        nursery.cancel_scope.cancel()


async def execute(client: KvClient, line: str) -> str | None:
    """Run one command line; the text to print, if any."""
    words = line.strip().split(maxsplit=2)
    if not words:
        return None
    match words:
        case ["put", key, value]:
            await client.put(key, value)
            return None
        case ["del", key]:
            await client.delete(key)
            return None
        case ["get", key]:
            return repr(await client.get(key))
        case ["dump"]:
            return "\n".join(f"{k} = {v!r}" for k, v in sorted((await client.dump()).items()))
    return "commands: put KEY VALUE | del KEY | get KEY | dump"


async def run(cluster: str, stack: str, name: str) -> None:
    async with open_kv_node(cluster, stack, name) as client:
        print(f"* node {name}: {len(await client.dump())} keys after joining", flush=True)
        while line := await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True):
            output = await execute(client, line)
            if output:
                print(output, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="this node's name")
    parser.add_argument("--stack", default="udp", help="preset name or TOML file (default: udp)")
    parser.add_argument("--cluster", default="kv", help="group name (default: kv)")
    args = parser.parse_args(argv)
    trio.run(run, args.cluster, args.stack, args.name)


if __name__ == "__main__":
    main()
