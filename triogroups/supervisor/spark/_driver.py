"""The driver's side: check before launching, launch one barrier stage, bring results home.

A member failure reaches the driver inside Spark's error (a Py4J or Python exception with the
JVM's stack trace around it), in whichever action ran the stage; `_errors` finds the member's
own traceback in it and raises `SparkGroupError` with just that.
"""

from __future__ import annotations

import importlib.machinery
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from triogroups.config import StackConfig
from triogroups.supervisor.spark._arrow import arrow_stage
from triogroups.supervisor.spark._errors import translate_member_failures
from triogroups.supervisor.spark._setup import (
    SparkGroupError,
    registered_slots,
    require_arrow,
    require_pyspark,
    task_slots,
)
from triogroups.supervisor.spark._task import MemberFn, TaskSpec, run_task

__all__ = ["map_in_group", "run_group"]


def _ship_module_by_value(member_fn: MemberFn) -> None:
    """Let a member function from a module the workers cannot import by name (a file loaded by
    path, as `triogroups spark` and test kits load them) travel by value, like ``__main__``."""
    name = getattr(member_fn, "__module__", None) or "__main__"
    module = sys.modules.get(name)
    if module is None or name == "__main__" or "." in name:
        return
    if importlib.machinery.PathFinder.find_spec(name, sys.path) is None:
        from pyspark import cloudpickle

        register: Any = cloudpickle.register_pickle_by_value  # untyped in pyspark
        register(module)


def _spec(
    member_fn: MemberFn,
    stack: StackConfig | str | Path,
    cluster: str,
    bind_addr: str | None,
    formation_timeout: float,
    allow_pickle: bool,
) -> TaskSpec:
    if not callable(member_fn):
        raise TypeError(f"member_fn must be an async function, got {type(member_fn).__name__}")
    if not formation_timeout > 0:
        raise ValueError(f"formation_timeout must be > 0, got {formation_timeout}")
    _ship_module_by_value(member_fn)
    config = StackConfig.resolve(stack)
    missing = [name for name in ("TCP", "TCPPING", "GMS") if name not in config.names()]
    if missing:
        raise ValueError(
            f"a spark group's stack needs {', '.join(missing)}, got {', '.join(config.names())}"
        )
    return TaskSpec(member_fn, config, cluster, bind_addr, formation_timeout, allow_pickle)


_SLOTS_POLL = 0.1  # seconds between two looks at the registered executors


def _check_slots(sc: Any, n: int, wait: float) -> None:
    """Fail at once when ``sc`` cannot run ``n`` tasks at once; otherwise wait up to ``wait``
    seconds for executors with ``n`` slots to have registered.

    A ``local-cluster`` master has its slots (from its master string) before its executor
    processes have registered, and the session checks a barrier stage against the registered
    ones once, a second after submitting it (`SESSION_CONF`): submitted while an executor is
    still starting (seconds, on a loaded machine), the stage would fail at once."""
    slots = task_slots(sc)
    if n > slots:
        raise SparkGroupError(
            f"a group of {n} needs {n} task slots at once, {sc.master} has {slots}: "
            f"use fewer members or a master with more slots"
        )
    deadline = time.monotonic() + wait
    while (registered := registered_slots(sc)) < n:
        if time.monotonic() >= deadline:
            raise SparkGroupError(
                f"a group of {n} needs {n} task slots at once; after {wait:g} s the executors "
                f"registered with {sc.master} have {registered}"
            )
        time.sleep(_SLOTS_POLL)


def _default_bind(sc: Any, bind_addr: str | None) -> str | None:
    """Loopback when every executor runs on this host (local modes), else the executor's own."""
    if bind_addr is None and str(sc.master).startswith("local"):
        return "127.0.0.1"
    return bind_addr


