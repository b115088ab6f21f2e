"""The members' side of a Spark group on real loopback sockets, without a JVM: the tasks of a
stage are stood in for by a `Stage` that does what ``BarrierTaskContext`` does (one
``allGather``, one ``barrier``), so the rendezvous runs many times in seconds."""

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

    def context(self, partition: int) -> Any:
        stage = self

        class Context:
            def partitionId(self) -> int:
                return partition

            def getTaskInfos(self) -> list[_Info]:
                return [_Info("127.0.0.1:40000")] * stage.n

            def allGather(self, message: str) -> list[str]:
                stage.values[partition] = message
                stage._gathered.wait(timeout=30)
                return list(stage.values)

            def barrier(self) -> None:
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


async def run_stage(n: int) -> list[dict[str, Any]]:
    spec = TaskSpec(report, StackConfig.preset("spark"), "t", "127.0.0.1", 30.0, False)
    stage = Stage(n)
    results: list[dict[str, Any]] = [{} for _ in range(n)]

    async def one(partition: int) -> None:
        results[partition] = await _Member(spec, stage.context(partition), []).run()

    async with trio.open_nursery() as nursery:
        for partition in range(n):
            nursery.start_soon(one, partition)
    return results


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
