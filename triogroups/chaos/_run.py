"""``triogroups chaos``: member processes under a seeded storm of faults, then the checker.

N member processes (`_member.chaos_member`) are started through the process
supervisor over a stack preset with DISCARD (where the stack allows loss), DUPL
and DELAY right above the transport. Once they formed one view, the run carries
out `fault_schedule(seed, ...)`: SIGKILL (the supervisor restarts the member as
a new incarnation), graceful restarts, SIGSTOP/SIGCONT pauses, and through each
member's control socket symmetric and one-way partitions, loss, duplication and
delay. A live table shows every member's incarnation, view, traffic and memory.
On a total-order stack (``udp-total``, ``tcp-total``) the members send their
regular multicasts ``total_order=True`` and the checker's **total_order** rule
compares the orders they delivered; they also take locks and increment a counter
(`_blocks_load`), which the lock and counter rules judge. At the end the members are stopped and
`check_histories` judges every history file; the summary gives members,
messages, faults by kind, views, violations (each with its excerpt), the
largest RSS and windows per member, and the seed that replays the schedule.
Exit status 0 only without violations.

Beside the histories and ``faults.jsonl``, ``members.log`` keeps every member's
log records from INFO up, one JSON object per line (member, level, logger,
message, time): the views and merges GMS installed, suspicions, takeovers and
warnings, which say why a history is as it is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import signal
import socket
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import trio
from rich.console import Console
from rich.live import Live
from rich.table import Table

from triogroups._cli_exit import Stopped, fail, run_stoppable, stopped
from triogroups._ports import free_ports
from triogroups.actors import Restart
from triogroups.chaos._control import send_state
from triogroups.chaos._schedule import (
    FAULT_KINDS,
    LOSSLESS_KINDS,
    Fault,
    fault_schedule,
    network_state,
    quiet_time,
)
from triogroups.config import StackConfig
from triogroups.supervisor._group import ProcessGroup, open_process_group
from triogroups.supervisor._logs import json_line
from triogroups.supervisor._members import default_name
from triogroups.testing._history import (
    HistoryViolation,
    HistoryWriter,
    check_histories,
    read_histories,
)

__all__ = ["ChaosResult", "add_chaos_parser", "chaos_config", "run_chaos", "run_chaos_async"]

#: the presets a chaos run can take; on ``udp-total`` and ``tcp-total`` (SEQUENCER) the
#: members' regular multicasts are sent ``total_order=True`` and the checker compares orders,
#: and the members take locks and increment a counter for the lock and counter rules
STACKS = ("udp", "tcp", "udp-mcast", "udp-total", "tcp-total")
_TCP_STACKS = ("tcp", "tcp-total")
_MEMBER_APP = "triogroups.chaos._member:chaos_member"
_STATE_EVERY = 0.5  # the runner repeats every member's network state this often
_FORM_TIMEOUT = 60.0  # for the first view of all members
_SHOWN = 5  # violations printed with their excerpts


def chaos_config(kind: str, members: int) -> StackConfig:
    """``kind``'s preset on ports of its own, with the fault layers above the transport
    (DISCARD only where NAKACK2 retransmits), fast failure detection and merging."""
    config = StackConfig.preset(kind)
    if kind in _TCP_STACKS:
        base = free_ports(members + 5)
        hosts = [f"127.0.0.1[{base + i}]" for i in range(members + 4)]
        config = config.configure("TCP", bind_port=base, port_range=members + 4)
        config = config.configure("TCPPING", initial_hosts=hosts, port_range=0)
        bottom = "TCP"
    else:
        config = config.configure("UDP", mcast_port=free_ports())
        config = config.insert_above("UDP", "DISCARD")
        bottom = "DISCARD"
    config = config.insert_above(bottom, "DUPL").insert_above("DUPL", "DELAY")
    config = config.configure("FD_ALL3", interval=0.5, timeout=3.0)
    config = config.configure("VERIFY_SUSPECT", timeout=1.0)
    config = config.configure("MERGE3", min_interval=0.5, max_interval=2.0)
    return config.configure(
        "GMS", join_timeout=1.0, view_ack_collection_timeout=1.0, leave_timeout=1.0
    )


def add_chaos_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``chaos`` subcommand and its options."""
    chaos = sub.add_parser(
        "chaos",
        help="member processes under seeded faults, checked afterwards",
        description="Member processes send regular and OOB multicasts and unicasts while a "
        "seeded schedule kills, restarts and pauses them, partitions the network and injects "
        "loss, duplication and delay; afterwards every member's history is checked against "
        "the delivery contract. --seed replays the same schedule.",
    )
    chaos.add_argument("--members", type=int, default=5, help="member processes (default 5)")
    chaos.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    chaos.add_argument("--seed", type=int, default=None, help="schedule seed (default: random)")
    chaos.add_argument("--stack", choices=STACKS, default="udp", help="preset (default udp)")
    chaos.add_argument("--rate", type=float, default=40.0, help="msgs/s per member (default 40)")
    chaos.add_argument("--settle", type=float, default=10.0, help="checker settle time (s)")
    chaos.add_argument("--max-rss", type=float, default=400.0, help="MB per member (default 400)")
    chaos.add_argument(
        "--max-window", type=int, default=20_000, help="messages held per layer (default 20000)"
    )
    chaos.add_argument("--keep", metavar="DIR", help="write the histories to DIR and keep them")


