"""Member histories, written and read: `HistoryWriter` (one JSON-lines file per
incarnation) and `read_histories`, and `HistoryViolation`, what a rule of the checker
reports; the record format is in `triogroups.testing._history`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from triogroups.address import Address
from triogroups.view import MergeView, View

__all__ = ["History", "HistoryViolation", "HistoryWriter", "Line", "read_histories"]


def _uuid(address: Address) -> str:
    return f"{address.uuid:032x}"


def _view_id(view: View) -> list[Any]:
    return [view.view_id.id, _uuid(view.view_id.coord)]


class HistoryWriter:
    """Records one member incarnation's history as JSON lines in ``path``.

    ``clock`` gives ``t`` for each record (`time.time` across processes,
    `trio.current_time` on virtual time). ``member`` None opens a fault log.
    ``traffic`` False: the member sends and delivers no messages of the run's traffic
    (it only calls the lock and counter services), so no rule asks it to deliver.
    Each record is flushed as it is written (line-buffered file), so what a
    killed process recorded is on disk.
    """

    def __init__(
        self,
        path: str | Path,
        member: Address | None,
        clock: Any,
        *,
        name: str = "",
        traffic: bool = True,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._file: IO[str] = open(self.path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        who = None if member is None else _uuid(member)
        extra = {} if traffic else {"traffic": False}
        self._write(
            "start", member=who, name=name or (member.name if member else "faults"), **extra
        )

    def _write(self, k: str, **fields: Any) -> None:
        record = {"k": k, "t": round(float(self._clock()), 6), **fields}
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")

    def send(
        self,
        msg_id: str,
        to: Address | None = None,
        *,
        oob: bool = False,
        loopback: bool = True,
        total: bool = False,
    ) -> None:
        """Record a send, before the message goes down the stack (``loopback`` False for
        a DONT_LOOPBACK multicast, which the sender does not deliver; ``total`` True for
        a multicast in the total order, which the **total_order** rule compares)."""
        extra: dict[str, bool] = {} if loopback else {"loopback": False}
        if total:
            if to is not None or oob:
                raise ValueError("total is for regular multicasts: not with to= or oob=True")
            extra["total"] = True
        self._write("send", id=msg_id, to=None if to is None else _uuid(to), oob=oob, **extra)

    def unsent(self, msg_id: str) -> None:
        """Take back the send recorded as ``msg_id``: it was cancelled before the stack took
        it, so nothing was sent (a send is recorded before it goes down, and one that waits
        for room in a full window can be cancelled while it waits)."""
        self._write("unsent", id=msg_id)

    def taken(self, msg_id: str) -> None:
        """Record that the stack took the send recorded as ``msg_id`` only now: the send
        waited at the top of the stack while a layer held senders back (a full MCAST
        window, no flow-control credits). Written only for a send that waited."""
        self._write("taken", id=msg_id)

    def deliver(self, src: Address, msg_id: str) -> None:
        """Record a delivery (in delivery order)."""
        self._write("deliver", **{"from": _uuid(src), "id": msg_id})

    def view(self, view: View) -> None:
        """Record a view installed (as the application saw it)."""
        vid = _view_id(view)
        merge = {"merge": True} if isinstance(view, MergeView) else {}
        self._write("view", id=vid, members=[_uuid(m) for m in view.members], **merge)

    def leave(self, flushed: bool | None) -> None:
        """Record a graceful leave once the member's disconnect returned: ``flushed`` is
        what it returned (None, from a disconnect that promises nothing, counts as
        False)."""
        self._write("leave", flushed=bool(flushed))

    def lock(self, name: str, token: int, view: View, *, majority: bool = False) -> None:
        """Record that a grant of lock ``name`` with fencing ``token`` arrived while this
        member had ``view`` installed (``majority``: the service runs in majority mode)."""
        extra = {"majority": True} if majority else {}
        self._write("lock", name=name, token=token, view=_view_id(view), **extra)

    def unlock(self, name: str, token: int, *, lost: bool = False) -> None:
        """Record that the hold of lock ``name`` granted with ``token`` ends now: its release
        is asked for (or the owner stops: cancelled, closing); ``lost`` when the service
        had told it the lock was taken from it (`Lock.lost`)."""
        self._write("unlock", name=name, token=token, lost=lost)

    def add(self, name: str, delta: int) -> None:
        """Record that an ``add_and_get`` of ``delta`` on counter ``name`` is called now,
        before it goes out: a call that times out or is cut short by a kill stays known
        (the **counter_doubled** rule counts every call that may have taken effect)."""
        self._write("add", name=name, delta=delta)

    def count(self, name: str, value: int, since: float, view: View) -> None:
        """Record that an ``add_and_get`` of a positive delta on counter ``name``, called at
        ``since`` (this writer's clock) while this member had ``view``, returned ``value``
        now."""
        self._write(
            "count", name=name, value=value, since=round(float(since), 6), view=_view_id(view)
        )

    def sample(self, rss: int, windows: dict[str, int]) -> None:
        """Record the process's resident memory and the messages each protocol holds."""
        self._write("sample", rss=rss, windows=windows)

    def fault(self, kind: str, detail: str = "") -> None:
        """Record a fault the run injected (in a fault log): partition, heal, kill, ..."""
        self._write("fault", kind=kind, detail=detail)

    def close(self) -> None:
        """Close the file (everything written is already on disk)."""
        self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Line:
    """One record and where it came from, for excerpts."""

    source: str
    number: int
    record: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.source}:{self.number}: {json.dumps(self.record, separators=(',', ':'))}"


@dataclass(frozen=True)
class HistoryViolation:
    """A broken rule, why, and the smallest excerpt of the histories that shows it."""

    rule: str
    text: str
    excerpt: tuple[Line, ...]

    def __str__(self) -> str:
        return "\n".join([f"{self.rule}: {self.text}", *(f"  {line}" for line in self.excerpt)])


@dataclass
class History:
    """The records of one file: an incarnation (``member`` set) or the fault log.

    ``traffic`` False: an incarnation that only called the lock and counter services
    (`HistoryWriter`)."""

    source: str
    member: str | None
    name: str
    lines: list[Line] = field(default_factory=list)
    traffic: bool = True

    @property
    def end(self) -> float:
        """The time of the last record: how long this history goes on."""
        return float(self.lines[-1].record["t"]) if self.lines else 0.0

    def of(self, kind: str) -> Iterator[Line]:
        """The records of one kind (``"view"``, ``"deliver"``, ...), in order."""
        return (line for line in self.lines if line.record["k"] == kind)


def read_histories(paths: Iterable[str | Path] | str | Path) -> list[History]:
    """Read history files (a directory means every ``*.jsonl`` file in it).

    A torn last line (a process killed mid-write) is ignored.
    """
    if isinstance(paths, str | Path):
        root = Path(paths)
        files = sorted(root.glob("*.jsonl")) if root.is_dir() else [root]
    else:
        files = [Path(p) for p in paths]
    out = []
    for path in files:
        history: History | None = None
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                record = json.loads(text)
            except json.JSONDecodeError:
                continue
            if history is None:
                if record.get("k") != "start":
                    raise ValueError(f"{path}: first record must be 'start', got {text[:60]!r}")
                history = History(
                    path.name,
                    record["member"],
                    record.get("name", ""),
                    traffic=record.get("traffic", True),
                )
            history.lines.append(Line(f"{history.name}({path.name})", number, record))
        if history is not None:
            out.append(history)
    return out