def run_group(
    spark: Any,
    n: int,
    member_fn: MemberFn,
    *,
    stack: StackConfig | str | Path = "spark",
    cluster: str = "spark",
    formation_timeout: float = 60.0,
    retry: bool = False,
    bind_addr: str | None = None,
    allow_pickle: bool = False,
) -> list[Any]:
    """Run ``member_fn`` as a group of ``n`` members in one Spark barrier stage; return what
    each returned, in partition order.

    ``await member_fn(channel, task)`` runs in each task inside a Trio event loop, once the
    channel's view holds all ``n`` members (partition 0 is the coordinator; ``task`` is a
    `SparkTask`). Returns once every member returned and met the others at a final barrier.

    Raises SparkGroupError before anything starts when the session has fewer than ``n`` task
    slots (or its executors have not registered ``n`` within ``formation_timeout`` seconds),
    when no view of ``n`` forms within ``formation_timeout`` seconds, and when a member
    raises (the message is that member's traceback). With ``retry`` the stage is followed by a
    shuffle, so Spark reruns the whole group after a failure (up to
    ``spark.stage.maxConsecutiveAttempts``), each attempt a fresh group with a new generation.
    ``bind_addr`` defaults to loopback in local modes and to each executor's address otherwise.
    SparkUnavailable when pyspark is not installed.
    """
    require_pyspark()
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    sc = spark.sparkContext
    spec = _spec(
        member_fn, stack, cluster, _default_bind(sc, bind_addr), formation_timeout, allow_pickle
    )
    _check_slots(sc, n, formation_timeout)

    def one(index: int, rows: Iterable[Any]) -> Iterator[tuple[int, Any]]:
        yield index, run_task(spec, rows)

    stage = sc.parallelize(range(n), n).barrier().mapPartitionsWithIndex(one)
    if retry:
        stage = stage.partitionBy(1)
    translate_member_failures()
    results = stage.collect()
    return [result for _index, result in sorted(results, key=lambda pair: pair[0])]


def _arrow_schema(data: Any, schema: Any) -> Any:
    """The result's schema as pyarrow's, from a DDL string or a StructType."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    if not isinstance(schema, StructType):
        schema = data.sparkSession.createDataFrame([], schema).schema
    return to_arrow_schema(schema)


def map_in_group(
    data: Any,
    member_fn: MemberFn,
    *,
    schema: Any = None,
    arrow: bool = False,
    stack: StackConfig | str | Path = "spark",
    cluster: str = "spark",
    formation_timeout: float = 60.0,
    bind_addr: str | None = None,
    allow_pickle: bool = False,
) -> Any:
    """One member per partition of ``data`` (an RDD or a DataFrame), lazily, as a barrier stage.

    Each member gets its partition's rows as ``task.rows`` (Rows for a DataFrame) and returns
    an iterable of records: the partition of the result. The result is an RDD, or a DataFrame
    with ``schema`` when one is given.

    With ``arrow`` (a DataFrame and a ``schema`` needed) the stage is Spark's barrier
    ``mapInArrow``: ``task.batches`` holds the partition as ``pyarrow.RecordBatch`` objects
    (``task.rows`` the same rows as tuples, converted on first read), and the member returns
    records, RecordBatches or a ``pyarrow.Table``; no row passes through pickled Rows.
    SparkUnavailable when pyarrow, pandas or barrier ``mapInArrow`` (pyspark 3.5) is missing.

    The stage runs when an action needs it; a shuffle after it lets Spark rerun the whole
    group after a failure (a new generation each time). Too few slots raise SparkGroupError
    here, before anything runs; a member's failure raises SparkGroupError with that member's
    traceback from the action that ran the stage (any action, on the result or on what was
    derived from it).
    """
    require_pyspark()
    if arrow:
        if schema is None:
            raise ValueError("map_in_group(arrow=True) needs a schema, got None")
        if not hasattr(data, "mapInArrow"):
            raise TypeError(
                f"map_in_group(arrow=True) needs a DataFrame, got {type(data).__name__}"
            )
        require_arrow(data)
    rdd = getattr(data, "rdd", data)
    sc = rdd.context
    spec = _spec(
        member_fn, stack, cluster, _default_bind(sc, bind_addr), formation_timeout, allow_pickle
    )
    _check_slots(sc, rdd.getNumPartitions(), formation_timeout)
    translate_member_failures()
    if arrow:
        return data.mapInArrow(arrow_stage(spec, _arrow_schema(data, schema)), schema, barrier=True)

    def records(rows: Iterable[Any]) -> Iterator[Any]:
        yield from run_task(spec, rows)

    out = rdd.barrier().mapPartitions(records)
    if schema is None:
        return out
    from pyspark.sql import SparkSession

    session = getattr(data, "sparkSession", None) or SparkSession.builder.getOrCreate()
    return session.createDataFrame(out, schema)
