"""The counter service's rules: the coordinator's counters, their backups and rebuild.

A sans-IO state object, as `_locktable`: operations go in, results come back and every
changed counter is put in ``outbox`` for the backups. Nothing here ever awaits.

Decisions where JGroups' COUNTER leaves a choice:

- A counter that was never set reads as 0 (no create step).
- Every update carries the caller's `Caller` (member, seqno, and ``done_below``: every
  seqno of that member below it has its answer). Each counter remembers, per member,
  the result of each update it applied whose answer may not have arrived yet, and
  answers a resent update with it instead of applying it twice: a caller whose
  coordinator crashed after the backups had the update but before the answer left
  asks the next coordinator and gets the same answer. What ``done_below`` covers is
  forgotten with the member's next update of that counter (as RIFL keeps completion
  records until the client acknowledges them), so a member may have many updates in
  flight at once.
- Each counter also keeps, per member, its floor: the highest ``done_below`` it has
  seen. An update below the floor whose answer is no longer remembered is stale (a
  resend of an update answered long ago, delayed in the network) and is not applied
  again: `StaleUpdate`. Its caller gave up on it already (a caller still waiting
  for an update makes every later ``done_below`` at most its seqno). The floor is in
  the entry, so it is copied to the backups and kept by a rebuild; forgetting the
  answers below ``done_below`` keeps it. Without it a stale resend that arrived after
  the answers were forgotten was applied twice (campaign udp-total-blocks seed 73122,
  issue 42).
- A member that leaves the view keeps its answers for ``keep_departed`` seconds after
  the first view without it (the service: twice its ``timeout``, the longest a caller
  asks again for one update; `install_view`, `expire`), then they are forgotten. A
  member dropped from the view (suspected, cut off) may be merged back with an update
  the table applied but never answered; forgetting its answers with the view that
  dropped it applied that update twice once the merge took it back (issue 42).
  Its floor goes with its answers: by then no resend of its is still on its way.
- An entry's content changes only with a new version (forgetting a departed member's
  answers too), so two copies of one version are the same: a rebuild keeps the
  remembered answers whichever copy of the newest version it picks.
- Backups keep the newest version of each counter; the copies of the new
  coordinator's own side win after a merge (see `rebuild_counters`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from triogroups._error_root import TriogroupsError
from triogroups.address import Address

__all__ = [
    "KEEP_DEPARTED",
    "Caller",
    "CounterCopy",
    "CounterEntry",
    "CounterReport",
    "CounterTable",
    "StaleUpdate",
    "rebuild_counters",
]


#: How long a departed member's answers are kept by default (seconds): twice the
#: counter service's default ``timeout``.
KEEP_DEPARTED = 20.0


class StaleUpdate(TriogroupsError):
    """An update below its member's floor whose answer is forgotten: not applied (its
    caller gave up on it long ago)."""


class Caller(NamedTuple):
    """Who sends an update: a member (its 16-byte address), the update's seqno, and the
    seqno below which every update of this member has its answer."""

    member: bytes
    seqno: int
    done_below: int


class CounterEntry(NamedTuple):
    """One counter as the backups keep it: value, version, and per member (its 16-byte
    address) the results of its updates that may still be resent, by seqno, and its
    floor: the highest ``done_below`` seen (an update below it is answered or stale)."""

    name: str
    value: int
    version: int
    last: Mapping[bytes, Mapping[int, Any]]
    floor: Mapping[bytes, int] = {}

    def encode(self) -> list[Any]:
        last = [[m, [[s, r] for s, r in done.items()]] for m, done in self.last.items()]
        floor = [[m, f] for m, f in self.floor.items()]
        return [self.name, self.value, self.version, last, floor]

    @classmethod
    def decode(cls, raw: Sequence[Any]) -> CounterEntry:
        last = {m: {int(s): r for s, r in done} for m, done in raw[3]}
        floor = {m: int(f) for m, f in raw[4]}
        return cls(str(raw[0]), int(raw[1]), int(raw[2]), last, floor)


@dataclass
class CounterReport:
    """What one member tells a new coordinator: its backup copy."""

    member: Address
    copy: list[CounterEntry] = field(default_factory=list)


class CounterTable:
    """The coordinator's counters and what changed since the backups last heard.

    ``version`` grows with every update; `entries` as of ``version`` is what a new
    backup takes in place of its copy (`CounterCopy.replace`).
    """

    def __init__(
        self, entries: Iterable[CounterEntry] = (), *, keep_departed: float = KEEP_DEPARTED
    ) -> None:
        self.counters: dict[str, CounterEntry] = {e.name: e for e in entries}
        self.version = max([0] + [e.version for e in self.counters.values()])
        self.outbox: list[CounterEntry] = []
        self.keep_departed = keep_departed
        #: members with remembered answers that the last view left out, and when the
        #: first view without them was installed
        self.departed: dict[bytes, float] = {}

    def get(self, name: str) -> int:
        entry = self.counters.get(name)
        return 0 if entry is None else entry.value

    def set(self, name: str, value: int, caller: Caller) -> None:
        """Set ``name`` to ``value``; raises `StaleUpdate` (as every update) for a stale
        resend."""
        self._update(name, caller, lambda _: (value, None))

    def add_and_get(self, name: str, delta: int, caller: Caller) -> int:
        result: int = self._update(name, caller, lambda v: (v + delta, v + delta))
        return result

    def compare_and_set(self, name: str, expect: int, update: int, caller: Caller) -> bool:
        result: bool = self._update(
            name, caller, lambda v: (update, True) if v == expect else (v, False)
        )
        return result

    def install_view(self, members: Iterable[Address], now: float) -> None:
        """A view installed at ``now``: a member with remembered answers that it leaves
        out is departed from now on (unless it already was), one it lists again is not;
        then `expire`."""
        live = {m.to_bytes() for m in members}
        for member in [m for m in self.departed if m in live]:
            del self.departed[member]
        for entry in self.counters.values():
            for member in entry.last:
                if member not in live:
                    self.departed.setdefault(member, now)
        self.expire(now)

    def expire(self, now: float) -> None:
        """Forget the answers of members departed ``keep_departed`` seconds or more
        before ``now``, and their floors with them (no resend of theirs is still on its
        way): each counter that held some gets a new version (to the outbox)."""
        keep = self.keep_departed
        gone = {m for m, since in self.departed.items() if now - since >= keep}
        if not gone:
            return
        for member in gone:
            del self.departed[member]
        for name, entry in list(self.counters.items()):
            if any(m in gone for m in entry.last):
                self.version += 1
                last = {m: r for m, r in entry.last.items() if m not in gone}
                floor = {m: f for m, f in entry.floor.items() if m not in gone}
                entry = CounterEntry(name, entry.value, self.version, last, floor)
                self.counters[name] = entry
                self.outbox.append(entry)

    def entries(self) -> list[CounterEntry]:
        return list(self.counters.values())

    def take_outbox(self) -> list[CounterEntry]:
        out, self.outbox = self.outbox, []
        return out

    def _update(self, name: str, caller: Caller, op: Any) -> Any:
        entry = self.counters.get(name)
        if entry is None:
            entry = CounterEntry(name, 0, 0, {})
        member, seqno, done_below = caller
        done = entry.last.get(member, {})
        if seqno in done:
            return done[seqno]  # a resent update: answered before, not applied again
        floor = entry.floor.get(member, 0)
        if seqno < floor:
            raise StaleUpdate(f"update {seqno} is below its member's floor {floor}")
        value, result = op(entry.value)
        self.version += 1
        floor = max(floor, done_below)
        kept = {s: r for s, r in done.items() if s >= floor}
        kept[seqno] = result
        last = {**entry.last, member: kept}
        entry = CounterEntry(name, value, self.version, last, {**entry.floor, member: floor})
        self.counters[name] = entry
        self.outbox.append(entry)
        return result


class CounterCopy:
    """A backup's copy: the newest version of each counter."""

    def __init__(self) -> None:
        self.entries: dict[str, CounterEntry] = {}

    def apply(self, entries: Iterable[CounterEntry]) -> None:
        for entry in entries:
            have = self.entries.get(entry.name)
            if have is None or entry.version > have.version:
                self.entries[entry.name] = entry

    def replace(self, entries: Iterable[CounterEntry], version: int) -> None:
        """Take the coordinator's whole table as of ``version`` (a new backup, or a
        rebuilt table): older copies go, newer updates that came first stay."""
        self.entries = {n: e for n, e in self.entries.items() if e.version > version}
        self.apply(entries)


def rebuild_counters(
    reports: Mapping[Address, CounterReport],
    side: Iterable[Address] | None = None,
    *,
    keep_departed: float = KEEP_DEPARTED,
) -> CounterTable:
    """A new coordinator's counters from the members' backup copies: per counter the
    newest copy, taken from ``side`` (after a merge: the new coordinator's own
    subgroup) wherever that side has the counter, from the others only where it has
    not. So after a merge the merge leader's side wins and updates made on the other
    side while the group was split are lost; a counter only the other side knew is
    kept. The chosen copy's remembered answers come with it (departed members'
    included: the table's `install_view` starts their time again)."""
    preferred = None if side is None else frozenset(side)
    mine: dict[str, CounterEntry] = {}
    others: dict[str, CounterEntry] = {}
    for member, report in reports.items():
        into = mine if preferred is None or member in preferred else others
        for entry in report.copy:
            have = into.get(entry.name)
            if have is None or entry.version > have.version:
                into[entry.name] = entry
    top = max([0] + [e.version for r in reports.values() for e in r.copy]) + 1
    chosen = {**others, **mine}.values()
    table = CounterTable((e._replace(version=top) for e in chosen), keep_departed=keep_departed)
    table.version = top
    return table
