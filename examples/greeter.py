"""A member application for ``triogroups launch``: greets the group and shows what it hears.

    triogroups launch -n 3 examples/greeter.py:member
    triogroups launch -n 3 examples/greeter.py:member 0.5    # greet every 0.5 s

Each member multicasts ``hello from A #k`` every few seconds and prints every greeting it
delivers and every view it installs; kill one (``kill -9 PID``) and watch it come back as a new
incarnation. Ctrl-C stops them all: each leaves the group gracefully.
"""

from __future__ import annotations

import trio

from triogroups import Channel


async def member(ch: Channel, every: str = "2") -> None:
    """Greet every ``every`` seconds; print views and greetings."""

    async def show_views() -> None:
        async for view in ch.views():
            print("view:", ", ".join(m.name for m in view.members))

    async def show_greetings() -> None:
        async for msg in ch:
            print(f"[{msg.src.name}] {msg.payload}")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(show_views)
        nursery.start_soon(show_greetings)
        for k in range(1, 1_000_000):
            await ch.send(f"hello from {ch.name} #{k}")
            await trio.sleep(float(every))
