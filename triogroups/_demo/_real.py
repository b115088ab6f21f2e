"""``triogroups demo``: a real group of member processes on a lossy network, with a restart.

Three member processes (`_member`) are started through the supervisor over UDP multicast
on loopback (the ``udp`` preset on a port of the run's own) with DISCARD dropping ``loss`` of
everything that arrives; all of them multicast. Part-way through, member B is killed with
SIGKILL and the supervisor restarts it: the views shrink (fast failure detection) and grow
again with B's new incarnation, which sends its own messages. A live table shows each member's
view, messages sent and delivered and retransmission requests; at the end the summary (views
seen, per-sender delivered counts, retransmission requests, the restart) and the verdict of
`_check.check_logs` over every member's delivery log; the exit status is 0 only when it
found nothing. Over ``--stack tcp`` the same runs without DISCARD (TCP does not lose what it
carries).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

import trio
from rich.console import Console
from rich.live import Live
from rich.table import Table

from triogroups._demo._check import MemberLog, check_logs
from triogroups._ports import free_ports
from triogroups.actors import Restart
from triogroups.config import StackConfig
from triogroups.supervisor._events import MemberJoined, MemberRestarted, MemberView
from triogroups.supervisor._group import ProcessGroup, open_process_group

__all__ = ["demo_config", "run_real_demo"]

_RATE = 300.0  # multicasts per second per member
_VICTIM = "B"
FINISH_TIMEOUT = 120.0  # seconds for the whole run; past it the demo says who is still waiting


def demo_config(kind: str, loss: float, members: int) -> StackConfig:
    """The preset on ports of its own, DISCARD above UDP, fast failure detection."""
    config = StackConfig.preset(kind)
    if kind == "udp":
        config = config.configure("UDP", mcast_port=free_ports())
        config = config.insert_above("UDP", "DISCARD", up_loss=loss)
    else:
        base = free_ports(members + 3)
        hosts = [f"127.0.0.1[{base + i}]" for i in range(members + 2)]
        config = config.configure("TCP", bind_port=base, port_range=members + 2)
        config = config.configure("TCPPING", initial_hosts=hosts, port_range=0)
    config = config.configure("FD_ALL3", interval=0.5, timeout=3.0)
    config = config.configure("VERIFY_SUSPECT", timeout=1.0)
    return config.configure(
        "GMS", join_timeout=1.0, view_ack_collection_timeout=1.0, leave_timeout=1.0
    )


class _Board:
    """The latest progress line of every member incarnation, by its uuid."""

    def __init__(self) -> None:
        self.latest: dict[str, dict[str, Any]] = {}  # uuid -> progress
        self.finished: dict[str, dict[str, Any]] = {}  # uuid -> last finished line
        self.changed = trio.Event()

    def output(self, name: str, line: str) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return
        if not isinstance(record, dict) or "demo" not in record:
            return
        self.latest[record["uuid"]] = record
        if record["demo"] == "finished":
            self.finished[record["uuid"]] = record
        self.changed.set()
        self.changed = trio.Event()

    def table(self, group: ProcessGroup) -> Table:
        table = Table(title="live: members (current incarnations)")
        for column in ("member", "pid", "view", "sent", "delivered (per sender)", "xmit reqs"):
            table.add_column(column)
        for member in group.members:
            uuid = None if member.address is None else f"{member.address.uuid:032x}"
            row = self.latest.get(uuid or "", {})
            delivered = ", ".join(f"{k} {v}" for k, v in sorted(row.get("delivered", {}).items()))
            table.add_row(
                f"{member.name}#{member.incarnation}",
                str(member.pid),
                ",".join(row.get("view", [])),
                str(row.get("sent", 0)),
                delivered,
                str(row.get("xmit_reqs", 0)),
            )
        return table


def _all_finished(group: ProcessGroup, board: _Board, size: int) -> bool:
    members = group.members
    current = {f"{m.address.uuid:032x}" for m in members if m.address is not None}
    if len(current) != size or any(m.state != "running" for m in members):
        return False
    names = sorted(m.name for m in members)
    return all(
        uuid in board.finished and sorted(board.finished[uuid]["view"]) == names for uuid in current
    )


async def _drive(group: ProcessGroup, board: _Board, args: argparse.Namespace, live: Live) -> None:
    killed = False
    while not _all_finished(group, board, args.members):
        live.update(board.table(group), refresh=True)
        victim = group.member(_VICTIM) if args.members > 1 else None
        if not killed and victim is not None and victim.address is not None:
            row = board.latest.get(f"{victim.address.uuid:032x}", {})
            if row.get("sent", 0) >= args.messages // 3:
                group.kill(_VICTIM, signal.SIGKILL)
                killed = True
        with trio.move_on_after(0.25):
            await board.changed.wait()
    live.update(board.table(group), refresh=True)


def _logs(group: ProcessGroup, board: _Board, logdir: Path) -> list[MemberLog]:
    current = {f"{m.address.uuid:032x}" for m in group.members if m.address is not None}
    logs = []
    for path in sorted(logdir.glob("*.json")):
        raw = json.loads(path.read_text())
        views = [(int(start), str(key), list(members)) for start, key, members in raw["views"]]
        survived = raw["uuid"] in current
        logs.append(
            MemberLog(raw["uuid"], raw["name"], raw["sent"], views, raw["delivered"], survived)
        )
    logged = {log.uuid for log in logs}
    for uuid, row in board.latest.items():  # a killed incarnation left no log: a sender only
        if uuid not in logged:
            logs.append(MemberLog(uuid, row["name"], row["sent"], [], {}, survived=False))
    return logs


def _summary(
    console: Console, group: ProcessGroup, board: _Board, logs: list[MemberLog], problems: list[str]
) -> None:
    labels = {
        f"{e.address.uuid:032x}": f"{e.name}#{e.incarnation}"
        for e in group.history
        if isinstance(e, MemberJoined)
    }
    views = {}
    for event in group.history:
        if isinstance(event, MemberView):
            names = ",".join(labels.get(f"{m.uuid:032x}", m.name) for m in event.members)
            views[(event.view_id.id, event.view_id.coord.uuid)] = names
    console.print(f"views seen ({len(views)}):")
    for (number, _), names in sorted(views.items()):
        console.print(f"  view {number}: [{names}]")
    table = Table(title="delivered (receiver <- sender), what each sender sent")
    table.add_column("receiver")
    for sender in logs:
        table.add_column(
            f"from {labels.get(sender.uuid, sender.name)} ({sender.sent})", justify="right"
        )
    for receiver in logs:
        if receiver.survived or receiver.delivered:
            cells = [str(len(receiver.delivered.get(s.uuid, ()))) for s in logs]
            table.add_row(labels.get(receiver.uuid, receiver.name), *cells)
    console.print(table)
    xmit = sum(row.get("xmit_reqs", 0) for row in board.latest.values())
    dropped = sum(row.get("dropped", 0) for row in board.latest.values())
    lost = f"DISCARD dropped {dropped} messages on arrival; " if dropped else ""
    console.print(f"{lost}NAKACK2 sent {xmit} retransmission requests")
    for event in group.history:
        if isinstance(event, MemberRestarted):
            console.print(
                f"restart: {event.name} came back as incarnation {event.incarnation} "
                f"(pid {event.pid})"
            )
    if problems:
        console.print(f"[red]delivery contract broken ({len(problems)} problems):[/red]")
        for problem in problems[:20]:
            console.print(f"  {problem}")
    else:
        console.print(
            "[green]every member delivered exactly once and in per-sender order every message "
            "sent in a view it installed and stayed in[/green]"
        )


def _not_finished(console: Console, group: ProcessGroup, board: _Board) -> None:
    """Say which member incarnations did not finish, and what each still waits for."""
    console.print(
        f"[red]the demo did not finish within {FINISH_TIMEOUT:.0f} s:[/red] a member finishes "
        "once every member of its view said it is done sending"
    )
    for member in group.members:
        uuid = None if member.address is None else f"{member.address.uuid:032x}"
        label = f"{member.name}#{member.incarnation}"
        row = board.latest.get(uuid or "")
        if member.state != "running" or row is None:
            console.print(f"  - {label}: {member.state}, no progress line", highlight=False)
            continue
        if uuid in board.finished and board.finished[uuid]["view"] == row["view"]:
            continue
        view = row.get("view", [])
        waiting = [name for name in view if name not in row.get("done_from", [])]
        delivered = ", ".join(f"{k} {v}" for k, v in sorted(row.get("delivered", {}).items()))
        console.print(
            f"  - {label} in view {','.join(view)} has no 'done' from {', '.join(waiting)}; "
            f"sent {row.get('sent', 0)}, delivered {delivered or 'nothing'}",
            highlight=False,
        )


async def run_real_demo(
    console: Console, args: argparse.Namespace, *, cluster: str | None = None
) -> int:
    """Run the demo over real processes (on ``cluster``, default a fresh name); returns the
    exit status."""
    if args.members < 2 or args.messages < 3 or not 0 <= args.loss < 1:
        console.print("[red]error:[/red] need members >= 2, messages >= 3, 0 <= loss < 1")
        return 2
    config = demo_config(args.stack, args.loss, args.members)
    loss = f", DISCARD drops {args.loss:.0%} of what arrives" if args.stack == "udp" else ""
    console.print(
        f"[bold]triogroups demo[/bold]: {args.members} member processes over {args.stack} on "
        f"loopback{loss}; {args.messages} multicasts each; {_VICTIM} is SIGKILLed part-way"
    )
    logdir = Path(tempfile.mkdtemp(prefix="triogroups-demo-"))
    board = _Board()
    try:
        async with open_process_group(
            "triogroups._demo._member:demo_member",
            args.members,
            stack=config,
            args=(args.members, args.messages, _RATE, str(logdir)),
            restart=Restart.PERMANENT,
            output=board.output,
            cluster=cluster,
        ) as group:
            with Live(board.table(group), console=console, auto_refresh=False) as live:
                with trio.move_on_after(FINISH_TIMEOUT) as deadline:
                    await _drive(group, board, args, live)
            if not console.is_terminal:
                console.print()  # rich leaves the last frame of a non-terminal Live unterminated
            if deadline.cancelled_caught:
                _not_finished(console, group, board)
                return 1
        logs = _logs(group, board, logdir)
        problems = check_logs(logs)
        _summary(console, group, board, logs, problems)
        return 1 if problems else 0
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
