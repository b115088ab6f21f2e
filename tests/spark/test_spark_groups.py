"""Groups inside Spark barrier stages, in local[4] mode (issue 15)."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from triogroups import Channel
from triogroups.supervisor.spark import SparkGroupError, SparkTask, map_in_group, run_group

pytestmark = pytest.mark.spark


async def exchange(ch: Channel, task: SparkTask) -> dict[str, Any]:
    """Multicast 20 messages, unicast 5 to every member; return what arrived and the view."""
    members = list(ch.view.members)
    for i in range(20):
        await ch.send(["m", task.partition, i])
    for to in members:
        for i in range(5):
            await ch.send(["u", task.partition, i], to=to)
    got: dict[str, list[list[int]]] = {"m": [], "u": []}
    for _ in range(task.members * 25):
        kind, sender, i = (await ch.receive()).payload
        got[kind].append([sender, i])
    return {
        "view": [m.name for m in ch.view.members],
        "view_id": str(ch.view.view_id),
        "coordinator": task.coordinator,
        "generation": task.generation,
        "cluster": ch.cluster,
        "got": got,
        "forked_by": Path(f"/proc/{os.getppid()}/cmdline").read_bytes().split(b"\0"),
    }


def test_spark_group_of_4_forms_one_view_and_delivers_everything(spark: Any) -> None:
    """Every member sees the same view of 4 (partition 0 first when the members start
    together, but a member late to listen joins the group another started); only partition
    0's ``task.coordinator`` is true; every multicast and unicast arrives, in each sender's
    order; results come back per partition.
    The session's workers were forked by the daemon that imported triogroups beforehand."""
    results = run_group(spark, 4, exchange)
    assert len(results) == 4
    assert len({r["view_id"] for r in results}) == 1
    assert len({tuple(r["view"]) for r in results}) == 1
    assert sorted(results[0]["view"]) == ["p0", "p1", "p2", "p3"]
    assert [r["coordinator"] for r in results] == [True, False, False, False]
    assert len({r["generation"] for r in results}) == 1
    for r in results:
        assert b"triogroups.supervisor.spark._daemon" in r["forked_by"]
        assert r["cluster"] == f"spark-{r['generation']}"
        for kind, count in (("m", 20), ("u", 5)):
            for sender in range(4):
                seen = [i for s, i in r["got"][kind] if s == sender]
                assert seen == list(range(count)), (kind, sender)


def test_spark_member_failure_reaches_the_driver_with_its_traceback(spark: Any) -> None:
    """A member that raises fails the stage; the driver's error is that member's traceback."""

    async def faulty(ch: Channel, task: SparkTask) -> None:
        if task.partition == 2:
            raise KeyError("no such ledger entry")
        await trio.sleep_forever()

    with pytest.raises(SparkGroupError) as caught:
        run_group(spark, 3, faulty)
    assert caught.value.member == 2
    text = str(caught.value)
    assert text.startswith("member p2 of 3 (generation ")
    assert "Traceback (most recent call last)" in text
    assert 'raise KeyError("no such ledger entry")' in text
    assert text.rstrip().endswith("KeyError: 'no such ledger entry'")
    assert "org.apache.spark" not in text


def test_spark_retried_stage_forms_a_new_group_with_a_new_generation(
    spark: Any, tmp_path: Path
) -> None:
    """With retry the failed stage reruns (Spark keeps attemptNumber at 0): the second attempt
    is a new group, with a generation of its own, and succeeds."""
    failed = tmp_path / "failed-generation"

    async def flaky(ch: Channel, task: SparkTask) -> tuple[str, str, int]:
        if task.partition == 1 and not failed.exists():
            failed.write_text(f"{task.generation} {ch.cluster}")
            raise RuntimeError("first attempt fails")
        return task.generation, ch.cluster, len(ch.view)

    results = run_group(spark, 2, flaky, retry=True)
    first_generation, first_cluster = failed.read_text().split()
    assert len(set(results)) == 1
    generation, cluster, size = results[0]
    assert generation != first_generation and cluster != first_cluster
    assert size == 2


def test_spark_too_few_slots_fails_before_anything_starts(spark: Any, tmp_path: Path) -> None:
    """More members than local[4] has slots: a clear error, and no member ever ran."""
    ran = tmp_path / "ran"

    async def member(ch: Channel, task: SparkTask) -> None:
        ran.touch()

    with pytest.raises(
        SparkGroupError,
        match=r"a group of 5 needs 5 task slots at once, "
        r"local\[4\] has 4",
    ):
        run_group(spark, 5, member)
    rdd = spark.sparkContext.parallelize(range(10), 6)
    with pytest.raises(SparkGroupError, match=r"a group of 6 needs 6 task slots"):
        map_in_group(rdd, member)
    assert not ran.exists()


