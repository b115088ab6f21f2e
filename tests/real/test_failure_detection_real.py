"""A SIGKILLed member leaves the survivors' view with the presets' own failure detection.

Issue 12 item 10: with JGroups' FD_ALL3 defaults (8 s / 40 s) a killed member stayed in the
view about 45 s. The presets now suspect after 5 s and verify for 1 s, so it goes in about
6-7 s; the bound here is generous (30 s) and only fails a detector tuned in tens of seconds.
"""

from __future__ import annotations

import signal
import uuid
from typing import Any

import pytest
import trio

from tests._members.group_processes import GroupMember, describe, start_group, wait_same_view
from triogroups.testing import free_ports

pytestmark = pytest.mark.real

KILLED_GONE_WITHIN = 30.0  # seconds; expected 6-7 s with the defaults, 45 s before


def _own_ports(stack: str) -> dict[str, dict[str, Any]]:
    """Only ports of this run's own: FD_ALL3, VERIFY_SUSPECT and GMS keep the preset's values."""
    if stack == "udp":
        return {"UDP": {"mcast_port": free_ports()}}
    base = free_ports(8)
    return {
        "TCP": {"bind_port": base},
        "TCPPING": {"initial_hosts": [f"127.0.0.1[{base}]"]},
        "NAKACK2": {"xmit_interval": 0.5},  # the member program puts DISCARD below it
    }


@pytest.mark.parametrize("stack", ["udp", "tcp"])
async def test_sigkilled_member_leaves_the_view_with_the_presets_failure_detection(
    stack: str,
) -> None:
    members: list[GroupMember] = []
    try:
        async with trio.open_nursery() as nursery:
            cluster = f"fd-{uuid.uuid4().hex[:8]}"
            with trio.fail_after(120):
                members += await start_group(
                    nursery, "ABC", stack=stack, cluster=cluster, props=_own_ports(stack)
                )
                await wait_same_view(members)
            victim, survivors = members[-1], members[:-1]
            victim.signal(signal.SIGKILL)
            try:
                with trio.fail_after(KILLED_GONE_WITHIN):
                    await wait_same_view(survivors)
            except trio.TooSlowError:
                raise AssertionError(
                    f"killed member still in view after {KILLED_GONE_WITHIN}s: {describe(members)}"
                ) from None
            for m in survivors:
                assert await m.stop() == 0, f"{m.name} did not leave cleanly"
    finally:
        for m in members:
            m.kill()
