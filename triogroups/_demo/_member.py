"""The application each member process of the real demo runs (``triogroups demo``).

Once its view has the demo's size, the member multicasts ``count`` numbered messages at
``rate`` per second, then ``done`` (again after a view that may have members who missed it:
see `must_repeat_done`); it records every view it installs (its id and members) with how many
messages it had sent before it, and every message it delivers, and prints a progress line
(JSON with ``"demo"``) every half second. When every member in its view said ``done`` (so it
has delivered what it will get from them), it writes its log (`_check.MemberLog` fields)
to ``logdir`` and prints ``finished``, again after any later change; it stays in the group
(others may still need retransmissions) until the supervisor stops it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from triogroups._channel import Channel
from triogroups.view import MergeView, View

__all__ = ["demo_member", "must_repeat_done"]

_PROGRESS_EVERY = 0.5
_BATCH = 10  # messages sent back to back, then a pause that keeps the rate


def _hex(uuid: int) -> str:
    return f"{uuid:032x}"


def _view_key(view: View) -> str:
    return f"{view.view_id.id}:{_hex(view.view_id.coord.uuid)}"


def must_repeat_done(old: View, new: View) -> bool:
    """Whether a member that finished sending must multicast ``done`` again on ``new``.

    After a join, the joiner missed it. After any merge too, even when no member is new to
    us: a member that our view listed may never have installed that view (its JOIN_RSP came
    after it had given up and started a group of its own), so it dropped our ``done`` as
    traffic from a non-member, and the merge digest starts its window after it.
    """
    return isinstance(new, MergeView) or not set(new.members) <= set(old.members)


class _Run:
    def __init__(self, ch: Channel, count: int) -> None:
        self.ch = ch
        self.count = count
        self.me = _hex(ch.address.uuid)
        self.sent = 0
        self.sending = False  # a send is awaiting: it may already be in the stack
        self.finished_sending = False
        self.views: list[tuple[int, str, list[str]]] = []  # (sent before it, id, members)
        self.delivered: dict[str, list[int]] = {}
        self.names: dict[str, str] = {}
        self.done: dict[str, int] = {}
        self.view: View = ch.view
        self.changed = trio.Event()

    def _pulse(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def follow_views(self) -> None:
        async for view in self.ch.views():
            repeat = must_repeat_done(self.view, view)
            self.view = view
            # A message whose send is still awaiting counts as sent in the previous view: a
            # joiner's digest may already include it, so this view must not claim it.
            self._note_view(self.sent + self.sending)
            for member in view.members:
                self.names[_hex(member.uuid)] = member.name
            self._pulse()
            if repeat and self.finished_sending:
                await self.ch.send(["done", self.count])

    async def receive(self) -> None:
        async for msg in self.ch:
            src = _hex(msg.src.uuid)
            kind, value = msg.payload
            if kind == "m":
                self.delivered.setdefault(src, []).append(int(value))
            else:
                self.done[src] = int(value)
            self._pulse()

    def _view_members(self) -> list[str]:
        return [_hex(m.uuid) for m in self.view.members]

    def _note_view(self, sent_before: int) -> None:
        key = _view_key(self.view)
        if not self.views or self.views[-1][1] != key:
            self.views.append((sent_before, key, self._view_members()))

    async def send_all(self, rate: float) -> None:
        self._note_view(0)
        for seq in range(self.count):
            self.sending = True
            await self.ch.send(["m", seq])
            self.sending = False
            self.sent = seq + 1
            if self.sent % _BATCH == 0:
                await trio.sleep(_BATCH / rate)
        self.finished_sending = True
        await self.ch.send(["done", self.count])

    def complete(self) -> bool:
        """Everyone in the view said done. A done comes after the sender's messages in its
        FIFO order, so whatever of them this member will deliver it has delivered."""
        return all(member in self.done for member in self._view_members())

    def progress(self, event: str = "progress") -> dict[str, Any]:
        stats = self.ch.stack.stats()
        layers = {layer["protocol"]: layer["stats"] for layer in stats["layers"]}
        nak = layers.get("NAKACK2", {})
        return {
            "demo": event,
            "name": self.ch.name,
            "uuid": self.me,
            "view": [m.name for m in self.view.members],
            "sent": self.sent,
            "delivered": {self.names.get(s, s[:6]): len(v) for s, v in self.delivered.items()},
            "xmit_reqs": nak.get("xmit_reqs_sent", 0),
            "done_from": sorted(self.names.get(s, s[:6]) for s in self.done),
            "dropped": layers.get("DISCARD", {}).get("dropped_up", 0),
        }

    async def report(self) -> None:
        while True:
            print(json.dumps(self.progress()), flush=True)
            await trio.sleep(_PROGRESS_EVERY)


async def demo_member(ch: Channel, size: int, count: int, rate: float, logdir: str) -> None:
    """Multicast, deliver, log; see the module docstring."""
    run = _Run(ch, count)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.follow_views)
        nursery.start_soon(run.receive)
        nursery.start_soon(run.report)
        while len(run.view.members) < size:
            await run.changed.wait()
        await run.send_all(rate)
        while True:  # again after a change: a member that joins later sends more
            while not run.complete():
                await run.changed.wait()
            log = {
                "uuid": run.me,
                "name": ch.name,
                "sent": run.sent,
                "views": run.views,
                "delivered": run.delivered,
            }
            (Path(logdir) / f"{run.me}.json").write_text(json.dumps(log))
            print(json.dumps(run.progress("finished")), flush=True)
            await run.changed.wait()
