"""The demo behind ``triogroups demo``: a reliable group on a lossy network.

Members join through GMS on the simulated network, then every member
multicasts while DISCARD drops a share of everything that arrives (data,
acks, retransmissions alike). NAKACK2 heals the loss: the table shows every
member delivered every message from every sender, in order, and the line
below it what it took (messages dropped, retransmission requests).

The demo runs on a virtual clock (Trio's ``MockClock`` with autojump): the
faults, the task scheduling and the addresses all come from ``--seed``, so a
seed replays its run exactly, and a failure can be reproduced with the seed
it names. A run that does not converge ends with what did not (which member
lacks what, which member is in which view) and exit status 1, never with a
traceback.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import trio
from rich.console import Console
from rich.status import Status
from rich.table import Table
from trio.testing import MockClock

from triogroups._cli_exit import Stopped, run_stoppable, stopped
from triogroups.config import StackConfig
from triogroups.runtime import tune_gc
from triogroups.testing import ContractViolation, SimCluster, SimMember, open_cluster
from triogroups.view import View

__all__ = ["Outcome", "demo_stack", "problems", "report", "run"]

JOIN_TIMEOUT = 60.0
"""Virtual seconds for all members to join and agree on one view."""
DELIVERY_TIMEOUT = 120.0
"""Virtual seconds for every member to deliver every multicast."""
PROGRESS_EVERY = 5.0
"""Real seconds between progress lines when the output is not a terminal."""


def demo_stack(loss: float, seed: int) -> StackConfig:
    """The demo's stack: discovery, loss, reliable multicast and unicast, membership."""
    return StackConfig.of(
        "SIM",
        "PING",
        ("DISCARD", {"up_loss": loss, "seed": seed}),
        ("NAKACK2", {"xmit_interval": 0.1}),
        ("UNICAST3", {"xmit_interval": 0.1}),
        ("STABLE", {"desired_avg_gossip": 1.0}),
        "GMS",
    )


@dataclass
class Outcome:
    """What a demo run ended with, by member name: the checks read only this."""

    members: list[str]
    messages: int
    """Multicasts each member was to send."""
    joined: bool = True
    """Whether all members agreed on one view (the multicasts start only then)."""
    views: dict[str, str | None] = field(default_factory=dict)
    """The id of the view each member last installed (``None``: it never joined)."""
    view_members: dict[str, list[str]] = field(default_factory=dict)
    """View id -> its members."""
    sent: dict[str, int] = field(default_factory=dict)
    delivered: dict[tuple[str, str], int] = field(default_factory=dict)
    """(receiver, sender) -> messages delivered."""
    contract: str | None = None
    """The delivery contract's complaint (duplicates, order), if any."""


def problems(outcome: Outcome) -> list[str]:
    """What did not converge, one sentence each; empty when the run succeeded."""
    found: list[str] = []
    never = [m for m in outcome.members if outcome.views.get(m) is None]
    if never:
        found.append(f"never joined: {', '.join(never)}")
    by_view: dict[str, list[str]] = {}
    for member in outcome.members:
        view = outcome.views.get(member)
        if view is not None:
            by_view.setdefault(view, []).append(member)
    if len(by_view) > 1:
        groups = "; ".join(
            f"{', '.join(ms)} in {view} ({', '.join(outcome.view_members.get(view, []))})"
            for view, ms in by_view.items()
        )
        found.append(f"members disagree on the view: {groups}")
    for view in by_view:
        left_out = set(outcome.members) - set(outcome.view_members.get(view, []))
        if left_out:
            found.append(f"view {view} lacks {', '.join(sorted(left_out))}")
    for receiver in outcome.members:
        for sender in outcome.members:
            sent = outcome.sent.get(sender, 0)
            got = outcome.delivered.get((receiver, sender), 0)
            if got < sent:
                found.append(
                    f"{receiver} lacks {sent - got} of {sender}'s {sent} multicasts "
                    f"(delivered {got})"
                )
    unsent = [m for m in outcome.members if outcome.sent.get(m, 0) < outcome.messages]
    if not outcome.joined:
        found.append(
            f"the members did not agree on one view within {JOIN_TIMEOUT:g} s (virtual time), "
            "so nobody multicast"
        )
    elif unsent:
        found.append(f"could not send all {outcome.messages} multicasts: {', '.join(unsent)}")
    if outcome.contract:
        found.append(f"delivery contract broken: {outcome.contract}")
    return found


def run(console: Console, args: argparse.Namespace) -> int:
    """Run the demo on a virtual clock; returns the exit status (130 or 143 when Ctrl-C or
    SIGTERM stopped it). The arguments were checked by the command."""
    tune_gc()
    clock = MockClock(autojump_threshold=0)
    try:
        outcome = run_stoppable(partial(_run_demo, console, args), clock=clock)
    except Exception as exc:  # a crash of the demo itself: say what, not a traceback
        console.print(f"[red]demo failed:[/red] {_leaf(exc)}")
        _replay_hint(console, args)
        return 1
    if isinstance(outcome, Stopped):
        return stopped("demo", outcome, "nothing was checked")
    return report(console, outcome, args)


def report(console: Console, outcome: Outcome, args: argparse.Namespace) -> int:
    """Print the delivery table and the verdict; 0 if the run converged, else 1."""
    table = Table(title="messages delivered (receiver <- sender)")
    table.add_column("receiver")
    table.add_column("view")
    for sender in outcome.members:
        table.add_column(f"from {sender}", justify="right")
    for receiver in outcome.members:
        row = [receiver, outcome.views.get(receiver) or "-"]
        for sender in outcome.members:
            got = outcome.delivered.get((receiver, sender), 0)
            row.append(f"{got}/{outcome.sent.get(sender, 0)}")  # of what was sent
        table.add_row(*row)
    console.print(table)
    found = problems(outcome)
    if not found:
        console.print("[green]every message delivered exactly once, per-sender in order[/green]")
        return 0
    console.print("[red]the group did not converge:[/red]")
    for problem in found:
        console.print(f"  - {problem}", highlight=False)
    _replay_hint(console, args)
    return 1


