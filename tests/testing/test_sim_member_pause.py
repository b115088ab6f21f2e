"""`SimMember.pause` / `resume`: a simulated member stopped as SIGSTOP stops a process.

While paused its stack's timers do not fire, its endpoint neither sends nor hands
up what arrives (that waits in the receive buffer, up to ``rx_buffer`` datagrams on
a lossy endpoint), and its application's sends wait; after `resume` it runs on
from virtual now, its overdue timers firing at once.
"""

from __future__ import annotations

from typing import Any

import trio

from triogroups import StackConfig
from triogroups.testing import open_cluster

PLAIN = StackConfig.of("SIM", "DISCARD")  # no retransmission: what is lost stays lost


def _sent(member: Any) -> int:
    return int(member.protocol("SIM").stats()["bundles_sent"])


async def test_a_paused_member_fires_no_timer_and_sends_nothing_until_resumed(
    autojump_clock: Any,
) -> None:
    """FD_ALL3 heartbeats stop while C is paused (its bundles_sent stands still), the
    others remove it, and right after resume its overdue timers fire (it sends again)."""
    async with open_cluster(3, "udp", seed=3) as cluster:
        a, _, c = cluster.members
        await trio.sleep(2)
        before = _sent(c)
        assert before > 0
        c.pause()
        assert c.paused and c.stack.paused
        await trio.sleep(15)
        assert _sent(c) == before
        assert a.view is not None and c.address not in a.view.members
        assert c.view is not None and c.address in c.view.members  # it saw nothing
        c.resume()
        assert not c.paused and not c.stack.paused
        await trio.sleep(0.01)
        assert _sent(c) > before


async def test_what_arrives_while_paused_waits_in_the_receive_buffer(autojump_clock: Any) -> None:
    """B delivers nothing of A's five multicasts while paused, and all five after resume,
    in order: they waited in its socket buffer, as a stopped process's do."""
    async with open_cluster(2, PLAIN, seed=4) as cluster:
        a, b = cluster.members
        b.pause()
        for i in range(5):
            await a.send(f"m{i}".encode())
            await trio.sleep(0.1)
        await trio.sleep(5)
        assert [m.payload for m in b.delivered] == []
        b.resume()
        await trio.sleep(0.1)
        assert [m.payload for m in b.delivered] == [f"m{i}".encode() for i in range(5)]


async def test_a_full_receive_buffer_drops_what_arrives_while_paused(autojump_clock: Any) -> None:
    """A lossy endpoint holds ``rx_buffer`` datagrams while paused and drops the rest
    (counted as dropped_rx_full), as UDP does for a SIGSTOPped process."""
    small = StackConfig.of(("SIM", {"rx_buffer": 3}), "DISCARD")
    async with open_cluster(2, small, seed=5) as cluster:
        a, b = cluster.members
        b.pause()
        for i in range(5):
            await a.send(f"m{i}".encode())
            await trio.sleep(0.1)
        b.resume()
        await trio.sleep(0.1)
        assert [m.payload for m in b.delivered] == [b"m0", b"m1", b"m2"]
        assert b.protocol("SIM").stats()["dropped_rx_full"] == 2


async def test_a_paused_members_send_waits_until_it_is_resumed(autojump_clock: Any) -> None:
    """A paused member's application is stopped too: its send returns only after resume,
    and the message leaves then."""
    async with open_cluster(2, PLAIN, seed=6) as cluster:
        a, b = cluster.members
        a.pause()
        a.pause()  # idempotent
        returned_at: list[float] = []

        async def send() -> None:
            await a.send(b"late")
            returned_at.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            await trio.sleep(3)
            assert returned_at == [] and b.delivered == []
            resumed = trio.current_time()
            a.resume()
            a.resume()  # idempotent
        assert returned_at and returned_at[0] >= resumed
        await trio.sleep(0.1)
        assert [m.payload for m in b.delivered] == [b"late"]
