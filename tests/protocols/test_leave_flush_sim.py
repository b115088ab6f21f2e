"""Graceful leave flushes (issue 37): on the simulated network, in virtual time.

A member that multicasts and then leaves stays in the group until every member of the
next view has what it sent (NAKACK2 stability through STABLE, MCAST acks, UNICAST3
acks), or ``leave_timeout`` runs out. Killed as soon as it reports that it left (as a
process that closed its channel would exit), it has lost nothing for the others.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from triogroups import StackConfig
from triogroups.testing import SimMember, open_cluster, wait_until

#: Virtual seconds a scenario may take: a stuck leave fails the test instead of hanging it.
_GUARD = 120
_N = 20


def _from(member: SimMember, sender: SimMember) -> list[bytes]:
    return [m.payload for m in member.delivered if m.src == sender.address]


async def _left(member: SimMember) -> None:
    """Wait until GMS reported the leave: the moment a closing process would exit."""
    await wait_until(lambda: member.left, timeout=120, interval=0.001)


#: (preset, who leaves, seed). The seeds of the lossy presets are runs that lost some of
#: the leaver's multicasts at a member before issue 37; the simulated TCP loses nothing
#: (the leave lost nothing there either), it checks that the flush ends over TCP too.
_CASES = [
    ("udp", "coordinator", 5),
    ("udp", "participant", 1),
    ("udp", "participant", 5),
    ("udp-mcast", "coordinator", 3),
    ("udp-mcast", "coordinator", 5),
    ("udp-mcast", "participant", 3),
    ("udp-mcast", "participant", 5),
    ("tcp", "coordinator", 1),
    ("tcp", "participant", 1),
    # SEQUENCER answers the flush once what the leaver forwarded came back in the order
    ("udp-total", "coordinator", 5),
    ("udp-total", "participant", 1),
    ("udp-total", "participant", 5),
]


@pytest.mark.parametrize(("preset", "role", "seed"), _CASES)
async def test_leave_flush_member_killed_once_it_left_lost_nothing_for_the_others(
    autojump_clock: Any, preset: str, role: str, seed: int
) -> None:
    """The leaver multicasts N under 10% loss, disconnects at once, and is killed the
    moment it reports that it left: every remaining member delivers all N, and the leave
    reports that it flushed. Before issue 37 a leaving coordinator ended its leave on its
    own LEAVE_RSP 0.05 s after disconnect, and a participant as soon as the view without
    it was installed: what the others had not received by then was lost."""
    with trio.fail_after(_GUARD):
        async with open_cluster(3, preset, seed=seed) as cluster:
            a, b, c = cluster.members
            leaver = a if role == "coordinator" else b
            others = [m for m in (a, b, c) if m is not leaver]
            await trio.sleep(3)
            cluster.network.set_faults(loss=0.1)
            for i in range(_N):
                await leaver.send(b"L-%d" % i)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(leaver.disconnect)
                await _left(leaver)
                leaver.kill()
            await trio.sleep(15)
            expected = [b"L-%d" % i for i in range(_N)]
            assert {m.name: _from(m, leaver) for m in others} == {m.name: expected for m in others}
            assert leaver.protocol("GMS").stats()["leave_flushed"] is True


@pytest.mark.parametrize("preset", ["udp", "udp-mcast"])
async def test_leave_flush_times_out_at_leave_timeout_when_a_member_never_acks(
    autojump_clock: Any, preset: str
) -> None:
    """C receives nothing from B any more (B's messages to C are dropped): B's multicasts
    never become stable at C, so B leaves unflushed once ``leave_timeout`` ran out,
    reports it (`SimMember.disconnect` returns False, ``leave_flushed`` False, one
    ``leaves_unflushed``), and does not leave before."""
    stack = StackConfig.resolve(preset).configure("GMS", leave_timeout=2.0)
    with trio.fail_after(_GUARD):
        async with open_cluster(3, stack, seed=3) as cluster:
            a, b, c = cluster.members
            await trio.sleep(3)
            cluster.network.block(b.address, c.address)
            for i in range(5):
                await b.send(b"B-%d" % i)
            start = trio.current_time()
            flushed = await b.disconnect()
            waited = trio.current_time() - start
            stats = b.protocol("GMS").stats()
            assert flushed is False
            assert stats["leave_flushed"] is False and stats["leaves_unflushed"] == 1
            assert waited >= 2.0
            assert _from(a, b) == [b"B-%d" % i for i in range(5)]
