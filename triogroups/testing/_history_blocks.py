"""The lock and counter rules on history files: ``lock``, ``unlock`` and ``count`` records.

Builds the `_block_rules` records (`Hold`, `Increment`) from each incarnation's history,
with the views it installed around them, and reports what those rules find as
`HistoryViolation`\\ s (**counter_doubled** with the ``add`` records as the calls,
when the run wrote any), plus one rule that needs the views themselves:

- **lock_minority**: a grant in majority mode (``"majority": true``) arrived in a view
  that held, for the view's coordinator, a majority of the coordinator's last full view
  (the last view it installed that held a majority of the one before it; its first view
  counts as full: the rule of `triogroups.blocks.Quorum`, replayed on the coordinator's
  view records). The coordinator's, not the owner's: members that went through different
  views judge majorities differently (campaign udp-total-blocks seed 3: A's last full
  view held C's first incarnation, killed since, so by A's count no later view held a
  majority, while B, the merge view's coordinator, counted one). A grant whose token is
  from a later view than the owner's (a coordinator that rebuilt its table in view N
  grants tokens from N * 2**32 up: `rebuild_locks`) arrived before its owner installed
  the view it was made in, and is not judged by the owner's view (seed 190).

`check_histories` calls `check_blocks`; histories without such records give nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from triogroups.testing._block_rules import (
    CounterCall,
    Hold,
    Increment,
    counter_violations,
    lock_violations,
)
from triogroups.testing._history_records import History, HistoryViolation, Line

__all__ = ["check_blocks"]

_VID = tuple[int, str]


def _vid(raw: Any) -> _VID:
    return int(raw[0]), str(raw[1])


class _Lineage:
    """An incarnation's views as its records go by: the current one and those before."""

    def __init__(self) -> None:
        self.views: list[Line] = []
        self.ids: list[_VID] = []
        self.merges: set[_VID] = set()
        self.full: frozenset[str] | None = None  # the last full view (majority mode)
        self.majority: dict[_VID, bool] = {}

    def install(self, line: Line) -> None:
        vid = _vid(line.record["id"])
        members = frozenset(line.record["members"])
        self.views.append(line)
        self.ids.append(vid)
        if line.record.get("merge"):
            self.merges.add(vid)
        full = self.full
        has = full is None or 2 * len(members & full) > len(full)
        if has:
            self.full = members
        self.majority[vid] = has

    def up_to(self, vid: _VID) -> int | None:
        """The index of ``vid`` among the views installed so far (the last such), or None."""
        for i in range(len(self.ids) - 1, -1, -1):
            if self.ids[i] == vid:
                return i
        return None

    def follows(self, i: int) -> _VID | None:
        """The view before view ``i`` when view ``i`` followed its coordinator's crash or
        leave and kept its first backup (no merge, no member added), else None."""
        if i < 1 or self.ids[i] in self.merges:
            return None
        before, now = self.views[i - 1].record, self.views[i].record
        coord = str(before["id"][1])
        backups = [m for m in before["members"] if m != coord][:1]
        if coord in now["members"] or not set(now["members"]) <= set(before["members"]):
            return None
        return _vid(before["id"]) if backups and backups[0] in now["members"] else None


def check_blocks(histories: Iterable[History]) -> list[HistoryViolation]:
    """Every violation of the lock and counter rules in ``histories``."""
    holds: list[Hold] = []
    increments: list[Increment] = []
    calls: list[CounterCall] = []
    out: list[HistoryViolation] = []
    names: dict[str, str] = {}
    majorities: dict[str, dict[_VID, bool]] = {}
    grants: list[tuple[_VID, Line, Line, str]] = []  # majority mode: view, its line, grant
    for history in histories:
        if history.member is None:
            continue
        names[history.member] = history.name
        majorities[history.member] = _read(history, holds, increments, calls, grants)
    for vid, view, line, owner in grants:
        if int(line.record["token"]) >> 32 > vid[0]:
            continue  # made in a view newer than the owner's
        if majorities.get(vid[1], {}).get(vid) is False:
            text = (
                f"{owner} was granted {line.record['name']!r} in view {list(vid)}, which "
                "held no majority of its coordinator's last full view"
            )
            out.append(HistoryViolation("lock_minority", text, (view, line)))
    found: list[tuple[str, str, tuple[Hold, Hold] | tuple[Increment, Increment]]] = [
        *lock_violations(holds),
        # histories without ``add`` records (written before them) leave out counter_doubled
        *counter_violations(increments, calls if calls else None),
    ]
    for rule, text, pair in found:
        for uuid, name in names.items():
            text = text.replace(uuid, name)
        excerpt: tuple[Line, ...] = ()
        for line in (line for record in pair for line in record.source):
            if not any(line is have for have in excerpt):
                excerpt += (line,)
        out.append(HistoryViolation(rule, text, excerpt))
    return out


def _read(
    history: History,
    holds: list[Hold],
    increments: list[Increment],
    calls: list[CounterCall],
    grants: list[tuple[_VID, Line, Line, str]],
) -> dict[_VID, bool]:
    """Add ``history``'s holds, increments, counter calls and grants in majority mode;
    returns whether
    each view it installed held a majority of its last full view."""
    assert history.member is not None
    me = history.member
    lineage = _Lineage()
    open_holds: dict[tuple[str, int], Hold] = {}
    mine: list[Hold] = []
    for line in history.lines:
        record, kind = line.record, line.record["k"]
        if kind == "view":
            lineage.install(line)
        elif kind == "lock":
            vid = _vid(record["view"])
            i = lineage.up_to(vid)
            if i is None:  # a grant recorded before its view: no view to judge it by
                continue
            hold = Hold(
                me,
                str(record["name"]),
                int(record["token"]),
                vid,
                float(record["t"]),
                members=frozenset(lineage.views[i].record["members"]),
                installed=tuple(lineage.ids[: i + 1]),
                merges=frozenset(lineage.merges),
                source=[lineage.views[i], line],
            )
            holds.append(hold)
            mine.append(hold)
            open_holds[(hold.name, hold.token)] = hold
            if record.get("majority"):
                grants.append((vid, lineage.views[i], line, history.name))
        elif kind == "unlock":
            found = open_holds.pop((str(record["name"]), int(record["token"])), None)
            if found is not None:
                found.end = float(record["t"])
                found.source.append(line)
        elif kind == "add":
            calls.append(
                CounterCall(
                    me, str(record["name"]), int(record["delta"]), float(record["t"]), [line]
                )
            )
        elif kind == "count" and lineage.views:
            i = len(lineage.views) - 1
            if _vid(record["view"]) != lineage.ids[i]:
                continue  # the view changed during the call: no rule compares it
            increments.append(
                Increment(
                    me,
                    str(record["name"]),
                    int(record["value"]),
                    float(record["since"]),
                    float(record["t"]),
                    view=lineage.ids[i],
                    follows=lineage.follows(i),
                    members=frozenset(lineage.views[i].record["members"]),
                    source=[lineage.views[i], line],
                )
            )
    installed = frozenset(lineage.ids)
    for hold in mine:
        hold.views = installed
    return lineage.majority
