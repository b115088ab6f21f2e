"""The singleton tests' history checker: which member ran the singleton when, in which view.

The lock and counter rules are the package's (`triogroups.testing._block_rules`), which the
campaign and the chaos runner use on their histories too."""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from triogroups import View


@dataclass
class Run:
    """One incarnation's life on a member: from the actor's start to its stop (or
    None while it runs), with the view the member had installed at the start."""

    member: str
    start: float
    view: View
    end: float | None = None


@dataclass
class SingletonHistory:
    """Starts and stops of a singleton's actor, and the views each member installed,
    on virtual time (events at one instant count as simultaneous)."""

    runs: list[Run] = field(default_factory=list)
    views: dict[str, list[tuple[float, View]]] = field(default_factory=dict)

    def started(self, member: str, view: View) -> Run:
        run = Run(member, trio.current_time(), view)
        self.runs.append(run)
        return run

    @staticmethod
    def stopped(run: Run) -> None:
        run.end = trio.current_time()

    def installed(self, member: str, view: View) -> None:
        self.views.setdefault(member, []).append((trio.current_time(), view))

    def running(self) -> list[str]:
        return [run.member for run in self.runs if run.end is None]

    def view_of(self, member: str, time: float) -> View | None:
        """The view ``member`` had installed last at ``time``."""
        found = None
        for at, view in self.views.get(member, []):
            if at > time:
                break
            found = view
        return found

    def violations(self) -> list[str]:
        """Each run started on the coordinator of its member's view; no run goes on past
        a view in which its member is not the coordinator; no two runs at once (for a
        time longer than an instant) whose members had one view installed, nor two on
        one member."""
        found = []
        end = float("inf")
        for run in self.runs:
            if run.view.coord.name != run.member:
                found.append(f"{run.member} started it in {run.view} as a non-coordinator")
            stop = end if run.end is None else run.end
            for at, view in self.views.get(run.member, []):
                if run.start < at < stop and view.coord.name != run.member:
                    found.append(f"{run.member} still ran it at {at} in {view}")
        for i, r in enumerate(self.runs):
            for g in self.runs[:i]:
                lo = max(r.start, g.start)
                hi = min(end if r.end is None else r.end, end if g.end is None else g.end)
                if not lo < hi:
                    continue
                if r.member == g.member:
                    found.append(f"{r.member} ran it twice at once from {lo}")
                    continue
                times = [lo] + [
                    at
                    for m in (r.member, g.member)
                    for at, _ in self.views.get(m, [])
                    if lo < at < hi
                ]
                for t in times:
                    vr, vg = self.view_of(r.member, t), self.view_of(g.member, t)
                    if vr is not None and vg is not None and vr.view_id == vg.view_id:
                        found.append(f"{g.member} and {r.member} ran it at once in {vr} at {t}")
                        break
        return found
