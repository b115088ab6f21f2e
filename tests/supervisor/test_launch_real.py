"""``triogroups launch`` as a real process: SIGINT and SIGTERM make every member leave (the
survivors' views shrink one leave at a time) and no member process is left; SIGKILL to the
command still leaves no member behind; a member that can never start makes it exit non-zero
with the member's name, exit reason and last output."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from supervisor_kit import APPS, STEP, fast_udp, pid_gone, write_toml

from triogroups.testing import wait_until

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]


class Launch:
    """One ``triogroups launch`` process and the lines it printed so far."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.lines: list[str] = []

    async def read(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            self.lines += [line.decode() for line in lines]

    def saw_view(self, name: str, members: str, since: int = 0) -> bool:
        """Whether member ``name`` reported a view of exactly ``members`` (in any order) in
        line ``since`` or later."""
        for line in self.lines[since:]:
            m = re.search(rf"launch \| {name} installed view \d+ \[(.*)\]", line)
            if m and set(m[1].split(", ")) == set(members):
                return True
        return False

    async def _wait(self, done: Callable[[], bool]) -> None:
        """Wait until ``done()``; if cancelled first, print every line (shown when the test
        fails)."""
        try:
            await wait_until(lambda: done(), timeout=120)
        except trio.Cancelled:
            print("\n".join(self.lines))
            raise

    async def wait_line(self, text: str) -> None:
        """Wait until a line contains ``text``."""
        await self._wait(lambda: any(text in line for line in self.lines))

    async def wait_views(self, names: str, members: str) -> None:
        """Wait until each of ``names`` reported a view of exactly ``members``."""
        await self._wait(lambda: all(self.saw_view(name, members) for name in names))

    def pids(self) -> dict[str, int]:
        """Every member pid the command reported, by ``name#incarnation``."""
        found = {}
        for line in self.lines:
            if m := re.search(r"launch \| (\w+) joined as .* \(pid (\d+)\)", line):
                found[f"{m[1]}#{len(found)}"] = int(m[2])
        return found


async def start_launch(nursery: trio.Nursery, *argv: str) -> Launch:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "triogroups.cli", "launch", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    launch = Launch(process)
    nursery.start_soon(launch.read)
    return launch


async def wait_gone(pids: list[int]) -> None:
    await wait_until(lambda: all(pid_gone(pid) for pid in pids), timeout=120, interval=0.1)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_signal_to_launch_makes_every_member_leave_gracefully(
    signum: int, tmp_path: Path
) -> None:
    """Three members; SIGINT or SIGTERM to the command: C leaves, then B, then A, and each
    survivor installs the smaller view. Failure detection is set to 60 s, longer than this
    test waits, so a view without a member can only come from its leave, not a suspicion.
    The command exits 0 and no member pid is left."""
    stack = write_toml(fast_udp(fd_timeout=60.0), tmp_path / "stack.toml")
    async with trio.open_nursery() as nursery:
        launch = await start_launch(nursery, "-n", "3", "--stack", str(stack), f"{APPS}:views")
        try:
            with trio.fail_after(STEP):
                await launch.wait_views("ABC", "ABC")
            pids = list(launch.pids().values())
            assert len(pids) == 3
            mark = len(launch.lines)
            launch.process.send_signal(signum)
            with trio.fail_after(STEP):
                status = await launch.process.wait()
                await wait_gone(pids)
        finally:
            launch.process.kill()
    text = "\n".join(launch.lines)
    assert status == 0, text
    for name in "ABC":
        assert re.search(rf"launch \| {name} stopped: exited with status 0", text), text
    assert launch.saw_view("A", "AB", mark) and launch.saw_view("B", "AB", mark), text
    assert launch.saw_view("A", "A", mark), text


async def test_sigkill_to_launch_leaves_no_member_behind(tmp_path: Path) -> None:
    """The command is SIGKILLed: each member notices (parent-death signal, EOF on the pipe
    from its parent), leaves and exits; every member pid is gone within the deadline."""
    stack = write_toml(fast_udp(), tmp_path / "stack.toml")
    async with trio.open_nursery() as nursery:
        launch = await start_launch(nursery, "-n", "2", "--stack", str(stack), f"{APPS}:views")
        try:
            with trio.fail_after(STEP):
                await launch.wait_views("AB", "AB")
            pids = list(launch.pids().values())
            launch.process.send_signal(signal.SIGKILL)
            await launch.process.wait()
            with trio.fail_after(STEP):
                await wait_gone(pids)
        finally:
            launch.process.kill()
            for pid in launch.pids().values():
                if not pid_gone(pid):
                    os.kill(pid, signal.SIGKILL)


async def test_member_that_never_starts_makes_launch_fail_with_name_reason_and_output(
    tmp_path: Path,
) -> None:
    """``--max-restarts 1``: the member that always raises is started twice, then the
    command stops and exits 1, naming the member, its exit status and its last output."""
    stack = write_toml(fast_udp(), tmp_path / "stack.toml")
    async with trio.open_nursery() as nursery:
        launch = await start_launch(
            nursery,
            "-n",
            "1",
            "--stack",
            str(stack),
            "--max-restarts",
            "1",
            "--restart-window",
            "600",
            f"{APPS}:crash",
        )
        try:
            with trio.fail_after(STEP * 3):
                status = await launch.process.wait()
        finally:
            launch.process.kill()
    text = "\n".join(launch.lines)
    assert status == 1, text
    assert "triogroups launch: error: member 'A' exited with status 1" in text
    assert "RuntimeError: boom at start-up" in text.split("triogroups launch: error:")[1]
    assert re.search(r"launch \| A restarted \(incarnation 2\)", text), text


async def _json_records(tmp_path: Path, *options: str) -> list[dict[str, Any]]:
    """The lines of ``triogroups launch -n 1 --log-format json *options`` running the ``logs``
    app until it printed, then stopped with SIGTERM, as records."""
    stack = write_toml(fast_udp(), tmp_path / "stack.toml")
    async with trio.open_nursery() as nursery:
        launch = await start_launch(
            nursery,
            "-n",
            "1",
            "--stack",
            str(stack),
            "--log-format",
            "json",
            *options,
            f"{APPS}:logs",
        )
        try:
            with trio.fail_after(STEP):
                await launch.wait_line("a plain line")
            launch.process.send_signal(signal.SIGTERM)
            with trio.fail_after(STEP):
                status = await launch.process.wait()
        finally:
            launch.process.kill()
    assert status == 0
    return [json.loads(line) for line in launch.lines if line]


async def test_log_format_json_gives_one_record_per_line_with_the_member(tmp_path: Path) -> None:
    """``--log-format json``: every line is a JSON object with member, level, logger, message
    and time; the member's log records keep their level and logger, a plain print becomes a
    ``stdout`` record, and the supervisor's own lines carry the event. The members log from
    WARNING up by default: none of the stack's INFO records."""
    records = await _json_records(tmp_path)
    assert all({"member", "level", "logger", "message", "time"} <= set(r) for r in records)
    picked = {(r["member"], r["level"], r["logger"], r["message"]) for r in records}
    assert ("A", "WARNING", "app", "hello from A") in picked
    assert ("A", "INFO", "stdout", "a plain line") in picked
    events = [r["event"] for r in records if r["logger"] == "triogroups.launch"]
    assert events[0] == "joined" and events[-1] == "exited"
    assert not [r for r in records if r["logger"].startswith("triogroups.protocols")]


async def test_log_level_info_adds_the_members_views_to_their_logs(tmp_path: Path) -> None:
    """``--log-level INFO``: the stack's INFO records come too, such as the view GMS installed
    when the member started its group, and the member's leave."""
    records = await _json_records(tmp_path, "--log-level", "INFO")
    gms = [r for r in records if r["logger"] == "triogroups.protocols.gms"]
    assert any(r["level"] == "INFO" and " installed view " in r["message"] for r in gms), gms
    assert any(r["level"] == "INFO" and " leaving " in r["message"] for r in gms), gms
