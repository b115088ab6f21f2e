"""Test-kit gap (issue 12): a test can wait until the layers accepted what a member sent.

`SimMember.send` returns once the batch is queued at the top of the stack, so a sender
held back by MCAST's window or by credits looks unblocked for its first sends.
``send(..., wait_accepted=True)`` and `SimMember.accepted` wait until every layer took it.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio

from triogroups import StackConfig
from triogroups.testing import check_histories, open_cluster, read_histories

MCAST_4 = StackConfig.of("SIM", ("MCAST", {"capacity": 4, "xmit_interval": 0.1}))
UFC_SMALL = StackConfig.of("SIM", ("UFC", {"max_credits": 2000, "min_threshold": 0.4}))


async def test_sends_beyond_mcast_window_return_queued_but_are_not_accepted_until_acked(
    autojump_clock: object,
) -> None:
    async with open_cluster(2, MCAST_4, seed=5) as cluster:
        a, b = cluster.members
        cluster.network.partition([a.address], [b.address])
        for i in range(6):  # all return at once: they are queued, not accepted
            await a.send(f"m{i}".encode())
        with trio.move_on_after(5) as waited:
            await a.accepted()
        assert waited.cancelled_caught, "MCAST holds 2 of 6 messages while its window is full"
        assert a.stack.sends_pending()
        assert a.protocol("MCAST").stats()["msgs_sent"] < 6
        cluster.network.heal()
        with trio.fail_after(30):
            await a.accepted()
        assert not a.stack.sends_pending()
        assert a.protocol("MCAST").stats()["msgs_sent"] == 6
        await cluster.wait_until_delivered()


async def test_send_with_wait_accepted_returns_only_once_the_window_took_it(
    autojump_clock: object,
) -> None:
    async with open_cluster(2, MCAST_4, seed=6) as cluster:
        a, b = cluster.members
        for i in range(4):
            await a.send(f"fill{i}".encode(), wait_accepted=True)
        mcast = a.protocol("MCAST")
        assert mcast.stats()["msgs_sent"] == 4
        cluster.network.partition([a.address], [b.address])
        accepted = 0
        for i in range(8):
            with trio.move_on_after(5) as waited:
                await a.send(f"more{i}".encode(), wait_accepted=True)
            if waited.cancelled_caught:
                break
            accepted += 1
            # returned: MCAST has passed every message so far down to the transport
            assert mcast.stats()["msgs_sent"] == 4 + accepted
        assert waited.cancelled_caught, "no acks in the partition: the window fills"
        assert mcast.stats()["msgs_sent"] == 4 + accepted
        cluster.network.heal()
        with trio.fail_after(30):
            await a.send(b"after", wait_accepted=True)
        await cluster.wait_until_delivered()


async def test_a_sender_without_credits_is_not_accepted_until_credits_come(
    autojump_clock: object,
) -> None:
    async with open_cluster(2, UFC_SMALL, seed=7) as cluster:
        a, b = cluster.members
        cluster.network.partition([a.address], [b.address])
        for i in range(5):
            await a.send(b"x" * 500 + f"{i}".encode(), to=b.address)
        with trio.move_on_after(5) as waited:
            await a.accepted()
        assert waited.cancelled_caught, "UFC holds what exceeds its 2000 bytes of credits"
        cluster.network.heal()
        with trio.fail_after(60):
            await a.accepted()


async def test_send_cancelled_while_the_window_is_full_is_taken_back_from_log_and_history(
    autojump_clock: object, tmp_path: Path
) -> None:
    """Campaign udp-mcast 2204: a send is recorded before it goes down; one cancelled while
    MCAST's full window holds it back at the top of the stack sent nothing, so the log
    and the history take it back (``unsent``) and nothing is owed for it."""
    async with open_cluster(2, MCAST_4, seed=5, history=tmp_path) as cluster:
        a, b = cluster.members
        cluster.network.partition([a.address], [b.address])
        for i in range(20):  # no acks: the window fills, then a batch waits at the top
            with trio.move_on_after(5) as waited:
                await a.send_many([f"m{i}a".encode(), f"m{i}b".encode()])
            if waited.cancelled_caught:
                break
        assert waited.cancelled_caught, "no acks in the partition: the window fills"
        cluster.network.heal()
        await cluster.wait_until_delivered()
    lines = [json.loads(t) for t in next(tmp_path.glob("A-*.jsonl")).read_text().splitlines()]
    assert [r["id"] for r in lines if r["k"] == "unsent"] == [f"m{i}a", f"m{i}b"]
    delivered = {r["id"] for r in lines if r["k"] == "deliver"}
    assert f"m{i}a" not in delivered and f"m{i - 1}b" in delivered
    assert check_histories(read_histories(tmp_path)) == []


async def test_a_killed_member_takes_its_parked_multicasts_back_from_log_and_history(
    autojump_clock: object, tmp_path: Path
) -> None:
    """Campaign udp-mcast 51305: a multicast MCAST parks for room was taken (its send
    returned) but never numbered or sent, so a process killed then loses it, as it loses
    the sends still waiting above the stack. The history says ``unsent`` for both kinds,
    and the checker owes nothing for them, not even to the sender itself."""
    async with open_cluster(2, MCAST_4, seed=5, history=tmp_path) as cluster:
        a, b = cluster.members
        cluster.network.partition([a.address], [b.address])
        for i in range(6):  # a window of 4 takes 3 (S - low >= capacity); 3 are parked
            await a.send(f"m{i}".encode())
        await trio.sleep(1)  # the layers take what the sends queued
        parked = [m.payload for m in a.protocol("MCAST").parked()]
        assert parked == [b"m3", b"m4", b"m5"]
        await trio.sleep(5)
        a.kill()
        cluster.network.heal()
        await trio.sleep(5)
    lines = [json.loads(t) for t in next(tmp_path.glob("A-*.jsonl")).read_text().splitlines()]
    assert [r["id"] for r in lines if r["k"] == "unsent"] == ["m3", "m4", "m5"]
    assert check_histories(read_histories(tmp_path)) == []
