"""When a run's fault log kept two members from talking: the outages the history checker excuses.

A chaos run or campaign records the faults it injects in its fault log (see
`triogroups.testing._history`). Some of them stop two members from reaching each
other: a ``partition`` (``"A,B | C,D until 9.30"``: nobody on one side hears the
other side), a ``oneway`` split (``"oneway A,B stop hearing C,D until 9.30"``), and a
``pause`` of one member (``"D"``, until its ``resume``). Each ends with an ``end``
record carrying the same detail, or with a ``heal`` (which ends every split and
pause; the real chaos runner ends each split with a ``heal`` carrying its detail, which
ends that split only). `Outages` reads them, by member name, and answers how long two
members could talk both ways within a time span: retransmission needs a request and an
answer, so an outage in either direction counts. It asks by history name: a real chaos
member's history is named after its incarnation (``"E.936cd6"``) while its faults name
``"E"`` (`names_member`).

A ``leave`` or ``restart`` step (detail: the bare name; the record that ends the leave
says ``"F flushed=True"``) starts the member's leave, which lasts until the name's
next ``start``: the contract promises nothing to a member that leaves, so from then
on it counts as cut off from everyone (campaign udp-mcast 10001: F began to leave
8 s after G's multicast, which waited in G's full MCAST window for acks from the other
side of a partition; F's leave ended unflushed 6 s later, the multicast still held).

`cuts_off` says whether one fault record takes a member away from the others (the
**no_traffic_after_heal** rule excuses a member that a fault cuts off soon after a heal).

Reads records only: it never judges a run. Details it cannot read (another tool's
format) stop nothing, so they excuse nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["Outages", "cuts_off", "names_member"]

#: the fault kinds whose detail is the bare name of the one member they stop
_DOWN = ("pause", "kill", "restart", "leave")


def _names(text: str) -> set[str]:
    return {n.strip() for n in text.split(",") if n.strip()}


def _blocked_pairs(kind: str, detail: str) -> set[tuple[str, str]]:
    """(deaf, source) name pairs a split's detail blocks; empty if it cannot be read."""
    body = detail.split(" until ")[0]
    if kind == "partition":
        body = body.removeprefix("partition ").strip()
        groups = [_names(g) for g in body.split("|")]
        if len(groups) < 2:
            return set()
        return {
            (a, b)
            for i, ga in enumerate(groups)
            for j, gb in enumerate(groups)
            if i != j
            for a in ga
            for b in gb
        }
    if kind == "oneway":
        body = body.removeprefix("oneway ")
        deaf, sep, sources = body.partition(" stop hearing ")
        if not sep:
            return set()
        return {(a, b) for a in _names(deaf) for b in _names(sources)}
    return set()


def names_member(name: str, history_name: str) -> bool:
    """Whether a fault log's member ``name`` is the member of history ``history_name``: the
    same, or its incarnation (a chaos member's history is named ``"E.936cd6"``, its faults
    ``"E"``)."""
    return history_name == name or history_name.startswith(f"{name}.")


def cuts_off(kind: str, detail: str, history_name: str) -> bool:
    """Whether a fault starting with this record cuts the member of ``history_name`` off from
    others: a split it is on either side of, or its pause, kill, restart or leave."""
    if kind in _DOWN:
        return names_member(detail.split(" ")[0], history_name) if detail else False
    return any(
        names_member(a, history_name) or names_member(b, history_name)
        for a, b in _blocked_pairs(str(kind), detail)
    )