@dataclass
class ChaosResult:
    """What a run did and what the checker found."""

    seed: int
    schedule: list[Fault]
    faults: Counter[str]
    incarnations: int
    sent: int
    delivered: int
    views: int
    max_rss: dict[str, int]
    max_windows: dict[str, int]
    violations: list[HistoryViolation]
    history_dir: Path
    skipped: Counter[str] = field(default_factory=Counter)  # faults aimed at dead members
    up: list[int] = field(default_factory=list)  # members up, every half second

    def up_summary(self, members: int) -> str:
        """How many of the ``members`` were really up while faults ran: a slow restart (a
        loaded machine) leaves fewer members than the schedule assumes."""
        if not self.up:
            return "members up: not sampled"
        ordered = sorted(self.up)
        median = ordered[len(ordered) // 2]
        whole = sum(1 for n in self.up if n == members) / len(self.up)
        return (
            f"members up (every {_STATE_EVERY:g} s): median {median}, min {ordered[0]} of "
            f"{members}; all {members} up {whole:.0%} of the time"
        )


@dataclass
class _Board:
    """What the members' progress lines say, and the faults in force."""

    latest: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> progress
    uuids: dict[str, list[str]] = field(default_factory=dict)  # name -> every incarnation
    active: list[Fault] = field(default_factory=list)
    done: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)  # kills and pauses of dead members
    up: list[int] = field(default_factory=list)  # members up, sampled every _STATE_EVERY
    last: str = ""
    log: TextIO | None = None  # members.log: every line that is not a progress line

    def output(self, name: str, line: str) -> None:
        record = _progress(line)
        if record is None:
            if self.log is not None:
                self.log.write(json_line(name, line) + "\n")
            return
        self.latest[name] = record
        known = self.uuids.setdefault(name, [])
        if record["uuid"] not in known:
            known.append(record["uuid"])

    def table(self, group: ProcessGroup, elapsed: float, args: argparse.Namespace) -> Table:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.done.items())) or "none yet"
        title = (
            f"chaos over {args.stack}, seed {args.seed}: {elapsed:.0f}/{args.duration:.0f} s; "
            f"faults {faults}"
        )
        table = Table(title=title, caption=f"last: {self.last}" if self.last else None)
        for column in ("member", "pid", "state", "view", "sent", "delivered", "RSS MB"):
            table.add_column(column)
        for member in group.members:
            row = self.latest.get(member.name, {})
            table.add_row(
                f"{member.name}#{member.incarnation}",
                str(member.pid),
                member.state,
                f"{row.get('view_id', '-')}: {','.join(row.get('view', []))}",
                str(row.get("sent", 0)),
                str(row.get("delivered", 0)),
                f"{row.get('rss', 0) / 2**20:.0f}",
            )
        return table


