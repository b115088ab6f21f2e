"""Issue 6: membership with real member processes over UDP and TCP on loopback.

Five processes run the shipped udp or tcp stack (with DISCARD above the
transport) and join by themselves through discovery and GMS. One scenario
kills members with SIGKILL (a non-coordinator, then the coordinator) and
lets a late joiner take the state; the other splits the group with DISCARD
and heals it into one MergeView. Failure detection and the membership
timers are set short (`FAST`) so each step takes seconds; every wait is
bounded by a generous deadline and nothing asserts on durations.
"""

from __future__ import annotations

import functools
import signal
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from tests._members.group_processes import (
    GroupMember,
    describe,
    start_group,
    wait_same_view,
)
from tests._members.processes import layer_stats
from triogroups.testing import free_ports

pytestmark = pytest.mark.real

#: Fast failure detection and short membership timers (seconds).
FAST: dict[str, dict[str, Any]] = {
    "FD_ALL3": {"interval": 0.5, "timeout": 3.0},
    "VERIFY_SUSPECT": {"timeout": 1.0},
    "GMS": {
        "join_timeout": 1.0,
        "view_ack_collection_timeout": 1.0,
        "leave_timeout": 1.0,
        "merge_timeout": 3.0,
    },
    "MERGE3": {"min_interval": 0.5, "max_interval": 1.0, "check_interval": 2.0},
}

JOIN_BURSTS = 10  # rounds of multicasts sent while the late joiner joins
STEP_TIMEOUT = 60  # per step; a quiet machine needs a few seconds


def _props(stack: str, members: int) -> dict[str, dict[str, Any]]:
    """`FAST` plus ports of this run's own, so parallel runs on this host never meet."""
    if stack == "udp":
        return {**FAST, "UDP": {"mcast_port": free_ports()}}
    base = free_ports(members + 6)
    return {
        **FAST,
        "TCP": {"bind_port": base, "port_range": members + 5},
        "TCPPING": {
            "initial_hosts": [f"127.0.0.1[{base + i}]" for i in range(members)],
            "port_range": 0,
        },
        # DISCARD below NAKACK2 may lose multicasts: TCP alone no longer retransmits them
        "NAKACK2": {"xmit_interval": 0.5},
    }


@asynccontextmanager
async def _step(name: str, members: Sequence[GroupMember]) -> AsyncIterator[None]:
    """A deadline for one step; on timeout, say which step and what every member saw."""
    try:
        with trio.fail_after(STEP_TIMEOUT):
            yield
    except trio.TooSlowError:
        raise AssertionError(f"step {name!r} timed out: {describe(members)}") from None


@asynccontextmanager
async def _processes() -> AsyncIterator[tuple[trio.Nursery, list[GroupMember]]]:
    """A nursery for member processes; every member still running is killed on exit."""
    members: list[GroupMember] = []
    try:
        async with trio.open_nursery() as nursery:
            yield nursery, members
            for m in members:
                if m.alive:
                    assert await m.stop() == 0, f"{m.name} did not leave cleanly"
    finally:
        for m in members:
            m.kill()


async def _multicast_and_check(
    senders: Sequence[GroupMember], receivers: Sequence[GroupMember], tag: str, count: int
) -> None:
    """Each sender multicasts ``count`` messages; every receiver delivers all, in send order."""
    marks = {r.name: len(r.events) for r in receivers}
    for s in senders:
        await s.command("burst", to=None, prefix=f"{tag}-{s.name}", count=count)
    total = count * len(senders)

    def tagged(got: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(src, p) for src, p in got if p.startswith(f"{tag}-")]

    for r in receivers:
        got = tagged(
            await r.wait_delivered_since(marks[r.name], lambda got: len(tagged(got)) >= total)
        )
        for s in senders:
            from_s = [p for src, p in got if src == s.uuid]
            assert from_s == [f"{tag}-{s.name}-{i}" for i in range(count)], (r.name, s.name)


async def _unicast_and_check(members: Sequence[GroupMember], tag: str) -> None:
    """Every member sends one unicast to every other; each arrives, from the right sender."""
    marks = {m.name: len(m.events) for m in members}
    for s in members:
        for r in members:
            if r is not s:
                await s.command("send", to=r.uuid, payloads=[f"{tag}-{s.name}-{r.name}"])
    for r in members:
        want = {(s.uuid, f"{tag}-{s.name}-{r.name}") for s in members if s is not r}
        got = await r.wait_delivered_since(marks[r.name], functools.partial(_holds, want))
        assert len([p for _, p in got if p.startswith(f"{tag}-")]) == len(want), r.name


def _holds(want: set[tuple[str, str]], got: list[tuple[str, str]]) -> bool:
    return want <= set(got)


