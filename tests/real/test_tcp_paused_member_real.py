"""A member paused (SIGSTOP) over TCP loses nothing that was multicast to it meanwhile.

With seed 003's NAKACK2, which does not retransmit (``xmit_interval = 0``; the ``tcp``
preset retransmits since, but the mode stays), TCP alone must bring every message: the
transport must not drop what is queued for a member of the view. A chaos run found it did: a
member paused for 4 s while another joined missed the joiner's first multicasts, because the
joiner's connection attempt to it timed out (``sock_conn_timeout``) and the bundles queued
for it were dropped; its window for the joiner then waited for them for ever and it
delivered none of the joiner's later multicasts either. The transport now tries again while
the member is in the view. Real member processes on loopback, the tcp preset in seed 003's
mode (no DISCARD).
"""

from __future__ import annotations

import signal
import uuid
from typing import Any

import pytest
import trio

from tests._members.group_processes import GroupMember, describe, wait_same_view
from triogroups.testing import free_ports

pytestmark = pytest.mark.real


async def test_member_paused_while_another_joins_gets_the_joiners_multicasts() -> None:
    """C is paused while A joins (so A never learns where C listens) and multicasts, for
    four times ``sock_conn_timeout`` (0.5 s), well inside failure detection (30 s):
    resumed, C delivers every one of A's multicasts, those sent while it was paused first,
    in order."""
    base = free_ports(8)
    props = {
        "TCP": {"bind_port": base, "sock_conn_timeout": 0.5},
        "TCPPING": {"initial_hosts": [f"127.0.0.1[{base}]"]},
        "FD_ALL3": {"timeout": 30.0},
        "GMS": {"view_ack_collection_timeout": 0.5},
        "NAKACK2": {"xmit_interval": 0},
    }
    run = f"paused-{uuid.uuid4().hex[:8]}"
    members: list[GroupMember] = []
    try:
        async with trio.open_nursery() as nursery:

            async def start(name: str) -> GroupMember:
                member = await GroupMember.start(
                    nursery, name, stack="tcp", cluster=run, props=props, discard=False
                )
                members.append(member)
                return member

            try:
                with trio.fail_after(120):
                    b = await start("B")
                    c = await start("C")
                    await wait_same_view([b, c])
                    c.signal(signal.SIGSTOP)
                    a = await start("A")
                    everyone = {b.uuid, c.uuid, a.uuid}
                    await a.wait_until(lambda _: a.view_members() == everyone)  # C, paused, too
                    await _multicast_across_the_pause(a, c, [])
            except trio.TooSlowError:
                raise AssertionError(_what_c_got(a, c, members)) from None
            await _stop(members)
    finally:
        _reap(members)


async def test_member_paused_when_a_connection_to_it_times_out_gets_every_multicast() -> None:
    """A knows where C listens, but their connection was retired as idle (``conn_expire_time``
    1 s, nothing periodic in between); C is paused, and A's multicasts open a new connection
    whose hello times out (0.5 s) four times over. Resumed, C delivers all of them, in order."""
    base = free_ports(8)
    props = {
        "TCP": {"bind_port": base, "sock_conn_timeout": 0.5, "conn_expire_time": 1.0},
        "TCPPING": {"initial_hosts": [f"127.0.0.1[{base}]"]},
        "FD_ALL3": {"interval": 30.0, "timeout": 120.0},
        "MERGE3": {"min_interval": 60.0, "max_interval": 120.0},
        "STABLE": {"desired_avg_gossip": 120.0},
        "NAKACK2": {"xmit_interval": 0},  # nothing periodic: the connection goes idle
    }
    run = f"idle-{uuid.uuid4().hex[:8]}"
    members: list[GroupMember] = []
    try:
        async with trio.open_nursery() as nursery:
            try:
                with trio.fail_after(120):
                    for name in "BCA":
                        members.append(
                            await GroupMember.start(
                                nursery, name, stack="tcp", cluster=run, props=props, discard=False
                            )
                        )
                    _, c, a = members
                    await wait_same_view(members)
                    await a.command("send", to=None, payloads=["hello"])
                    await c.wait_delivered_since(0, lambda got: (a.uuid, "hello") in got)
                    while c.name in await _connected(a):  # wait for the idle connection to go
                        await trio.sleep(0.5)
                    c.signal(signal.SIGSTOP)
                    await _multicast_across_the_pause(a, c, ["hello"])
                    assert (await _tcp_stats(a))["connect_retries"] >= 1
            except trio.TooSlowError:
                raise AssertionError(_what_c_got(a, c, members)) from None
            await _stop(members)
    finally:
        _reap(members)


async def _multicast_across_the_pause(a: GroupMember, c: GroupMember, before: list[str]) -> None:
    """With C paused, A multicasts 20 messages; 2 s later (A's attempts to reach C time out
    meanwhile) C resumes and A multicasts 10 more. Returns once C delivered every one of
    A's multicasts, ``before`` first, in order."""
    early = [f"a{i}" for i in range(20)]
    await a.command("send", to=None, payloads=early)
    await trio.sleep(2.0)
    c.signal(signal.SIGCONT)
    late = [f"a{i}" for i in range(20, 30)]
    await a.command("send", to=None, payloads=late)
    from_a = [(a.uuid, p) for p in [*before, *early, *late]]
    await c.wait_delivered_since(0, lambda got: [d for d in got if d[0] == a.uuid] == from_a)


def _what_c_got(a: GroupMember, c: GroupMember, members: list[GroupMember]) -> str:
    got = [p for src, p in c.delivered_since(0) if src == a.uuid]
    return f"C delivered {got} from A; {describe(members)}"


async def _stop(members: list[GroupMember]) -> None:
    for m in members:
        assert await m.stop() == 0, f"{m.name} did not leave cleanly"


def _reap(members: list[GroupMember]) -> None:
    """No member outlives the test, paused or not."""
    for m in members:
        m.signal(signal.SIGCONT)
        m.kill()


async def _tcp_stats(member: GroupMember) -> dict[str, Any]:
    """The member's TCP transport stats, asked for now."""
    seen = len(member.events)
    await member.command("stats")
    await member.wait_until(lambda m: any(e["event"] == "stats" for e in m.events[seen:]))
    stats = next(e for e in member.events[seen:] if e["event"] == "stats")["stats"]
    layer: dict[str, Any] = stats["layers"][0]["stats"]
    return layer


async def _connected(member: GroupMember) -> set[str]:
    """The names of the members ``member`` has a TCP connection to now."""
    return {label.split("#")[0] for label in (await _tcp_stats(member))["connections"]}