def _progress(line: str) -> dict[str, Any] | None:
    """The record of a member's progress line; None for any other line (a log record)."""
    if not line.startswith('{"chaos"'):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("chaos") != "progress":
        return None
    return record


class _Runner:
    def __init__(self, group: ProcessGroup, board: _Board, logs: Any) -> None:
        self.group = group
        self.board = board
        self.logs = logs
        self.seq = 0
        self.paused: set[str] = set()

    def _record(self, kind: str, fault: Fault) -> None:
        self.logs.fault(kind, fault.describe())
        self.board.last = f"{kind} {fault.describe()}"

    async def push_states(self, sock: trio.socket.SocketType) -> None:
        self.seq += 1
        for name, row in list(self.board.latest.items()):
            state = network_state(name, self.board.active, self.board.uuids)
            await send_state(sock, int(row["port"]), self.seq, state)

    async def keep_states(self, sock: trio.socket.SocketType) -> None:
        while True:
            await self.push_states(sock)
            await trio.sleep(_STATE_EVERY)

    async def _restart(self, name: str) -> None:
        """A graceful restart; its ``start`` record ends the member's leave for the checker
        (`Outages`: a member that leaves is owed nothing until it is back)."""
        with contextlib.suppress(RuntimeError, KeyError):  # the group is stopping
            await self.group.restart(name)
            self.logs.fault("start", name)

    def _dead(self, name: str) -> bool:
        """Whether member ``name``'s current process has ended and its next has not started:
        a kill or a pause of it would signal nobody (the supervisor is still restarting it, or
        busy restarting another member first)."""
        return self.group.member(name).returncode is not None

    def count_up(self) -> int:
        """The members up now: running, joined and not paused (what the schedule assumes of
        every member it does not hit)."""
        return sum(
            1
            for m in self.group.members
            if m.state == "running"
            and m.returncode is None
            and m.address is not None
            and m.name not in self.paused
        )

    async def start(self, fault: Fault, nursery: trio.Nursery) -> None:
        name = fault.members[0]
        if fault.kind in ("kill", "pause") and self._dead(name):
            self.board.skipped[fault.kind] += 1
            self.logs.fault("skip", f"{fault.kind} {name}: not restarted yet")
            self.board.last = f"skip {fault.kind} {name}: not restarted yet"
            return
        self.board.done[fault.kind] += 1
        self._record(fault.kind, fault)
        if fault.kind == "kill":
            self.group.kill(name, signal.SIGKILL)
        elif fault.kind == "restart":
            nursery.start_soon(self._restart, name)
        elif fault.kind == "pause":
            self.group.kill(name, signal.SIGSTOP)
            self.paused.add(name)
        else:
            self.board.active.append(fault)

    def end(self, fault: Fault) -> None:
        if fault.kind == "pause":
            if fault.members[0] not in self.paused:
                return  # skipped: its member was dead
            self.group.kill(fault.members[0], signal.SIGCONT)
            self.paused.discard(fault.members[0])
            self._record("resume", fault)
            return
        self.board.active.remove(fault)
        self._record("heal" if fault.kind in ("partition", "oneway") else "end", fault)

    def resume_all(self) -> None:
        """The schedule is done: resume whoever is paused, lift every split, and record the
        quiet period's ``heal``. Every split's end is a ``heal`` too, but the checker excuses a
        member that a later fault cuts off within ``resume_within`` of one; no fault follows
        this one, so a member that never resumes is still reported."""
        for name in sorted(self.paused):
            self.group.kill(name, signal.SIGCONT)
        self.paused.clear()
        self.board.active.clear()
        self.logs.fault("heal", "quiet period")
        self.board.last = "heal quiet period"


def _actions(schedule: Sequence[Fault]) -> list[tuple[float, int, Fault]]:
    """(time, 0 = end / 1 = start, fault), ends first when they coincide."""
    out = [(f.at, 1, f) for f in schedule]
    out += [(f.until, 0, f) for f in schedule if f.until is not None]
    return sorted(out, key=lambda a: (a[0], a[1]))