@pytest.mark.parametrize("stack", ["udp", "tcp"])
async def test_five_processes_survive_sigkills_and_a_late_joiner_gets_state_and_messages(
    stack: str,
) -> None:
    """(a) five join one view; (b) a killed participant leaves the same new view at the four
    others; (c) a killed coordinator is replaced by the next member; (e) a late joiner gets
    the state set before it joined and every message sent after its join."""
    cluster = f"mem-{uuid.uuid4().hex[:8]}"
    props = _props(stack, 6)
    async with _processes() as (nursery, members):
        async with _step("five join", members):
            members += await start_group(
                nursery, "ABCDE", stack=stack, cluster=cluster, props=props
            )
            view = await wait_same_view(members)
        assert view["coord"] == members[0].uuid

        async with _step("multicast in the first view", members):
            await _multicast_and_check(members, members, "v1", 10)

        order = {m.uuid: m for m in members}
        victim = order[view["members"][-1][0]]
        victim.signal(signal.SIGKILL)
        survivors = [m for m in members if m is not victim]
        async with _step("participant killed", members):
            after_kill = await wait_same_view(survivors)
        assert after_kill["id"][0] > view["id"][0]
        assert after_kill["coord"] == view["coord"]

        coord = order[after_kill["coord"]]
        heir = after_kill["members"][1][0]
        coord.signal(signal.SIGKILL)
        survivors = [m for m in survivors if m is not coord]
        async with _step("coordinator killed", members):
            after_coord = await wait_same_view(survivors)
        assert after_coord["coord"] == heir
        assert after_coord["id"][0] > after_kill["id"][0]

        async with _step("multicast before the late joiner", members):
            await _multicast_and_check(survivors, survivors, "pre", 10)
        before_join = set(survivors[0].delivered())

        async with _step("late joiner", members):
            async with trio.open_nursery() as joining:

                async def join_late() -> None:
                    late = await GroupMember.start(
                        nursery, "F", stack=stack, cluster=cluster, props=props
                    )
                    members.append(late)

                joining.start_soon(join_late)
                for burst in range(JOIN_BURSTS):  # multicasts racing with the join
                    for s in survivors:
                        await s.command("burst", to=None, prefix=f"during{burst}-{s.name}", count=5)
                    await trio.sleep(0.1)
            late = members[-1]
            await wait_same_view([*survivors, late])
        state = late.state()
        assert state is not None and before_join <= set(state)

        async with _step("multicast after the late join", members):
            await _multicast_and_check(survivors, [*survivors, late], "post", 20)
        _check_state_then_deliveries(late, survivors[0])


def _check_state_then_deliveries(late: GroupMember, old: GroupMember) -> None:
    """State transfer's guarantee: per sender, the late joiner's state holds a prefix of
    the multicasts an old member delivered and it delivers exactly the rest, in order."""
    state = late.state() or []
    delivered = late.delivered()
    for sender in {src for src, _ in old.delivered()}:
        everything = [p for src, p in old.delivered() if src == sender]
        held = [p for src, p in state if src == sender]
        got = [p for src, p in delivered if src == sender]
        assert held + got == everything, (sender, held, got)


@pytest.mark.parametrize("stack", ["udp", "tcp"])
async def test_five_processes_split_by_discard_and_heal_into_one_merge_view(stack: str) -> None:
    """(a) five join one view; (d) DISCARD splits {A,B} | {C,D,E} into two views; healed,
    all five install one MergeView whose subgroups are the two sides, and multicasts and
    unicasts sent after it reach everyone; a member sent SIGTERM leaves gracefully (through
    `open_channel`'s own signal handling, as an application does: exit status 143, and the
    view comes from its leave, not from a suspicion)."""
    cluster = f"mem-{uuid.uuid4().hex[:8]}"
    props = _props(stack, 5)
    async with _processes() as (nursery, members):
        async with _step("five join", members):
            members += await start_group(
                nursery, "ABCDE", stack=stack, cluster=cluster, props=props
            )
            await wait_same_view(members)

        left, right = members[:2], members[2:]
        async with _step("partition", members):
            for side, other in ((left, right), (right, left)):
                for m in side:
                    await m.command("partition", members=[o.uuid for o in other])
                    await m.wait_for(lambda e: e["event"] == "partitioned")
            left_view = await wait_same_view(left)
            right_view = await wait_same_view(right)

        async with _step("heal and merge", members):
            for m in members:
                await m.command("heal")
            merged = await wait_same_view(members, check=lambda v: bool(v["merge"]))
        subgroups = {tuple(g["id"]): {u for u, _ in g["members"]} for g in merged["subgroups"]}
        assert subgroups == {
            tuple(left_view["id"]): {m.uuid for m in left},
            tuple(right_view["id"]): {m.uuid for m in right},
        }

        async with _step("messages after the merge", members):
            await _multicast_and_check(members, members, "merged", 10)
            await _unicast_and_check(members, "uc")

        # the leaver is a participant: whichever side's member leads the merge coordinates
        coord = next(m for m in members if m.uuid == merged["coord"])
        leaver = next(m for m in reversed(members) if m is not coord)
        survivors = [m for m in members if m is not leaver]
        suspects = [layer_stats(await m.stats(), "GMS").get("suspects", 0) for m in survivors]
        leaves = layer_stats(await coord.stats(), "GMS").get("leaves", 0)
        leaver.signal(signal.SIGTERM)
        async with _step("SIGTERM leaves gracefully", members):
            await wait_same_view(survivors)
            assert await leaver.wait() == 0
            await leaver.wait_for(lambda e: e["event"] == "bye")
        # the view came from the leave (issue 12 item 7), not from failure detection
        assert layer_stats(await coord.stats(), "GMS")["leaves"] == leaves + 1
        after = [layer_stats(await m.stats(), "GMS").get("suspects", 0) for m in survivors]
        assert after == suspects