def test_spark_session_fails_an_oversized_barrier_stage_within_seconds(spark: Any) -> None:
    """The session's slot-check settings: Spark itself refuses a barrier stage wider than the
    slots after one check a second, instead of retrying for ten minutes."""
    stage = spark.sparkContext.parallelize(range(5), 5).barrier().mapPartitions(lambda it: it)
    with pytest.raises(Exception, match="BarrierJobSlotsNumberCheckFailed"):
        stage.collect()


def test_spark_session_gives_python_workers_a_socket_timeout_for_a_loaded_machine(
    spark: Any,
) -> None:
    """barrier() and allGather() connect to the executor's JVM within the worker's
    SPARK_AUTH_SOCKET_TIMEOUT, which Spark sets from spark.python.authenticate.socketTimeout
    (15 s by default): the session makes it 120 s, so a JVM slow to accept on a loaded
    machine does not fail the stage."""
    got = spark.sparkContext.parallelize(range(4), 4).map(
        lambda _: os.environ.get("SPARK_AUTH_SOCKET_TIMEOUT")
    )
    assert got.collect() == ["120"] * 4


def test_spark_member_module_the_workers_cannot_import_fails_naming_it(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member function whose module the Python workers cannot import (here: from a
    directory put on the driver's sys.path after the session started, which the workers do
    not have; on a cluster, code only the driver has that could not be sent) fails as
    SparkGroupError naming the module and what to do, not as Spark's Py4JJavaError with a
    JVM stack trace around a ModuleNotFoundError."""
    (tmp_path / "late_member_module.py").write_text(
        "async def member(ch, task):\n    return task.partition\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        member = importlib.import_module("late_member_module").member
        with pytest.raises(SparkGroupError) as failed:
            run_group(spark, 2, member)
    finally:
        sys.modules.pop("late_member_module", None)
    assert failed.value.member in (0, 1)
    assert str(failed.value) == (
        f"member p{failed.value.member} failed: its executor cannot import module "
        f"'late_member_module' (ModuleNotFoundError): install it on every executor, or pass "
        f"it with spark-submit --py-files"
    )


def test_spark_formation_timeout_is_an_error_naming_it(spark: Any) -> None:
    """A group that cannot form within formation_timeout fails the stage and says so."""

    async def member(ch: Channel, task: SparkTask) -> None:
        return None

    with pytest.raises(SparkGroupError, match=r"no view of 2 within formation_timeout=0\.001s"):
        run_group(spark, 2, member, formation_timeout=0.001)


def test_spark_map_in_group_gives_each_partition_a_member_and_its_rows(spark: Any) -> None:
    """One member per partition of an RDD, with that partition's rows; the members' returned
    records are the result RDD's partitions."""

    async def total(ch: Channel, task: SparkTask) -> list[tuple[int, int, int]]:
        await ch.send(sum(task.rows))
        parts = [(await ch.receive()).payload for _ in range(task.members)]
        return [(task.partition, len(task.rows), sum(parts))]

    rdd = spark.sparkContext.parallelize(range(1000), 4)
    out = map_in_group(rdd, total).collect()
    assert sorted(p for p, _n, _s in out) == [0, 1, 2, 3]
    assert sum(n for _p, n, _s in out) == 1000
    assert {s for _p, _n, s in out} == {sum(range(1000))}


def test_spark_group_refuses_bad_input_before_launching(spark: Any) -> None:
    """A stack that cannot gather its members, a bad size or timeout: refused on the driver."""

    async def member(ch: Channel, task: SparkTask) -> None:
        return None

    with pytest.raises(ValueError, match=r"a spark group's stack needs TCP, TCPPING, got UDP"):
        run_group(spark, 2, member, stack="udp")
    with pytest.raises(ValueError, match=r"n must be a positive int, got 0"):
        run_group(spark, 0, member)
    with pytest.raises(ValueError, match=r"formation_timeout must be > 0, got 0"):
        run_group(spark, 2, member, formation_timeout=0)


@pytest.mark.parametrize("arrow", [False, True], ids=["rows", "arrow"])
def test_spark_map_in_group_member_failure_raises_spark_group_error_from_the_action(
    spark: Any, arrow: bool
) -> None:
    """map_in_group is lazy: a member that raises fails the action that runs the stage, here
    one on a DataFrame derived from the result, with SparkGroupError carrying that member's
    traceback (as run_group raises it), not Spark's error; in the Row and the Arrow form."""

    async def faulty(ch: Channel, task: SparkTask) -> list[tuple[int]]:
        if task.partition == 1:
            raise KeyError("no such ledger entry")
        await ch.receive()  # never comes: the stage fails first
        return []

    out = map_in_group(spark.range(0, 20, numPartitions=2), faulty, schema="p INT", arrow=arrow)
    with pytest.raises(SparkGroupError) as caught:
        out.filter("p >= 0").collect()
    assert caught.value.member == 1
    text = str(caught.value)
    assert text.startswith("member p1 of 2 (generation ")
    assert 'raise KeyError("no such ledger entry")' in text
    assert text.rstrip().endswith("KeyError: 'no such ledger entry'")
    assert "org.apache.spark" not in text