class Outages:
    """The spans of a run in which faults kept members apart (see the module docstring)."""

    def __init__(self, faults: Iterable[Any]) -> None:
        #: (deaf name, source name) -> closed spans (start, end) the network blocked.
        self._blocked: dict[tuple[str, str], list[tuple[float, float]]] = {}
        #: name -> spans the member was paused, or leaving (see the module docstring).
        self._paused: dict[str, list[tuple[float, float]]] = {}
        open_splits: dict[str, tuple[float, set[tuple[str, str]]]] = {}
        open_pauses: dict[str, float] = {}
        open_leaves: dict[str, float] = {}
        for line in faults:
            record = line.record
            kind, t = record.get("kind"), float(record["t"])
            detail = str(record.get("detail", ""))
            if kind in ("partition", "oneway"):
                pairs = _blocked_pairs(kind, detail)
                if pairs:
                    open_splits[detail] = (t, pairs)
            elif kind == "end" and detail in open_splits:
                self._close_split(open_splits.pop(detail), t)
            elif kind == "pause" and detail:
                open_pauses.setdefault(detail, t)
            elif kind == "resume" and detail in open_pauses:
                self._paused.setdefault(detail, []).append((open_pauses.pop(detail), t))
            elif kind in ("leave", "restart") and detail and " " not in detail:
                open_leaves.setdefault(detail, t)
            elif kind == "start" and detail in open_leaves:
                self._paused.setdefault(detail, []).append((open_leaves.pop(detail), t))
            elif kind == "heal" and detail in open_splits:
                # the real chaos runner's end of one split: it ends that split only
                self._close_split(open_splits.pop(detail), t)
            elif kind == "heal":
                for split in open_splits.values():
                    self._close_split(split, t)
                for name, start in open_pauses.items():
                    self._paused.setdefault(name, []).append((start, t))
                open_splits.clear()
                open_pauses.clear()
        for split in open_splits.values():
            self._close_split(split, float("inf"))
        for name, start in [*open_pauses.items(), *open_leaves.items()]:
            self._paused.setdefault(name, []).append((start, float("inf")))

    def _close_split(self, split: tuple[float, set[tuple[str, str]]], end: float) -> None:
        start, pairs = split
        for pair in pairs:
            self._blocked.setdefault(pair, []).append((start, end))

    def connected(self, a: str, b: str, start: float, end: float) -> float:
        """Seconds within [start, end] in which ``a`` and ``b`` could reach each other both
        ways: neither paused, no split between them in either direction."""
        return _unblocked(self._spans(a, b), start, end)

    def connected_via(self, a: str, relay: str, b: str, start: float, end: float) -> float:
        """Seconds within [start, end] in which ``a`` and ``b`` could both reach ``relay``
        both ways at once: what a message that only ``relay`` orders or forwards needs
        (a totally ordered multicast goes through its coordinator)."""
        return _unblocked(self._spans(a, relay) + self._spans(relay, b), start, end)

    def apart_since(self, a: str, b: str, t: float) -> float:
        """When the outage between ``a`` and ``b`` that still held at ``t`` began (spans that
        overlap or meet end to end are one outage), or infinity if they could reach each
        other both ways at ``t``."""
        since, reach = float("inf"), float("-inf")
        for start, end in sorted(self._spans(a, b)):
            if start > t:
                break
            if start > reach:  # a gap: a new outage begins
                since = start
            reach = max(reach, end)
        return since if reach > t else float("inf")

    def _spans(self, a: str, b: str) -> list[tuple[float, float]]:
        """The spans in which ``a`` and ``b`` could not reach each other both ways."""
        spans = [
            span
            for (deaf, source), spans in self._blocked.items()
            if (names_member(deaf, a) and names_member(source, b))
            or (names_member(deaf, b) and names_member(source, a))
            for span in spans
        ]
        spans += [
            span
            for name, spans in self._paused.items()
            if names_member(name, a) or (b != a and names_member(name, b))
            for span in spans
        ]
        return spans


def _unblocked(spans: list[tuple[float, float]], start: float, end: float) -> float:
    """The seconds of [start, end] outside every span of ``spans``."""
    if end <= start:
        return 0.0
    cut = sorted((max(s, start), min(e, end)) for s, e in spans if s < end and e > start)
    lost, reach = 0.0, start
    for s, e in cut:
        if e > reach:
            lost += e - max(s, reach)
            reach = e
    return end - start - lost
