"""The application every chaos member process runs (``triogroups chaos``).

It sends at ``rate`` messages per second, a seeded mix of regular and OOB
multicasts and unicasts to a random member of its view (regular multicasts
``total_order=True`` on a stack with SEQUENCER), and records its
history (`HistoryWriter`, one file per incarnation in ``history_dir``): each
view as soon as it knows it (before the first send in it), each send before
the message goes down, each delivery, and every second a sample of its
resident memory and of the messages each reliability layer holds. On a stack
with SEQUENCER it also runs the lock and counter services and their workload
(`blocks_load`: locks taken and released, a counter incremented, each recorded
for the checker's lock and counter rules), in majority mode or not as the seed
draws it for the whole run. It serves
the control socket (`_control`) the runner drives its DISCARD, DUPL and DELAY
layers with, and prints a progress line (JSON with ``"chaos"``) twice a
second. It runs until the supervisor stops it.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import trio

from triogroups._channel import Channel
from triogroups.blocks import open_counter_service, open_lock_service
from triogroups.chaos._blocks_load import blocks_load
from triogroups.chaos._control import serve_control
from triogroups.testing._history import HistoryWriter
from triogroups.view import View

__all__ = ["chaos_member", "rss_bytes", "windows"]

_PROGRESS_EVERY = 0.5
_SAMPLE_EVERY = 1.0
_TICK = 0.05  # the sender wakes this often and sends what the rate allows
_MIX = (("mcast", 0.6), ("mcast-oob", 0.15), ("unicast", 0.15), ("unicast-oob", 0.1))
_PAGE = os.sysconf("SC_PAGE_SIZE")
_BLOCKS_RATE = 1.0  # lock and counter operations per second (stacks with SEQUENCER)


def rss_bytes() -> int:
    """This process's resident memory now (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return 0


def windows(stats: dict[str, Any]) -> dict[str, int]:
    """The messages each reliability layer holds, from `Stack.stats`."""
    layers = {layer["protocol"]: layer["stats"] for layer in stats["layers"]}
    out = {}
    if "NAKACK2" in layers:
        out["NAKACK2"] = int(layers["NAKACK2"]["retained"])
    if "UNICAST3" in layers:
        u = layers["UNICAST3"]
        out["UNICAST3"] = int(u.get("unacked", 0)) + int(u.get("cache_size", 0))
    if "MCAST" in layers:
        m = layers["MCAST"]
        held = m["send_window"]["size"] + sum(w["size"] for w in m["receive_windows"].values())
        out["MCAST"] = int(held) + int(m["parked_messages"])
    if "DELAY" in layers:
        out["DELAY"] = int(layers["DELAY"]["held"])
    return out


class _Member:
    def __init__(self, ch: Channel, history_dir: str) -> None:
        self.ch = ch
        uuid = f"{ch.address.uuid:032x}"
        self.uuid = uuid
        path = Path(history_dir) / f"{ch.name}-{uuid}.jsonl"
        self.history = HistoryWriter(path, ch.address, time.time, name=f"{ch.name}.{uuid[:6]}")
        self.recorded: View | None = None
        #: SEQUENCER in the stack: regular multicasts go out in the total order
        self.total_order = "SEQUENCER" in ch.stack.config.names()
        self.sent = 0
        self.delivered = 0
        self.port = 0
        self.rss = 0

    async def follow_views(self) -> None:
        """Record every view, in the order the channel installed them."""
        async for view in self.ch.views():
            self.history.view(view)
            self.recorded = view

    async def caught_up(self) -> View:
        """The current view, once it is recorded (so a send is recorded after its view)."""
        for _ in range(1000):
            view = self.ch.view
            if self.recorded is not None and self.recorded.view_id == view.view_id:
                return view
            await trio.sleep(0)
        return self.ch.view

    async def receive(self) -> None:
        async for msg in self.ch:
            self.history.deliver(msg.src, str(msg.payload[0]))
            self.delivered += 1

    async def send(self, rate: float, rng: random.Random) -> None:
        kinds = [k for k, _ in _MIX]
        weights = [w for _, w in _MIX]
        owed = 0.0
        while True:
            await trio.sleep(_TICK)
            owed += rate * _TICK
            while owed >= 1.0:
                owed -= 1.0
                view = await self.caught_up()
                kind = rng.choices(kinds, weights)[0]
                others = [m for m in view.members if m != self.ch.address]
                to = rng.choice(others) if kind.startswith("unicast") and others else None
                oob = kind.endswith("oob")
                total = self.total_order and to is None and not oob
                msg_id = str(self.sent)
                self.history.send(msg_id, to, oob=oob, total=total)
                self.sent += 1
                await self.ch.send([msg_id], to, oob=oob, total_order=total)

    async def sample(self) -> None:
        while True:
            self.rss = rss_bytes()
            self.history.sample(self.rss, windows(self.ch.stack.stats()))
            await trio.sleep(_SAMPLE_EVERY)

    async def report(self) -> None:
        while True:
            line = {
                "chaos": "progress",
                "name": self.ch.name,
                "uuid": self.uuid,
                "port": self.port,
                "sent": self.sent,
                "delivered": self.delivered,
                "view": [m.name for m in self.ch.view.members],
                "view_id": self.ch.view.view_id.id,
                "rss": self.rss,
            }
            print(json.dumps(line), flush=True)
            await trio.sleep(_PROGRESS_EVERY)


async def chaos_member(ch: Channel, history_dir: str, rate: float, seed: int) -> None:
    """Send, deliver, record and obey the control socket; see the module docstring."""
    member = _Member(ch, history_dir)
    rng = random.Random(f"{seed}-{member.uuid}")
    try:
        async with trio.open_nursery() as nursery:
            member.port = await nursery.start(serve_control, ch.stack)
            nursery.start_soon(member.follow_views)
            nursery.start_soon(member.receive)
            nursery.start_soon(member.sample)
            nursery.start_soon(member.report)
            if member.total_order:
                nursery.start_soon(_blocks, member, seed)
            await member.send(rate, rng)
    finally:
        member.history.close()


async def _blocks(member: _Member, seed: int) -> None:
    """The lock and counter services and their workload (one lock mode for the whole run:
    every member draws it from the run's seed)."""
    majority = random.Random(f"{seed}/majority").random() < 0.5
    rng = random.Random(f"{seed}-{member.uuid}-blocks")
    async with (
        open_lock_service(member.ch, majority=majority) as locks,
        open_counter_service(member.ch) as counters,
    ):
        await blocks_load(
            locks,
            counters,
            member.history,
            rng,
            rate=_BLOCKS_RATE,
            view=lambda: member.ch.view,
            caught_up=member.caught_up,
            clock=time.time,
        )
