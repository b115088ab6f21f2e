"""The members' side of a Spark group on real loopback sockets, without a JVM: the tasks of a
stage are stood in for by a `Stage` that does what ``BarrierTaskContext`` does (one
``allGather``; ``barrier`` too, counted: members must not call it), so the rendezvous runs
many times in seconds."""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import pytest
import trio

from triogroups import Channel
from triogroups.config import StackConfig
from triogroups.supervisor.spark import SparkTask
from triogroups.supervisor.spark._task import TaskSpec, _Member

pytestmark = pytest.mark.real


class _Info(NamedTuple):
    address: str


class Stage:
    """One attempt of a barrier stage of ``n`` tasks: what its tasks gather and where they
    meet (threads wait, as Spark's tasks block in ``allGather``/``barrier``)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.values = [""] * n
        self._gathered = threading.Barrier(n)
        self._met = threading.Barrier(n)
        self.barrier_calls = 0
        self.infos = 0  # how many task infos Spark hands out (0: one per task)

    def context(self, partition: int) -> Any:
        stage = self

        class Context:
            def partitionId(self) -> int:
                return partition

            def getTaskInfos(self) -> list[_Info]:
                return [_Info("127.0.0.1:40000")] * (stage.infos or stage.n)

            def allGather(self, message: str) -> list[str]:
                stage.values[partition] = message
                stage._gathered.wait(timeout=30)
                return list(stage.values)

            def barrier(self) -> None:
                stage.barrier_calls += 1
                stage._met.wait(timeout=30)

        return Context()


async def report(ch: Channel, task: SparkTask) -> dict[str, Any]:
    await ch.send(task.partition)
    heard = sorted([(await ch.receive()).payload for _ in range(task.members)])
    return {
        "view": [m.name for m in ch.view.members],
        "heard": heard,
        "cluster": ch.cluster,
        "generation": task.generation,
    }


async def run_stage(
    n: int, member: Any = report, stage: Stage | None = None, stack: StackConfig | None = None
) -> list[Any]:
    """Run ``member`` as the ``n`` tasks of one stage; each task's result or exception."""
    stack = stack or StackConfig.preset("spark")
    spec = TaskSpec(member, stack, "t", "127.0.0.1", 30.0, False)
    stage = stage or Stage(n)
    results: list[Any] = [{} for _ in range(n)]

    async def one(partition: int) -> None:
        try:
            results[partition] = await _Member(spec, stage.context(partition), []).run()
        except Exception as exc:
            results[partition] = exc

    async with trio.open_nursery() as nursery:
        for partition in range(n):
            nursery.start_soon(one, partition)
    return results


async def burst_then_return(ch: Channel, task: SparkTask) -> int:
    """p0 multicasts 300 messages and returns at once; the others start reading a second
    later, when p0 would be long gone if it did not wait for them at the end."""
    if task.partition == 0:
        for i in range(300):
            await ch.send(i)
        return 300
    await trio.sleep(1)
    got = [(await ch.receive()).payload for _ in range(300)]
    assert got == list(range(300))
    return len(got)


async def test_spark_members_meet_in_the_group_at_the_end_never_in_sparks_barrier() -> None:
    """Issue 39: a task waiting in Spark's ``barrier()`` when the stage is cancelled takes
    its executor's JVM down (code 50). The members meet in the group instead: p0, done
    first, stays until the others have read everything it sent, and no member calls
    ``barrier()``."""
    stage = Stage(3)
    assert await run_stage(3, burst_then_return, stage) == [300, 300, 300]
    assert stage.barrier_calls == 0


async def test_spark_member_of_a_partial_rerun_fails_saying_so_not_with_index_error() -> None:
    """The standalone tier's retry step: Spark reran a failed barrier stage for p1 alone (it
    had kept p0's output), and p1's task infos held one entry: ``infos[1]`` raised
    IndexError outside the member, and the driver got a raw Py4JJavaError. The member now
    fails, as a member (SparkGroupError naming it), with what Spark did."""
    stage = Stage(1)
    stage.infos = 1
    spec = TaskSpec(report, StackConfig.preset("spark"), "t", "127.0.0.1", 30.0, False)
    member = _Member(spec, stage.context(1), [])
    with pytest.raises(RuntimeError, match="ran only 1 of this barrier stage's tasks") as info:
        await member.run()
    error = member.failure(info.value)
    assert error.member == 1 and "member p1 of 1" in str(error)


async def test_spark_members_end_together_without_waiting_for_failure_detection() -> None:
    """Members that all return at once leave together; none may be left waiting for an
    answer or a message that a member which left never sent (it would wait until failure
    detection excludes that member). With FD_ALL3 at 600 s, ten stages of 4 end well within
    a deadline that a single such wait would pass."""
    slow_fd = StackConfig.preset("spark").configure("FD_ALL3", timeout="600s")
    with trio.fail_after(300):
        for _ in range(10):
            results = await run_stage(4, stack=slow_fd)
            assert [sorted(r["view"]) for r in results] == [["p0", "p1", "p2", "p3"]] * 4


async def p1_fails(ch: Channel, task: SparkTask) -> int:
    if task.partition == 1:
        await trio.sleep(0.5)
        raise ValueError("p1 gives up")
    return task.partition


async def test_spark_members_waiting_at_the_end_finish_when_a_member_fails() -> None:
    """A member raises while the others wait for it at the end: its channel leaves, the
    others stop waiting for it (the failed task fails the stage anyway) and end."""
    results = await run_stage(3, p1_fails)
    assert results[0] == 0 and results[2] == 2
    assert isinstance(results[1], ValueError)


async def test_spark_members_form_one_view_with_partition_0_coordinating_every_time() -> None:
    """Five stages of four started at once: each time one view, partition 0 first (its UUID
    sorts first), every multicast heard, and the generation is partition 0's token, a new
    one per stage, in the cluster name."""
    generations = set()
    for _ in range(5):
        results = await run_stage(4)
        generation = results[0]["generation"]
        generations.add(generation)
        for result in results:
            assert result["view"][0] == "p0" and sorted(result["view"]) == ["p0", "p1", "p2", "p3"]
            assert result["heard"] == [0, 1, 2, 3]
            assert result["generation"] == generation
            assert result["cluster"] == f"t-{generation}"
    assert len(generations) == 5
