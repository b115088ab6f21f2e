"""A member application for ``triogroups spark``: a group in one Spark barrier stage.

    triogroups spark -n 4 examples/spark_hello.py:member
    triogroups spark -n 2 --master local[2] examples/spark_hello.py:member 3

Each member multicasts its partition number ``rounds`` times and unicasts a greeting to the
next member in partition order; it returns what it heard: the multicast sum, the greeting and
the view (partition 0 first: it is the coordinator).
"""

from __future__ import annotations

from triogroups import Channel
from triogroups.supervisor.spark import SparkTask


async def member(ch: Channel, task: SparkTask, rounds: str = "1") -> dict[str, object]:
    """Multicast, unicast to the next member, and report what arrived."""
    by_name = {m.name: m for m in ch.view.members}
    for _ in range(int(rounds)):
        await ch.send(task.partition)
    after = by_name[f"p{(task.partition + 1) % task.members}"]
    await ch.send(f"hello from p{task.partition}", to=after)
    total, greeting = 0, ""
    for _ in range(int(rounds) * task.members + 1):
        msg = await ch.receive()
        if isinstance(msg.payload, str):
            greeting = msg.payload
        else:
            total += msg.payload
    return {"sum": total, "greeting": greeting, "view": [m.name for m in ch.view.members]}
