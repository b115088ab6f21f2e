"""A member for the local-cluster test: what it heard and which executors the stage used."""

from __future__ import annotations

from pyspark import BarrierTaskContext

from triogroups import Channel
from triogroups.supervisor.spark import SparkTask


async def member(ch: Channel, task: SparkTask, tag: str) -> dict[str, object]:
    """Multicast the partition, collect every member's; name the stage's executors."""
    await ch.send(task.partition)
    heard = sorted([(await ch.receive()).payload for _ in range(task.members)])
    executors = {info.address for info in BarrierTaskContext.get().getTaskInfos()}
    view = [m.name for m in ch.view.members]
    return {"tag": tag, "view": view, "heard": heard, "executors": len(executors)}