async def _drive(
    group: ProcessGroup,
    board: _Board,
    schedule: list[Fault],
    args: argparse.Namespace,
    logs: Any,
    live: Live,
) -> None:
    runner = _Runner(group, board, logs)
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        async with trio.open_nursery() as nursery:
            t0 = trio.current_time()

            async def show() -> None:
                while True:
                    live.update(board.table(group, trio.current_time() - t0, args), refresh=True)
                    board.up.append(runner.count_up())
                    await trio.sleep(_STATE_EVERY)

            nursery.start_soon(show)
            nursery.start_soon(runner.keep_states, sock)
            for at, edge, fault in _actions(schedule):
                await trio.sleep_until(t0 + at)
                if edge:
                    await runner.start(fault, nursery)
                else:
                    runner.end(fault)
                await runner.push_states(sock)
            runner.resume_all()
            await runner.push_states(sock)
            await trio.sleep_until(t0 + args.duration)
            live.update(board.table(group, trio.current_time() - t0, args), refresh=True)
            nursery.cancel_scope.cancel()


def _summarise(
    seed: int, schedule: list[Fault], board: _Board, root: Path, args: argparse.Namespace
) -> ChaosResult:
    histories = read_histories(root)
    members = [h for h in histories if h.member is not None]
    max_rss: dict[str, int] = {}
    max_windows: dict[str, int] = {}
    views = set()
    sent = delivered = 0
    for h in members:
        base = h.name.split(".")[0]
        for line in h.lines:
            r = line.record
            if r["k"] == "send":
                sent += 1
            elif r["k"] == "deliver":
                delivered += 1
            elif r["k"] == "view":
                views.add(tuple(r["id"]))
            elif r["k"] == "sample":
                max_rss[base] = max(max_rss.get(base, 0), int(r["rss"]))
                for layer, held in r["windows"].items():
                    max_windows[layer] = max(max_windows.get(layer, 0), int(held))
    violations = check_histories(
        histories,
        settle=args.settle,
        resume_within=quiet_time(args.duration),
        max_rss=int(args.max_rss * 2**20),
        max_window=args.max_window,
    )
    return ChaosResult(
        seed,
        schedule,
        board.done,
        len(members),
        sent,
        delivered,
        len(views),
        max_rss,
        max_windows,
        violations,
        root,
        board.skipped,
        board.up,
    )


