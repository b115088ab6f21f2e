"""The Row form's input: a DataFrame's rows handed to its members as pyspark Rows, via Arrow.

``DataFrame.rdd`` is where the Row form of `map_in_group` spent most of its time (issue 39:
1,000,000 rows in 4 partitions took 7.0 s to reach Python as Rows on a standalone cluster,
plain Spark's whole query 4.8 s): the executor's JVM turns every row into a Java object and
pickles it, and Python unpickles it through five calls of pyspark's per row. For a DataFrame
whose columns are all of the plain types below, `dataframe_rows` instead moves the partition
as Arrow record batches (Spark's vectorized path, as the Arrow form does): a ``mapInArrow``
step writes each batch as one Arrow IPC stream into a binary column, ``.rdd`` hands those few
large values to the barrier task, and there each column becomes Python values at once
(``to_pylist``) and each row a Row in one call. The Rows are the very ones ``df.rdd`` gives
(a ``Row`` tuple of the values, ``__fields__`` the column names), since for these types
Arrow's Python values and the unpickled ones are the same: bool, int, float, str, None.

Any other DataFrame (a date, timestamp, decimal, binary, array, map or struct column; no
columns), and any DataFrame when pyarrow or pandas is missing, keeps ``df.rdd``. pyarrow is
imported only in these functions: ``import triogroups`` must work without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["arrow_rows_apply", "dataframe_rows", "rows_of_batches"]

# The Spark types whose Arrow values in Python equal what df.rdd's unpickling gives.
_PLAIN = (
    "BooleanType",
    "ByteType",
    "ShortType",
    "IntegerType",
    "LongType",
    "FloatType",
    "DoubleType",
    "StringType",
)


def arrow_rows_apply(schema: Any) -> bool:
    """Whether a DataFrame of ``schema`` (a StructType) goes to Python through Arrow: at
    least one column, every one of a plain type (`_PLAIN`)."""
    fields = list(schema.fields)
    return bool(fields) and all(type(f.dataType).__name__ in _PLAIN for f in fields)


def _as_ipc(batches: Iterable[Any]) -> Iterator[Any]:
    """``mapInArrow``'s function: each record batch as one row of one binary column."""
    import pyarrow as pa

    for batch in batches:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        ipc = sink.getvalue().to_pybytes()
        yield pa.RecordBatch.from_arrays([pa.array([ipc], pa.binary())], ["ipc"])


def rows_of_batches(names: list[str]) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The partition function that turns `_as_ipc`'s rows back into Rows of ``names``: what
    ``StructType.fromInternal`` and ``_create_row`` make of a row no field of which needs
    converting, a ``Row`` of the values whose ``__fields__`` is ``names``, in one call."""

    def rows(items: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.types import Row

        new = tuple.__new__

        def make(*values: Any) -> Any:
            row = new(Row, values)
            row.__dict__["__fields__"] = names  # what Row.__setattr__ does, minus its check
            return row

        for item in items:
            for batch in pa.ipc.open_stream(pa.py_buffer(item[0])):
                yield from map(make, *(column.to_pylist() for column in batch.columns))

    return rows


def dataframe_rows(data: Any) -> Any:
    """The rows of ``data`` as an RDD of Rows equal to ``data.rdd``'s, through Arrow when
    ``data`` is a DataFrame of plain columns (`arrow_rows_apply`) and pyarrow and pandas are
    there; otherwise ``data.rdd`` (an RDD is returned as it is)."""
    if not hasattr(data, "mapInArrow"):
        return getattr(data, "rdd", data)
    try:
        from pyspark.sql.pandas.utils import (
            require_minimum_pandas_version,
            require_minimum_pyarrow_version,
        )

        require_minimum_pyarrow_version()
        require_minimum_pandas_version()
    except ImportError:
        return data.rdd
    if not arrow_rows_apply(data.schema):
        return data.rdd
    return data.mapInArrow(_as_ipc, "ipc BINARY").rdd.mapPartitions(
        rows_of_batches(list(data.schema.names))
    )
