"""The Arrow form of `map_in_group`: a member per partition of a barrier ``mapInArrow`` stage.

Spark hands each task its partition as ``pyarrow.RecordBatch`` objects and takes batches
back. This module does the two conversions around the member: the partition's batches to
rows (tuples in column order, made only when the member first reads ``task.rows``), and what
the member returns (records, batches or a table) to batches of the result's schema, inside
the member so a result that does not fit is that member's failure. pyarrow is imported only
in these functions: ``import triogroups`` must work without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from triogroups.supervisor.spark._task import TaskSpec, run_task

__all__ = ["BatchRows", "arrow_stage", "to_batches"]


class BatchRows(Sequence[tuple[Any, ...]]):
    """The rows of record batches as tuples, converted column by column on first read."""

    def __init__(self, batches: list[Any]) -> None:
        self._batches = batches
        self._rows: list[tuple[Any, ...]] | None = None

    def _all(self) -> list[tuple[Any, ...]]:
        if self._rows is None:
            self._rows = [
                row
                for batch in self._batches
                for row in zip(*(column.to_pylist() for column in batch.columns), strict=True)
            ]
        return self._rows

    def __len__(self) -> int:
        return sum(batch.num_rows for batch in self._batches)

    @overload
    def __getitem__(self, index: int) -> tuple[Any, ...]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[Any, ...]]: ...
    def __getitem__(self, index: int | slice) -> tuple[Any, ...] | Sequence[tuple[Any, ...]]:
        return self._all()[index]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._all())


def to_batches(result: Any, schema: Any) -> list[Any]:
    """A member's result as record batches of ``schema`` (a ``pyarrow.Schema``).

    Accepts a RecordBatch, a Table, an iterable of them, or an iterable of records: tuples
    (Rows too) in the schema's field order, or mappings by field name.
    """
    import pyarrow as pa

    if isinstance(result, pa.RecordBatch | pa.Table):
        result = [result]
    if not isinstance(result, Iterable):
        raise TypeError(
            "an arrow member must return records, RecordBatches or a Table, "
            f"got {type(result).__name__}"
        )
    items = list(result)
    if items and all(isinstance(item, pa.RecordBatch | pa.Table) for item in items):
        tables = [pa.Table.from_batches([i]) if isinstance(i, pa.RecordBatch) else i for i in items]
        table = pa.concat_tables([t.select(schema.names).cast(schema) for t in tables])
        batches: list[Any] = table.to_batches()
        return batches
    if items and isinstance(items[0], Mapping):
        return [pa.RecordBatch.from_pylist(items, schema=schema)]
    columns = list(zip(*items, strict=True)) or [()] * len(schema)
    if len(columns) != len(schema):
        raise ValueError(
            f"records must have {len(schema)} fields ({', '.join(schema.names)}), "
            f"got {len(columns)}"
        )
    arrays = [pa.array(column, type=f.type) for column, f in zip(columns, schema, strict=True)]
    return [pa.RecordBatch.from_arrays(arrays, schema=schema)]


def arrow_stage(spec: TaskSpec, schema: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` runs in each task: gather the partition, run its member."""

    def stage(batches: Iterator[Any]) -> Iterator[Any]:
        received = list(batches)
        yield from run_task(
            spec, BatchRows(received), received, lambda result: to_batches(result, schema)
        )

    return stage