def _report(console: Console, result: ChaosResult, args: argparse.Namespace) -> None:
    faults = ", ".join(f"{k} {v}" for k, v in sorted(result.faults.items())) or "none"
    console.print(
        f"members {args.members} ({result.incarnations} incarnations), messages sent "
        f"{result.sent}, delivered {result.delivered}, views {result.views}",
        highlight=False,
    )
    console.print(f"faults injected: {faults}", highlight=False)
    if result.skipped:
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(result.skipped.items()))
        console.print(f"faults skipped (their member was not restarted yet): {skipped}")
    console.print(result.up_summary(args.members), highlight=False)
    rss = ", ".join(f"{k} {v / 2**20:.0f} MB" for k, v in sorted(result.max_rss.items()))
    held = ", ".join(f"{k} {v}" for k, v in sorted(result.max_windows.items()))
    console.print(f"max RSS per member: {rss}", highlight=False)
    console.print(f"max messages held per layer: {held}", highlight=False)
    if result.violations:
        console.print(f"[red]violations: {len(result.violations)}[/red]")
        kinds = Counter(v.rule for v in result.violations)
        console.print("  by rule: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
        for violation in result.violations[:_SHOWN]:
            console.print(str(violation), highlight=False, markup=False)
        console.print(f"histories kept in {result.history_dir}", highlight=False)
    else:
        console.print("[green]violations: 0[/green]")
    console.print(
        f"seed {result.seed}: replay the schedule with triogroups chaos --stack {args.stack} "
        f"--members {args.members} --duration {args.duration:g} --seed {result.seed}",
        highlight=False,
    )


def _problem(args: argparse.Namespace) -> str | None:
    """The first argument out of its range, named with its value; None when all are fine."""
    if args.members < 3:
        return f"--members must be >= 3, got {args.members}"
    if args.duration < 10:
        return f"--duration must be >= 10 (seconds), got {args.duration:g}"
    if args.rate <= 0:
        return f"--rate must be > 0, got {args.rate:g}"
    if args.settle < 0:
        return f"--settle must be >= 0, got {args.settle:g}"
    if args.max_rss <= 0:
        return f"--max-rss must be > 0, got {args.max_rss:g}"
    if args.max_window < 1:
        return f"--max-window must be >= 1, got {args.max_window}"
    return None


def _history_dir(keep: str | None) -> Path:
    """``--keep DIR`` made (OSError if it cannot be), or a fresh temporary directory."""
    if keep is None:
        return Path(tempfile.mkdtemp(prefix="triogroups-chaos-"))
    root = Path(keep)
    root.mkdir(parents=True, exist_ok=True)
    (root / "faults.jsonl").touch()  # writable: found now, not after the run
    return root


async def run_chaos_async(
    console: Console, args: argparse.Namespace, root: Path | None = None
) -> ChaosResult:
    """Run the chaos run ``args`` describes and check it; see the module docstring. The
    histories go to ``root`` (default: ``--keep``, or a temporary directory)."""
    problem = _problem(args)
    if problem is not None:
        raise ValueError(problem)
    if args.seed is None:
        args.seed = random.randrange(2**31)
    names = [default_name(i) for i in range(args.members)]
    kinds = LOSSLESS_KINDS if args.stack in _TCP_STACKS else FAULT_KINDS
    schedule = fault_schedule(args.seed, args.duration, names, kinds=kinds)
    console.print(
        f"[bold]triogroups chaos[/bold]: {args.members} member processes over {args.stack} "
        f"for {args.duration:g} s, {len(schedule)} faults, seed {args.seed}",
        highlight=False,
    )
    root = root or _history_dir(args.keep)
    board = _Board()
    with (
        HistoryWriter(root / "faults.jsonl", None, time.time) as logs,
        open(root / "members.log", "w", encoding="utf-8") as board.log,
    ):
        async with open_process_group(
            _MEMBER_APP,
            args.members,
            stack=chaos_config(args.stack, args.members),
            args=(str(root), args.rate, args.seed),
            restart=Restart.PERMANENT,
            max_restarts=1_000_000,
            restart_window=1.0,
            backoff_max=1.0,
            stop_timeout=5.0,
            output=board.output,
            log_format="json",
            log_level="INFO",
        ) as group:
            with trio.fail_after(_FORM_TIMEOUT):
                await group.wait_for_view(args.members)
            with Live(console=console, auto_refresh=False) as live:
                await _drive(group, board, schedule, args, logs, live)
            if not console.is_terminal:
                console.print()
    return _summarise(args.seed, schedule, board, root, args)


def run_chaos(args: argparse.Namespace, console: Console) -> int:
    """The ``chaos`` command: run, print the summary; exit status 1 on a violation, 2 for bad
    arguments (one line on stderr), 130 or 143 when Ctrl-C or SIGTERM stopped it."""
    problem = _problem(args)
    if problem is not None:
        return fail("chaos", problem)
    try:
        root = _history_dir(args.keep)
    except OSError as exc:
        return fail("chaos", f"--keep {args.keep!r}: {exc.strerror or exc}")
    result = run_stoppable(partial(run_chaos_async, console, args, root))
    if isinstance(result, Stopped):
        if not console.is_terminal:
            console.print()  # the last frame of the live table, left unterminated
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        return stopped("chaos", result, "its member processes were stopped; nothing was checked")
    _report(console, result, args)
    if not result.violations and not args.keep:
        shutil.rmtree(result.history_dir, ignore_errors=True)
    return 1 if result.violations else 0
