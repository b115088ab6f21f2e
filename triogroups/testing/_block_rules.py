"""The lock and counter services' rules, judged on what their callers saw.

Pure functions over plain records, no I/O and no clock of their own: a hold of a lock
(`Hold`: its owner, fencing token, the owner's view at the grant, from the grant's
arrival until the release was asked for) and an increment of a counter (`Increment`:
its caller, the value ``add_and_get`` returned, when it was called and answered).
The lock tests fill a `LockHistory` as their tasks run; the history checker
(`triogroups.testing._history_blocks`) builds the same records from history files, so
the campaign and the chaos runner judge locks and counters by the same rules:

- **lock_owners**: no two holds of one lock at once that were granted in one view,
  nor while the earlier owner is a member of the later owner's view at its grant (its
  lock was given away while it was a member: only leaving or being excluded frees it).
  When the owners' views are known, the second case asks that the earlier owner
  installed that view itself (``views``; a coordinator cut off from the others may
  go on listing members that moved on to another coordinator's views, campaign
  udp-total-blocks seed 120), and a merge in the later owner's line of views
  (``installed``) since the earlier grant's view excuses it: after a split without
  majority mode both sides granted, and the merge tells the owner with the smaller
  token that it lost the lock (`Lock.lost`) only once the merged view is in place.
- **lock_token**: per lock, a grant's fencing token is larger than that of every
  earlier grant in a view the later owner installed before its own (along one line of
  views tokens only grow; the two sides of a split each grant their own).
- **counter_unique**: no two increments of one counter returned one value, when both
  were called and answered within one view (or either's view is not known).
- **counter_order**: an increment called after another was answered, both within one
  view, returned a larger value (linearisable: each takes effect at one instant
  between its call and its answer).
- **counter_lost**: an increment called in the view that followed the coordinator's
  crash or leave (``follows``: the earlier view, which a backup survived) returned more
  than every increment answered in that earlier view before it was called by a member
  still in the later view: the value survives the coordinator. (An increment whose
  caller went with the coordinator may have been answered across a split that kept its
  copy from the backups, which the service answers anyway: campaign udp-total-blocks
  seed 164.)
- **counter_doubled** (only when the calls are known, `CounterCall`: every
  ``add_and_get`` made, answered or not, on a counter that only such calls change,
  from 0): an increment returned more than the deltas of all the calls made before
  it was answered add up to, so some call was applied more than once. Each value a
  counter reaches is the sum of the deltas applied along its line of coordinators,
  each from a call made before; a split's side whose updates a merge dropped only
  leaves more calls than applications, never fewer. The first such increment of each
  counter is reported (every one after it may be over by the same call).

An increment is an ``add_and_get`` of a positive delta (the checks compare values).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import trio

__all__ = [
    "CounterCall",
    "Hold",
    "Increment",
    "LockHistory",
    "counter_violations",
    "lock_violations",
]


@dataclass
class Hold:
    """One hold of lock ``name``: from the grant's arrival (``start``) until its release
    was asked for (``end``; None: held to the end of the owner's history).

    ``view`` is the owner's view id at the grant and ``members`` the members of that
    view; ``installed`` the view ids the owner installed up to it, in order (None: not
    known), and ``merges`` those of them that were merge views; ``views`` every view id
    the owner installed in its life (None: not known). ``source`` is whatever
    the caller wants back with a violation (the history checker's records)."""

    owner: Hashable
    name: str
    token: int
    view: Hashable
    start: float
    end: float | None = None
    members: frozenset[Hashable] = frozenset()
    installed: tuple[Hashable, ...] | None = None
    merges: frozenset[Hashable] = frozenset()
    views: frozenset[Hashable] | None = None
    source: Any = None


@dataclass
class Increment:
    """One ``add_and_get`` of counter ``name`` by ``caller``: the value it returned, when
    it was called (``start``) and answered (``end``).

    ``view``: the caller's view id throughout the call (None: not known, compared with
    every other increment); ``follows``: the view id the caller had just before
    ``view``, when ``view`` followed its coordinator's crash or leave and kept one of
    its backups (else None); ``members``: the members of ``view`` (None: not known)."""

    caller: Hashable
    name: str
    value: int
    start: float
    end: float
    view: Hashable | None = None
    follows: Hashable | None = None
    members: frozenset[Hashable] | None = None
    source: Any = None


@dataclass
class CounterCall:
    """One ``add_and_get`` of ``delta`` on counter ``name`` by ``caller``, made at
    ``start``, whether it was answered, timed out or cut short by its caller's end."""

    caller: Hashable
    name: str
    delta: int
    start: float
    source: Any = None


@dataclass
class LockHistory:
    """Holds as their owners saw them, recorded on the current Trio clock as tasks run:
    from the grant's arrival until the release was asked for, so each recorded hold lies
    inside the coordinator's."""

    holds: list[Hold] = field(default_factory=list)

    def acquired(
        self,
        owner: Hashable,
        name: str,
        token: int,
        view: Hashable,
        members: Iterable[Hashable] = (),
    ) -> Hold:
        """Record a grant that arrived now; returns the hold to pass to `released`."""
        hold = Hold(owner, name, token, view, trio.current_time(), None, frozenset(members))
        self.holds.append(hold)
        return hold

    @staticmethod
    def released(hold: Hold) -> None:
        """Record that ``hold``'s release is asked for now."""
        hold.end = trio.current_time()

    def violations(self) -> list[str]:
        """Every broken lock rule, as text."""
        return [text for _, text, _ in lock_violations(self.holds)]


def _no_merge_since(hold: Hold, view: Hashable) -> bool:
    """Whether ``hold``'s owner installed no merge view after ``view`` up to its grant
    (none at all when it never installed ``view``; True when its views are not known)."""
    if hold.installed is None:
        return True
    since = hold.installed
    if view in since:
        since = since[since.index(view) + 1 :]
    return not any(v in hold.merges for v in since)


def lock_violations(holds: Iterable[Hold]) -> list[tuple[str, str, tuple[Hold, Hold]]]:
    """(rule, text, (earlier hold, later hold)) for each broken lock rule (module
    docstring), the holds of each lock taken in the order their grants arrived."""
    found = []
    by_name: dict[str, list[Hold]] = defaultdict(list)
    for hold in sorted(holds, key=lambda h: h.start):
        by_name[hold.name].append(hold)
    for name, ordered in by_name.items():
        for i, h in enumerate(ordered):
            for g in ordered[:i]:
                known = h.installed is None or g.view in h.installed
                if known and g.token >= h.token:
                    text = f"{name}: token {h.token} of {h.owner} after {g.token} of {g.owner}"
                    found.append(("lock_token", text, (g, h)))
                overlaps = g.end is None or g.end > h.start
                given_away = (
                    g.owner in h.members
                    and (g.views is None or h.view in g.views)
                    and _no_merge_since(h, g.view)
                )
                if overlaps and (g.view == h.view or given_away):
                    text = f"{name}: {g.owner} and {h.owner} held it at once in {h.view}"
                    found.append(("lock_owners", text, (g, h)))
    return found


def counter_violations(
    increments: Iterable[Increment], calls: Iterable[CounterCall] | None = None
) -> list[tuple[str, str, tuple[Increment, Increment]]]:
    """(rule, text, (one increment, the other)) for each broken counter rule (module
    docstring); **counter_doubled** only when ``calls`` are given (its pair is the
    increment twice)."""
    found = []
    by_name: dict[str, list[Increment]] = defaultdict(list)
    for inc in sorted(increments, key=lambda i: i.start):
        by_name[inc.name].append(inc)
    if calls is not None:
        found.extend(_doubled(by_name, calls))
    for name, ordered in by_name.items():
        for i, b in enumerate(ordered):
            for a in ordered[:i]:
                one_view = a.view is None or b.view is None or a.view == b.view
                if one_view and a.value == b.value:
                    text = f"{name}: {a.caller} and {b.caller} both got {a.value}"
                    found.append(("counter_unique", text, (a, b)))
                elif a.end < b.start and a.value >= b.value:
                    if one_view:
                        rule, why = "counter_order", "called after it was answered"
                    elif (
                        b.follows is not None
                        and b.follows == a.view
                        and (b.members is None or a.caller in b.members)
                    ):
                        rule, why = "counter_lost", "called after the coordinator went"
                    else:
                        continue
                    text = (
                        f"{name}: {b.caller} got {b.value}, {why}, after {a.caller} got {a.value}"
                    )
                    found.append((rule, text, (a, b)))
    return found


def _doubled(
    by_name: dict[str, list[Increment]], calls: Iterable[CounterCall]
) -> list[tuple[str, str, tuple[Increment, Increment]]]:
    """**counter_doubled**: per counter, the first increment (in answer order) whose
    value is more than the deltas of the calls made up to its answer add up to."""
    made: dict[str, list[CounterCall]] = defaultdict(list)
    for call in sorted(calls, key=lambda c: c.start):
        made[call.name].append(call)
    found = []
    for name, incs in by_name.items():
        ordered = made.get(name, [])
        i = total = 0
        for inc in sorted(incs, key=lambda x: x.end):
            while i < len(ordered) and ordered[i].start <= inc.end:
                total += ordered[i].delta
                i += 1
            if inc.value > total:
                text = (
                    f"{name}: {inc.caller} got {inc.value}, more than the {total} added by "
                    f"the calls made before it was answered: an add applied twice"
                )
                found.append(("counter_doubled", text, (inc, inc)))
                break
    return found
