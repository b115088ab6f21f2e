"""Spark-sized groups on the simulated network, on virtual time (no JVM, no sockets).

A barrier stage's tasks all learn every member's endpoint from one ``allGather`` and connect
at once; the ``spark`` preset then has TCPPING list all of them. These tests run that
formation with 8 and 16 members of the shipped preset (TCP swapped for the simulated
network's lossless endpoint), then kill one member as SIGKILL would and check that the
survivors exclude it within what the preset's failure detection promises. The figures for
64 and 256 members come from ``benchmarks/bench_group_scale.py`` (docs/how-to/spark-cluster.md,
"Large groups").
"""

from __future__ import annotations

import pytest
import trio

from triogroups import Channel
from triogroups.config import StackConfig
from triogroups.supervisor.spark import SparkTask
from triogroups.supervisor.spark._task import TaskSpec, _stack_for
from triogroups.testing import SimCluster, SimMember, open_cluster

BASE_PORT = 7800


async def nothing(ch: Channel, task: SparkTask) -> None:
    """A member function; the stage's stack is all these tests take from the spec."""


def spark_stack(n: int, stack: StackConfig | None = None) -> StackConfig:
    """``stack`` (the spark preset) as a task of a stage of ``n`` configures it
    (`_stack_for`: every gathered endpoint listed), with TCP taking the first free port of
    the ``n`` on the simulated host, since every member here shares one config."""
    spec = TaskSpec(nothing, stack or StackConfig.preset("spark"), "t", "127.0.0.1", 30.0, False)
    peers = [["127.0.0.1", BASE_PORT + i, "token"] for i in range(n)]
    config = _stack_for(spec, "127.0.0.1", BASE_PORT, peers)
    return config.configure("TCP", bind_port=BASE_PORT, port_range=n)


async def form(cluster: SimCluster, n: int) -> float:
    """Start ``n`` members and connect them all at once, as the tasks of a stage do after
    their ``allGather``; the virtual time until every one holds the view of all ``n``."""
    for i in range(n):
        await cluster.add_member(f"p{i}")
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for member in cluster.members:
            nursery.start_soon(member.connect)
    with trio.fail_after(10):
        await all_hold(cluster.members, n)
    return trio.current_time() - start


async def all_hold(members: list[SimMember], size: int) -> None:
    """Wait until every one of ``members`` holds one and the same view of ``size``."""
    while True:
        views = {m.view for m in members}
        if len(views) == 1:
            (view,) = views
            if view is not None and len(view) == size:
                return
        await trio.sleep(0.01)


@pytest.mark.parametrize(("n", "victim"), [(8, "coordinator"), (16, "participant")])
async def test_spark_group_of_n_forms_at_once_and_excludes_a_crashed_member(
    autojump_clock: trio.testing.MockClock, n: int, victim: str
) -> None:
    """All N members connect at the same instant with the full list of endpoints (as after
    ``allGather``): one view of all N at every member, reached in one view change after the
    first (no merge of subgroups; the preset's ``join_timeout`` is never waited out). Then
    one member dies without a word: every survivor installs the view without it once FD_ALL3
    suspects it (``timeout`` 30 s, checked every ``interval`` 2 s) and VERIFY_SUSPECT's 1 s
    ran out, and no sooner: a view before ``timeout`` would mean a live member was suspected
    too early."""
    stack = spark_stack(n)
    async with open_cluster(0, stack, seed=n, cluster="scale", view=False) as cluster:
        assert await form(cluster, n) < 1.0  # well inside join_timeout (2 s)
        view = cluster.members[0].view
        assert view is not None and view.view_id.id <= 2
        await trio.sleep(10)  # steady: nobody suspected while all are alive
        assert all(m.view == view for m in cluster.members)

        dead = next(
            m for m in cluster.members if (m.address == view.coord) == (victim == "coordinator")
        )
        dead.kill()
        killed = trio.current_time()
        survivors = [m for m in cluster.members if m is not dead]
        with trio.fail_after(30 + 2 + 1 + 5):
            await all_hold(survivors, n - 1)
        assert trio.current_time() - killed >= 30 - 2
        after = survivors[0].view
        assert after is not None and dead.address not in after
        assert set(after.members) == {m.address for m in survivors}


async def test_spark_stage_forms_at_once_when_it_has_more_members_than_max_pending_joins(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Every task of a stage joins in the same instant. GMS drops JOIN_REQs beyond
    ``max_pending_joins`` (100 by default), and a dropped joiner retries only after
    ``join_timeout`` (2 s): a stage of 128 formed in 2.06 s instead of 0.05 s
    (bench_group_scale). A task's stack takes all the stage's members as pending joins; here
    the guard is set to 4 for a stage of 8 so the case is small: still one view change, well
    inside ``join_timeout``."""
    guarded = StackConfig.preset("spark").configure("GMS", max_pending_joins=4)
    stack = spark_stack(8, guarded)
    async with open_cluster(0, stack, seed=8, cluster="scale", view=False) as cluster:
        assert await form(cluster, 8) < 1.0
        view = cluster.members[0].view
        assert view is not None and view.view_id.id <= 2
        dropped = sum(
            m.protocol("GMS").counters["join_requests_dropped_pending"] for m in cluster.members
        )
        assert dropped == 0
