"""A member's failure raises SparkGroupError from whichever Spark action ran its stage.

`map_in_group` returns a lazy RDD or DataFrame: its stage runs in an action the user calls
later (``collect``, ``count``, ``write.parquet``, or one on a DataFrame derived from it), out
of triogroups' sight. Every such action is a Py4J call, and every Py4J call's answer passes
through ``py4j.protocol.get_return_value``; pyspark wraps that function once per session to
turn Java errors into Python ones, always starting again from the one in ``py4j.protocol``.
So the translation wraps that one, once per process: a Java error whose text carries a
member's failure (the markers `_task` puts around it) becomes SparkGroupError with that
member's traceback; every other error passes unchanged, and a session created later keeps
the translation.
"""

from __future__ import annotations

import threading
from typing import Any

from triogroups.supervisor.spark._setup import SparkGroupError
from triogroups.supervisor.spark._task import member_failure

__all__ = ["translate_member_failures"]

_reading = threading.local()  # True while the error's own text is fetched (a Py4J call too)


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
                found = member_failure(str(exc))
            finally:
                _reading.active = False
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
