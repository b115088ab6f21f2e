"""Two clusters sharing the ``tcp`` preset's port range on one host (issue 12 item 6).

TCP takes the first free port of bind_port..bind_port+50; TCPPING used to probe only
bind_port..bind_port+4. With five members of cluster X on the first five ports, two members
of cluster Y listened above the probed ports, heard only X's members (which refuse another
cluster's hello) and each installed a view of itself alone.
"""

from __future__ import annotations

import uuid

import pytest
import trio

from tests._members.group_processes import describe, start_group, wait_same_view
from triogroups.testing import free_ports

pytestmark = pytest.mark.real


async def test_two_members_of_a_second_cluster_on_the_tcp_presets_ports_form_one_view() -> None:
    """Five members of X run, then two of Y start with the same ``tcp`` preset (only its base
    port moved off 7800 so parallel runs never meet): Y's two members form one view of 2."""
    base = free_ports(12)
    props = {
        "TCP": {"bind_port": base},
        "TCPPING": {"initial_hosts": [f"127.0.0.1[{base}]"]},
        "NAKACK2": {"xmit_interval": 0.5},  # the member program puts DISCARD below it
    }
    run = uuid.uuid4().hex[:8]
    members = []
    try:
        async with trio.open_nursery() as nursery:
            try:
                with trio.fail_after(120):
                    xs = await start_group(
                        nursery, "ABCDE", stack="tcp", cluster=f"x-{run}", props=props
                    )
                    members += xs
                    await wait_same_view(xs)
                    ys = await start_group(
                        nursery, "FG", stack="tcp", cluster=f"y-{run}", props=props
                    )
                    members += ys
                    view = await wait_same_view(ys)
            except trio.TooSlowError:
                raise AssertionError(describe(members)) from None
            assert len(view["members"]) == 2
            assert all(base + 5 <= m.physical[1] <= base + 50 for m in ys)
            for m in members:
                assert await m.stop() == 0, f"{m.name} did not leave cleanly"
    finally:
        for m in members:
            m.kill()
