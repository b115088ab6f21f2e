"""A member's failure raises SparkGroupError from whichever Spark action ran its stage.

`map_in_group` returns a lazy RDD or DataFrame: its stage runs in an action the user calls
later (``collect``, ``count``, ``write.parquet``, or one on a DataFrame derived from it), out
of triogroups' sight. Every such action is a Py4J call, and every Py4J call's answer passes
through ``py4j.protocol.get_return_value``; pyspark wraps that function once per session to
turn Java errors into Python ones, always starting again from the one in ``py4j.protocol``.
So the translation wraps that one, once per process: a Java error whose text carries a
member's failure (the markers `_task` puts around it) becomes SparkGroupError with that
member's traceback. A barrier stage that failed because a task's Python worker died (killed,
crashed, out of memory) or its executor was lost carries no member traceback, only Spark's
account: it becomes SparkGroupError naming the member (the task's partition) and what
happened (`lost_member`). A task whose Python worker could not even read the member function,
because a module it refers to is not importable on the executor (code only the driver has,
which `_ship` could not send), becomes SparkGroupError naming the module and what to do
(`missing_module`). Every other error passes unchanged, and a session created later keeps
the translation.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from triogroups.supervisor.spark._setup import SparkGroupError
from triogroups.supervisor.spark._task import member_failure

__all__ = ["lost_member", "missing_module", "translate_member_failures"]

# "Stage failed because barrier task ResultTask(3, 1) finished unsuccessfully." and then the
# task's failure: the stage and the partition, which is the member.
_BARRIER_TASK = re.compile(
    r"barrier task \w*Task\((\d+), (\d+)\) finished unsuccessfully\.\s*\n(.*)"
)
_CAUSES = (
    (
        "Python worker exited unexpectedly",
        "its Python worker exited unexpectedly (killed or crashed)",
    ),
    ("ExecutorLostFailure", "its executor was lost"),
)

_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")

_reading = threading.local()  # True while the error's own text is fetched (a Py4J call too)


def lost_member(text: str) -> tuple[int, str] | None:
    """The member (partition) whose task failed a barrier stage without a member traceback,
    and what happened to it in one line, from the text of Spark's stage failure; None when
    the text is not such a failure."""
    match = _BARRIER_TASK.search(text)
    if match is None:
        return None
    partition, cause = int(match.group(2)), match.group(3).strip()
    for pattern, what in _CAUSES:
        if pattern in cause:
            detail = (
                cause.split("ExecutorLostFailure", 1)[1].strip() if "Executor" in pattern else ""
            )
            happened = f"{what} {detail}".strip()
            break
    else:
        return None
    stage = f"its group's barrier stage ({match.group(1)}) failed with it"
    if match.group(0).startswith("barrier task ShuffleMapTask"):
        # A barrier stage followed by a shuffle (run_group's retry=True) is rerun, each
        # attempt a new group; the job fails only when the last attempt allowed did.
        stage += " in its last attempt (spark.stage.maxConsecutiveAttempts)"
    return partition, f"member p{partition} failed: {happened}; {stage}"


def missing_module(text: str) -> tuple[int, str] | None:
    """The member (partition) whose task failed a barrier stage because its Python worker
    could not import a module, and that in one line saying what to do; None otherwise."""
    task = _BARRIER_TASK.search(text)
    missing = None if task is None else _NO_MODULE.search(text, task.start())
    if task is None or missing is None:
        return None
    partition = int(task.group(2))
    return partition, (
        f"member p{partition} failed: its executor cannot import module {missing.group(1)!r} "
        f"(ModuleNotFoundError): install it on every executor, or pass it with spark-submit "
        f"--py-files"
    )


def _translating(original: Any) -> Any:
    from py4j.protocol import Py4JJavaError

    def get_return_value(*args: Any) -> Any:
        try:
            return original(*args)
        except Py4JJavaError as exc:
            if getattr(_reading, "active", False):
                raise
            _reading.active = True
            try:
                text = str(exc)
            finally:
                _reading.active = False
            found = member_failure(text) or missing_module(text) or lost_member(text)
            if found is None:
                raise
            raise SparkGroupError(found[1], found[0]) from None

    get_return_value.triogroups_translates = True  # type: ignore[attr-defined]
    return get_return_value


def translate_member_failures() -> None:
    """Make every Spark action raise SparkGroupError for a triogroups member's failure."""
    import py4j.protocol
    from pyspark.errors.exceptions.captured import install_exception_handler

    if getattr(py4j.protocol.get_return_value, "triogroups_translates", False):
        return
    py4j.protocol.get_return_value = _translating(py4j.protocol.get_return_value)
    install_exception_handler()  # pyspark's wrapper, now around the translation
