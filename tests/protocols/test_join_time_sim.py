"""How long joining takes, on virtual time: a find ends at the coordinator's answer.

A member joining a formed group has its view after a round trip and a view
change (PING's ``break_on_coord_rsp``), never after GMS's ``join_timeout``.
Members started together have nobody to answer as coordinator: the first
find of each waits out ``join_timeout``, the lowest address becomes
coordinator and answers the others again at once (see `_discovery`), so the
group forms in one ``join_timeout``, not two. ``bench_membership.py``
measures both over real sockets (parts ``join`` and ``formation``).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from triogroups import StackConfig
from triogroups.testing import open_cluster

JOIN_TIMEOUT = 2.0
STACK = StackConfig.of("SIM", "PING", "GMS").configure("GMS", join_timeout=JOIN_TIMEOUT)


async def test_a_member_joining_a_formed_group_is_in_the_view_at_the_coordinators_answer(
    autojump_clock: Any,
) -> None:
    async with open_cluster(3, STACK) as cluster:
        joiner = await cluster.add_member()
        start = trio.current_time()
        view = await cluster.join(joiner)
        took = trio.current_time() - start
        assert len(view) == 4
        assert took < JOIN_TIMEOUT / 4, f"joined after {took:.3f}s"


@pytest.mark.parametrize("lag", [0.0, 0.5])
async def test_members_started_together_form_one_view_in_one_join_timeout(
    autojump_clock: Any, lag: float
) -> None:
    """With ``lag`` the lowest address starts that much later: the others' first finds
    end before it coordinates, and their second finds end at its answer as coordinator."""
    async with open_cluster(4, STACK, view=False) as cluster:
        lowest = min(cluster.members, key=lambda m: m.address)
        start = trio.current_time()
        for member in cluster.members:
            if member is not lowest:
                await member.connect()
        await trio.sleep(lag)
        await lowest.connect()
        await cluster.wait_for_view()
        took = trio.current_time() - start
        assert lag + JOIN_TIMEOUT <= took < lag + JOIN_TIMEOUT * 1.25, f"formed after {took:.3f}s"
