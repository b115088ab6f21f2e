"""Two TCP members that started alone find each other through MERGE3 and merge.

Each member lists only its own port in TCPPING, so each starts as the
coordinator of a singleton view. Then one is told where the other listens
(`SetPhysicalAddresses`, as a Spark barrier would). Over TCP a multicast
reaches only the sender's view, so MERGE3 must send its INFO by unicast to
the members discovery finds, or the two views never merge.
"""

from __future__ import annotations

import uuid

import pytest
import trio

from triogroups import StackConfig, open_channel
from triogroups.events import SetPhysicalAddresses
from triogroups.testing import free_ports, wait_until

pytestmark = pytest.mark.real


def _alone_on(port: int) -> StackConfig:
    config = StackConfig.preset("tcp").configure("TCP", bind_port=port, port_range=0)
    config = config.configure("TCPPING", initial_hosts=[f"127.0.0.1[{port}]"], port_range=0)
    config = config.configure("GMS", join_timeout=0.5)
    return config.configure("MERGE3", min_interval=0.2, max_interval=0.5, check_interval=1.0)


async def test_merge3_over_tcp_merges_two_members_that_started_alone() -> None:
    port_a = free_ports(2)
    port_b = port_a + 1
    cluster = f"merge-tcp-{uuid.uuid4().hex[:8]}"
    with trio.fail_after(60):
        async with (
            open_channel(cluster, _alone_on(port_a), "A") as a,
            open_channel(cluster, _alone_on(port_b), "B") as b,
        ):
            assert len(a.view) == 1 and len(b.view) == 1
            await b.stack.send(SetPhysicalAddresses((("127.0.0.1", port_a),)))
            await wait_until(lambda: len(a.view) >= 2 and len(b.view) >= 2)
            assert a.view == b.view