def _replay_hint(console: Console, args: argparse.Namespace) -> None:
    console.print(
        f"the run is on a virtual clock, so seed {args.seed} replays it exactly: "
        f"triogroups demo --sim --members {args.members} --messages {args.messages} "
        f"--loss {args.loss} --seed {args.seed}",
        highlight=False,
    )


def _leaf(exc: BaseException) -> str:
    """The first non-group exception inside ``exc``, as ``Type: message``."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


async def _run_demo(console: Console, args: argparse.Namespace) -> Outcome:
    config = demo_stack(args.loss, args.seed)
    console.print(
        f"[bold]triogroups demo[/bold]: {args.members} members on the simulated network, "
        f"stack {' -> '.join(config.names())}, DISCARD drops {args.loss:.0%} of what arrives, "
        f"seed {args.seed} (virtual clock: the seed replays the run)",
        highlight=False,
    )
    async with open_cluster(
        args.members, config, seed=args.seed, max_delay=0.01, view=False
    ) as cluster:
        members = cluster.members
        outcome = Outcome([m.name for m in members], args.messages)
        sent = {m.name: 0 for m in members}
        with _Progress(console) as progress:
            view = await _join(cluster, progress)
            outcome.joined = view is not None
            if view is not None:
                console.print(f"view: {view}", highlight=False)
                with trio.move_on_after(DELIVERY_TIMEOUT):
                    async with trio.open_nursery() as nursery:
                        for member in members:
                            nursery.start_soon(_multicast, member, args.messages, sent)
                    while not cluster.log.all_arrived(
                        [m.address for m in members], [m.address for m in members]
                    ):
                        progress.show(lambda: _delivery_status(cluster))
                        await trio.sleep(0.05)
        outcome.sent = sent
        for member in members:
            view = member.view
            outcome.views[member.name] = None if view is None else str(view.view_id)
            if view is not None:
                outcome.view_members[str(view.view_id)] = [a.name for a in view.members]
        for receiver in members:
            for sender in members:
                outcome.delivered[receiver.name, sender.name] = sum(
                    1 for msg in receiver.delivered if msg.src == sender.address
                )
        addresses = [m.address for m in members]
        try:  # duplicates and reordering; what is missing is counted above
            cluster.log.check(addresses, addresses, gaps=True)
        except ContractViolation as exc:
            outcome.contract = str(exc)
        dropped = sum(m.protocol("DISCARD").stats()["dropped_up"] for m in members)
        nak = [m.protocol("NAKACK2").stats() for m in members]
        console.print(
            f"DISCARD dropped {dropped} messages on arrival; NAKACK2 sent "
            f"{sum(s['xmit_reqs_sent'] for s in nak)} retransmission requests for "
            f"{sum(s['xmit_seqnos_requested'] for s in nak)} messages; "
            f"{trio.current_time():.1f} s of virtual time",
            highlight=False,
        )
        return outcome


async def _join(cluster: SimCluster, progress: _Progress) -> View | None:
    """Join the members one by one, then wait for one view of all; None on timeout."""
    wanted = {m.address for m in cluster.members}
    with trio.move_on_after(JOIN_TIMEOUT):
        for member in cluster.members:
            await member.connect()
            while member.view is None or member.address not in member.view:
                progress.show(lambda: _join_status(cluster))
                await trio.sleep(0.01)
        while True:
            views = {m.view for m in cluster.members}
            if len(views) == 1:
                (view,) = views
                if view is not None and set(view.members) == wanted:
                    return view
            progress.show(lambda: _join_status(cluster))
            await trio.sleep(0.01)
    return None


async def _multicast(member: SimMember, count: int, sent: dict[str, int]) -> None:
    for start in range(0, count, 10):
        payloads = [f"{member.name}:{i}".encode() for i in range(start, min(start + 10, count))]
        await member.send_many(payloads)
        sent[member.name] += len(payloads)
        await trio.sleep(0.001)


def _join_status(cluster: SimCluster) -> str:
    joined = sum(1 for m in cluster.members if m.view is not None and m.address in m.view)
    return f"joining: {joined}/{len(cluster.members)} members have a view; {_views(cluster)}"


def _delivery_status(cluster: SimCluster) -> str:
    members = cluster.members
    wanted = sum(
        len(cluster.log.expected(r.address, s.address, oob=False)) for r in members for s in members
    )
    got = sum(len(m.delivered) for m in members)
    return f"delivering: {got}/{wanted} delivered; {_views(cluster)}"


def _views(cluster: SimCluster) -> str:
    ids = sorted({str(m.view.view_id) for m in cluster.members if m.view is not None})
    return f"views {', '.join(ids) or 'none'}; {trio.current_time():.1f} s virtual"


class _Progress:
    """A status line while the demo waits: a live rich status on a terminal, else a
    plain line every `PROGRESS_EVERY` real seconds (the demo runs on virtual time)."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._status: Status | None = None
        self._every = 0.1 if console.is_terminal else PROGRESS_EVERY
        self._next = time.monotonic() + self._every

    def __enter__(self) -> _Progress:
        if self._console.is_terminal:
            self._status = self._console.status("starting")
            self._status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()

    def show(self, text: Callable[[], str]) -> None:
        """Show ``text()`` if it is time to; it is called only then."""
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self._every
        if self._status is not None:
            self._status.update(text())
        else:
            self._console.print(text(), highlight=False)
