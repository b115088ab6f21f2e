"""A terminal chat between processes: every line you type goes to everyone in the group.

Run it in two or more terminals on this host::

    python examples/chat.py --name A
    python examples/chat.py --name B
    python examples/chat.py --name C

Lines from the others show up as ``[B] hello``, membership changes as
``* view: A, B, C``. End with Ctrl-D (you leave the group gracefully).
``--stack`` takes a preset name ("udp", the default, or "tcp") or a TOML
stack file; every member of a group must use the same stack (members on
"udp" and on "tcp" never meet).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Callable

import trio

from triogroups import Channel, open_channel


async def chat(ch: Channel, lines: AsyncIterator[str], show: Callable[[str], None]) -> None:
    """Send every line to the group and show what the others say; return at the end of input."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(show_messages, ch, show)
        nursery.start_soon(show_views, ch, show)
        async for line in lines:
            text = line.strip()
            if text:
                await ch.send(text)
        nursery.cancel_scope.cancel()


async def show_messages(ch: Channel, show: Callable[[str], None]) -> None:
    async for msg in ch:
        if msg.src != ch.address:
            show(f"[{msg.src.name}] {msg.payload}")


async def show_views(ch: Channel, show: Callable[[str], None]) -> None:
    async for view in ch.views():
        show(f"* view: {', '.join(member.name for member in view.members)}")


async def stdin_lines() -> AsyncIterator[str]:
    """Lines typed on stdin, read in a thread so the group keeps running meanwhile."""
    while True:
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        if not line:
            return
        yield line


def show_now(text: str) -> None:
    print(text, flush=True)


async def run(cluster: str, stack: str, name: str) -> None:
    async with open_channel(cluster, stack, name) as ch:
        show_now(f"* {ch.name} joined {cluster}; type lines to send, Ctrl-D to leave")
        await chat(ch, stdin_lines(), show_now)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="your name in the chat")
    parser.add_argument("--stack", default="udp", help="preset name or TOML file (default: udp)")
    parser.add_argument("--cluster", default="chat", help="group name (default: chat)")
    args = parser.parse_args(argv)
    trio.run(run, args.cluster, args.stack, args.name)


if __name__ == "__main__":
    main()
