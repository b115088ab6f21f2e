"""Three member processes on loopback exchange unicasts and multicasts, over UDP and TCP.

No reliability layers yet: a lossless loopback run must deliver everything,
multicasts in send order per sender. Discovery is real too: PING over
multicast for UDP, TCPPING over the members' listed ports for TCP.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from tests._members.processes import MemberProcess, exchange_and_check
from triogroups.testing import free_ports

pytestmark = pytest.mark.real

STACKS = Path(__file__).parent / "stacks"  # transport and discovery only


def udp_props() -> dict[str, dict[str, Any]]:
    return {"UDP": {"mcast_port": free_ports()}}


def tcp_props() -> dict[str, dict[str, Any]]:
    base = free_ports(11)
    return {
        "TCP": {"bind_port": base, "port_range": 10},
        "TCPPING": {"initial_hosts": [f"127.0.0.1[{base + i}]" for i in range(3)], "port_range": 0},
    }


async def run_three(
    stack: str,
    props: dict[str, dict[str, Any]],
    find_timeout: float,
    *,
    then: Callable[[list[MemberProcess]], Awaitable[None]] | None = None,
    seconds: float = 30,
) -> None:
    """Three member processes exchange and check everything arrived (`exchange_and_check`);
    ``then`` checks more of them before they stop cleanly."""
    cluster = f"real-{uuid.uuid4().hex[:8]}"
    members: list[MemberProcess] = []
    try:
        async with trio.open_nursery() as nursery:
            with trio.fail_after(seconds):
                for name in "ABC":
                    members.append(
                        await MemberProcess.start(
                            nursery, name, stack=stack, cluster=cluster, props=props
                        )
                    )
                await exchange_and_check(
                    members, find_timeout=find_timeout, multicasts=40, unicasts=15
                )
                if then is not None:
                    await then(members)
                for m in members:
                    assert await m.stop() == 0
                    await m.wait_for(lambda e: e["event"] == "bye")
    finally:
        for m in members:
            m.kill()


async def test_three_udp_member_processes_deliver_all_unicasts_and_multicasts() -> None:
    await run_three(str(STACKS / "udp-transport.toml"), udp_props(), find_timeout=1.0)


async def test_three_tcp_member_processes_deliver_all_unicasts_and_multicasts() -> None:
    await run_three(str(STACKS / "tcp-transport.toml"), tcp_props(), find_timeout=5.0)


async def test_member_process_exits_cleanly_on_sigterm() -> None:
    async with trio.open_nursery() as nursery:
        member = await MemberProcess.start(
            nursery,
            "A",
            stack=str(STACKS / "udp-transport.toml"),
            cluster=f"real-{uuid.uuid4().hex[:8]}",
            props=udp_props(),
        )
        try:
            with trio.fail_after(20):
                member.signal(signal.SIGTERM)
                assert await member.wait() == 0
                await member.wait_for(lambda e: e["event"] == "bye")
        finally:
            member.kill()
