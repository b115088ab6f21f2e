"""Issue 12 item 9: membership changes, suspicions, merges and layer crashes are logged.

On the simulated network with a fixed seed: a join, a leave, a suspicion, a
merge, and a layer crash with its restart each leave records under
``triogroups.*`` at the agreed levels: INFO for membership changes, WARNING
for suspicions and crashes (docs/how-to/logging.md lists them).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from triogroups import MergeView, Message, RestartIntensityExceeded, Stack, StackConfig
from triogroups.testing import SimCluster, SimMember, open_cluster, wait_until
from triogroups.transports.sim import open_sim_network

GMS_LOG = "triogroups.protocols.gms"
STACK_LOG = "triogroups.stack"

STACK = StackConfig.of(
    "SIM",
    "PING",
    ("MERGE3", {"min_interval": 0.2, "max_interval": 0.5, "check_interval": 1.0}),
    ("FD_ALL3", {"interval": 0.5, "timeout": 2.0}),
    ("VERIFY_SUSPECT", {"timeout": 0.5}),
    "DISCARD",
    ("GMS", {"merge_timeout": 2.0, "join_timeout": 0.5}),
)


def _lines(caplog: pytest.LogCaptureFixture, logger: str, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == level]


async def _same_view(cluster: SimCluster, members: list[SimMember]) -> None:
    with trio.fail_after(60):
        await cluster.wait_for_view(members)


async def test_join_and_leave_are_logged_at_info_by_gms(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Each member logs its own join and every view it installs (who joined, who went);
    the coordinator logs the view it installs for a leave, the leaver its leave."""
    caplog.set_level(logging.DEBUG, logger="triogroups")
    async with open_cluster(3, STACK, seed=1) as cluster:
        a, b, c = cluster.members
        info = _lines(caplog, GMS_LOG, logging.INFO)
        assert f"{a.address}: found no coordinator of 'test'; starting it as coordinator" in info
        assert f"{c.address}: joined 'test' (coordinator {a.address})" in info
        assert any(
            line.startswith(f"{a.address}: installing view") and "joins: C" in line for line in info
        )
        assert any(
            line.startswith(f"{b.address}: installed view") and line.endswith("joined: C")
            for line in info
        )
        caplog.clear()
        await c.disconnect()
        await _same_view(cluster, [a, b])
        info = _lines(caplog, GMS_LOG, logging.INFO)
        assert f"{c.address}: leaving 'test'" in info
        assert f"{c.address}: left 'test'" in info
        assert any(
            line.startswith(f"{a.address}: installing view") and line.endswith("leaves: C")
            for line in info
        )
        assert any(
            line.startswith(f"{b.address}: installed view") and line.endswith("gone: C")
            for line in info
        )
        assert _lines(caplog, GMS_LOG, logging.WARNING) == []


async def test_a_suspicion_is_logged_at_warning_once_and_its_view_says_suspected(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A killed member is suspected: each survivor warns once (FD_ALL3 repeats the
    suspicion every interval), and the coordinator's view names it as suspected."""
    caplog.set_level(logging.DEBUG, logger="triogroups")
    async with open_cluster(3, STACK, seed=2) as cluster:
        a, b, c = cluster.members
        caplog.clear()
        c.kill()
        await _same_view(cluster, [a, b])
        warnings = _lines(caplog, GMS_LOG, logging.WARNING)
        assert sorted(warnings) == sorted(f"{m.address}: suspects {c.address}" for m in (a, b))
        info = _lines(caplog, GMS_LOG, logging.INFO)
        assert any(
            line.startswith(f"{a.address}: installing view") and line.endswith("suspected: C")
            for line in info
        )


async def test_a_merge_is_logged_at_info_by_the_leader_and_every_member(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="triogroups")
    async with open_cluster(4, STACK, seed=3, view=False) as cluster:
        a, b, c, d = cluster.members
        cluster.network.partition([a.address, b.address], [c.address, d.address])
        for m in cluster.members:
            await cluster.join(m)
        await _same_view(cluster, [a, b])
        await _same_view(cluster, [c, d])
        caplog.clear()
        cluster.network.heal()
        await _same_view(cluster, [a, b, c, d])
        assert isinstance(a.view, MergeView)
        info = _lines(caplog, GMS_LOG, logging.INFO)
        leader = a.view.view_id.coord
        assert any(line.startswith(f"{leader}: merge 1: merging") for line in info)
        for m in cluster.members:
            assert any(line.startswith(f"{m.address}: installed merge view") for line in info)


def _explode(msg: Message) -> bool:
    if msg.payload == b"boom":
        raise RuntimeError("told to crash")
    return False


async def test_a_layer_crash_is_logged_at_warning_and_the_restart_at_info(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="triogroups")
    async with open_cluster(2, STACK, seed=4) as cluster:
        a = cluster.members[0]
        first = a.address
        a.protocol("DISCARD").drop_if(_explode)
        await a.send(b"boom")
        await wait_until(lambda: a.stack.incarnation >= 2, timeout=30, interval=0.1)
        (crash,) = [
            r for r in caplog.records if r.name == STACK_LOG and r.levelno == logging.WARNING
        ]
        assert crash.getMessage() == (
            f"stack A@test: layer 5:DISCARD of {first} crashed: RuntimeError: told to crash"
        )
        assert crash.exc_info is not None and crash.exc_info[0] is RuntimeError
        assert _lines(caplog, STACK_LOG, logging.INFO) == [
            f"stack A@test: restarted as {a.address} (incarnation 2)"
        ]


async def test_crashes_beyond_the_restart_intensity_are_logged_at_error(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="triogroups")
    async with open_sim_network(seed=5) as net:
        config = StackConfig.of(("SIM", {"network": net.name}), "DISCARD")
        stack = Stack(config, "test", "A", max_restarts=0)
        with pytest.raises(ExceptionGroup) as info:
            async with trio.open_nursery() as nursery:
                await nursery.start(stack.run)
                stack.protocol("DISCARD").drop_if(_explode)
                await stack.send([Message(None, b"boom")])
                await trio.sleep_forever()
        assert info.group_contains(RestartIntensityExceeded, depth=1)
    (error,) = [r for r in caplog.records if r.name == STACK_LOG and r.levelno == logging.ERROR]
    assert error.getMessage().startswith("stack A@test: ")
