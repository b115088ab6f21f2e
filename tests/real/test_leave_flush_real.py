"""Issue 37: a member process stopped with SIGTERM right after it multicast loses nothing.

Three processes run the shipped udp stack with DISCARD dropping 10% of what arrives at
each. B multicasts, and is stopped with SIGTERM as soon as it says it sent: its channel
leaves gracefully, and the leave flushes (B stays until every member has what it sent).
The others then deliver all of it, in order, although B's process is gone. Every wait is
bounded by a generous deadline; nothing asserts on durations.
"""

from __future__ import annotations

import signal
import uuid
from typing import Any

import pytest
import trio

from tests._members.group_processes import describe, start_group, wait_same_view
from triogroups.testing import free_ports

pytestmark = pytest.mark.real

COUNT = 300
DEADLINE = 90


def _props() -> dict[str, dict[str, Any]]:
    return {
        "UDP": {"mcast_port": free_ports()},
        "DISCARD": {"up_loss": 0.1},
        "GMS": {"join_timeout": 1.0, "view_ack_collection_timeout": 1.0},
    }


async def test_leave_flush_member_stopped_with_sigterm_after_sending_lost_nothing() -> None:
    cluster = f"flush-{uuid.uuid4().hex[:8]}"
    async with trio.open_nursery() as nursery:
        members = await start_group(
            nursery, ["A", "B", "C"], stack="udp", cluster=cluster, props=_props()
        )
        a, b, c = members
        try:
            with trio.fail_after(DEADLINE):
                await wait_same_view(members)
                marks = {m.name: len(m.events) for m in (a, c)}
                sent = len([e for e in b.events if e["event"] == "sent"])
                await b.command("burst", to=None, prefix="L", count=COUNT)
                await b.wait_until(
                    lambda m: len([e for e in m.events if e["event"] == "sent"]) > sent
                )
                b.signal(signal.SIGTERM)
                assert await b.wait() == 0
                expected = [f"L-{i}" for i in range(COUNT)]
                for m in (a, c):

                    def from_b(got: list[tuple[str, str]]) -> list[str]:
                        return [p for src, p in got if src == b.uuid]

                    await m.wait_delivered_since(
                        marks[m.name], lambda got: len(from_b(got)) >= COUNT
                    )
                    assert from_b(m.delivered_since(marks[m.name])) == expected, m.name
        except trio.TooSlowError:
            raise AssertionError(f"not everything B sent arrived: {describe(members)}") from None
        finally:
            for m in members:
                if m.alive:
                    m.kill()
