"""The driver's side: check before launching, launch one barrier stage, bring results home.

A member failure reaches the driver inside Spark's error (a Py4J or Python exception with the
JVM's stack trace around it), in whichever action ran the stage; `_errors` finds the member's
own traceback in it and raises `SparkGroupError` with just that.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from triogroups.config import StackConfig
from triogroups.supervisor.spark._arrow import arrow_stage
from triogroups.supervisor.spark._errors import translate_member_failures
from triogroups.supervisor.spark._rows import dataframe_rows
from triogroups.supervisor.spark._setup import (
    SparkGroupError,
    master_slots,
    registered_slots,
    require_arrow,
    require_pyspark,
)
from triogroups.supervisor.spark._ship import ship_member_code
from triogroups.supervisor.spark._task import MemberFn, TaskSpec, run_task

__all__ = ["map_in_group", "run_group"]


def is_async(fn: object) -> bool:
    """Whether calling ``fn`` returns a coroutine: an ``async def`` function, a partial of
    one, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (the method, not callability)
    )


def check_member_fn(member_fn: object) -> None:
    """TypeError unless ``member_fn`` is an async function: checked on the driver, since a
    plain function would fail only inside every task, after the stage started."""
    if not callable(member_fn):
        raise TypeError(f"member_fn must be an async function, got {type(member_fn).__name__}")
    if not is_async(member_fn):
        name = getattr(member_fn, "__qualname__", type(member_fn).__name__)
        raise TypeError(
            f"member_fn must be an async function (async def {name}(ch, task)), "
            f"got a plain {type(member_fn).__name__} {name!r}"
        )


def _sync_timeout(sc: Any) -> float:
    """The session's ``spark.barrier.sync.timeout`` in seconds (Spark's default: 365 days)."""
    conf = sc._jsc.sc().conf()
    return float(conf.getTimeAsSeconds("spark.barrier.sync.timeout", "31536000s"))


def _spec(
    sc: Any,
    member_fn: MemberFn,
    stack: StackConfig | str | Path,
    cluster: str,
    bind_addr: str | None,
    formation_timeout: float,
    allow_pickle: bool,
) -> TaskSpec:
    check_member_fn(member_fn)
    if not formation_timeout > 0:
        raise ValueError(f"formation_timeout must be > 0, got {formation_timeout}")
    ship_member_code(sc, member_fn)
    config = StackConfig.resolve(stack)
    missing = [name for name in ("TCP", "TCPPING", "GMS") if name not in config.names()]
    if missing:
        raise ValueError(
            f"a spark group's stack needs {', '.join(missing)}, got {', '.join(config.names())}"
        )
    return TaskSpec(
        member_fn,
        config,
        cluster,
        _default_bind(sc, bind_addr),
        formation_timeout,
        allow_pickle,
        _sync_timeout(sc),
    )


_SLOTS_POLL = 0.1  # seconds between two looks at the registered executors


def _check_slots(sc: Any, n: int, wait: float) -> None:
    """Fail at once when ``sc``'s master can never run ``n`` tasks at once (``local[N]``,
    ``local-cluster``); otherwise wait up to ``wait`` seconds for executors with ``n`` slots
    to have registered.

    Spark checks a barrier stage against the executors registered when it is submitted, once
    (`SESSION_CONF`), and executors register seconds after the session started: with a
    ``local-cluster`` master (which knows its slots from its string) and on every cluster
    manager (standalone, YARN, Kubernetes: slots are whatever registered so far). A group is
    never shrunk to fit: either its ``n`` slots are there or it fails saying how many are."""
    known = master_slots(str(sc.master), int(sc.getConf().get("spark.task.cpus", "1")))
    if known is not None and n > known:
        raise SparkGroupError(
            f"a group of {n} needs {n} task slots at once, {sc.master} has {known}: "
            f"use fewer members or a master with more slots"
        )
    deadline = time.monotonic() + wait
    while (registered := registered_slots(sc)) < n:
        if time.monotonic() >= deadline:
            raise SparkGroupError(
                f"a group of {n} needs {n} task slots at once; after {wait:g} s the executors "
                f"registered with {sc.master} have {registered}: use fewer members, or give "
                f"the application more executors or cores (or a longer formation_timeout)"
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
    channel's view holds all ``n`` members, the same view in every member (``task`` is a
    `SparkTask`; partition 0 coordinates when the members start together, the view's first
    member always). Returns once every member returned and met the others at the end (in the
    group: a member that finished first waits there for the others' functions to return).

    On a cluster master, a ``member_fn`` whose module only the driver can import (beside
    the driver's script, or a package of its project) is sent to the executors as
    ``sc.addPyFile`` does (its ``.py`` file, or its top-level package as a zip; see `_ship`).

    TypeError on the driver for a ``member_fn`` that is not an async function. Raises
    SparkGroupError before anything starts when ``member_fn``'s module cannot be sent that
    way (the message says what to do instead), when the master can never run ``n`` tasks at once
    (``local[N]``, ``local-cluster``) or its executors have not registered ``n`` slots within
    ``formation_timeout`` seconds (on a cluster manager the stage waits for them; a group is
    never made smaller); when no view of ``n`` forms within ``formation_timeout`` seconds;
    when a member raises (the message is that member's traceback); and when a member's
    Python worker or executor dies (the message names the member and what happened). With
    ``retry`` the stage is followed by a shuffle, so Spark reruns the whole group after any
    of these failures (up to ``spark.stage.maxConsecutiveAttempts``), each attempt a fresh
    group of ``n`` with a new generation whose members start their function again: the
    results are all the new attempt's; the error, when every attempt failed, the last one's.
    ``bind_addr`` defaults to loopback in local modes and to each executor's address otherwise.
    SparkUnavailable when pyspark is not installed.
    """
    require_pyspark()
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    sc = spark.sparkContext
    spec = _spec(sc, member_fn, stack, cluster, bind_addr, formation_timeout, allow_pickle)
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

    Each member gets its partition's rows as ``task.rows`` (Rows for a DataFrame, the ones
    ``data.rdd`` gives; a DataFrame whose columns are all numbers, strings or booleans
    reaches the members through Arrow when pyarrow is installed, see `_rows`) and returns an
    iterable of records: the partition of the result. The result is an RDD, or a DataFrame
    with ``schema`` when one is given.

    With ``arrow`` (a DataFrame and a ``schema`` needed) the stage is Spark's barrier
    ``mapInArrow``: ``task.batches`` holds the partition as ``pyarrow.RecordBatch`` objects
    (``task.rows`` the same rows as tuples, converted on first read), and the member returns
    records, RecordBatches or a ``pyarrow.Table``; no row passes through pickled Rows.
    SparkUnavailable when pyarrow, pandas or barrier ``mapInArrow`` (pyspark 3.5) is missing.

    The stage runs when an action needs it; a shuffle after it lets Spark rerun the whole
    group after a failure (a new generation each time). ``member_fn``'s module is sent to the
    executors as for `run_group`. Too few slots, or a module that cannot be sent, raise
    SparkGroupError here, before anything runs; a member's failure raises SparkGroupError
    with that member's traceback from the action that ran the stage (any action, on the
    result or on what was derived from it).
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
    rdd = getattr(data, "rdd", data) if arrow else dataframe_rows(data)
    sc = rdd.context
    spec = _spec(sc, member_fn, stack, cluster, bind_addr, formation_timeout, allow_pickle)
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
