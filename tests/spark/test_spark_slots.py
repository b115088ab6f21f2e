"""Before a group's barrier stage is submitted, its executors must have registered its slots.

A ``local-cluster`` master knows its slots from its master string before its executor
processes have registered, and the session lets Spark check a barrier stage against the
registered ones only once, a second after it is submitted. Submitted while an executor was
still starting, the stage failed with BarrierJobSlotsNumberCheckFailed (seen in CI, on a
loaded machine, in ``test_spark_cluster.py``). No JVM here: a stand-in SparkContext whose
registered slots are scripted.
"""

from __future__ import annotations

from typing import Any

import pytest

from triogroups.supervisor.spark import SparkGroupError, _driver


class _Context:
    """What `_check_slots` asks of a SparkContext."""

    master = "local-cluster[2,1,1024]"

    def getConf(self) -> dict[str, str]:  # pyspark's name
        return {}


def _registering(monkeypatch: pytest.MonkeyPatch, counts: list[int]) -> list[int]:
    """Make the registered slots go through ``counts`` (then stay at the last); returns the
    list of counts handed out."""
    seen: list[int] = []

    def registered(sc: Any) -> int:
        seen.append(counts[min(len(seen), len(counts) - 1)])
        return seen[-1]

    monkeypatch.setattr(_driver, "registered_slots", registered)
    monkeypatch.setattr(_driver, "_SLOTS_POLL", 0.01)
    return seen


def test_spark_group_waits_for_its_executors_to_register_its_slots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Executors registering one after the other: the check returns once both did."""
    seen = _registering(monkeypatch, [0, 0, 1, 2])
    _driver._check_slots(_Context(), 2, wait=30.0)
    assert seen == [0, 0, 1, 2]


def test_spark_group_whose_executors_do_not_register_in_time_fails_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One executor of two never registers: SparkGroupError after the wait, with the count."""
    _registering(monkeypatch, [1])
    with pytest.raises(
        SparkGroupError,
        match=r"a group of 2 needs 2 task slots at once; after 0.2 s the executors registered "
        r"with local-cluster\[2,1,1024\] have 1",
    ):
        _driver._check_slots(_Context(), 2, wait=0.2)


def test_spark_group_wider_than_its_master_fails_without_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More members than the master string allows: the error at once, no registered count
    asked."""
    seen = _registering(monkeypatch, [0])
    with pytest.raises(SparkGroupError, match=r"a group of 3 needs 3 task slots at once, "):
        _driver._check_slots(_Context(), 3, wait=30.0)
    assert seen == []
