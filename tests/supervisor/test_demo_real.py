"""``triogroups demo``: three member processes over real sockets, one SIGKILLed and restarted;
exit 0 with the summary when the checker finds nothing, non-zero when it finds a breach."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from rich.console import Console

from triogroups._demo import _real as _demo
from triogroups._demo._check import MemberLog

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("stack", ["udp", "tcp"])
async def test_demo_runs_real_members_restarts_one_and_passes_its_check(stack: str) -> None:
    """The README's command: the run prints the views, the per-sender table, the restart and
    the verdict, and exits 0 (``--stack tcp`` the same over TCP)."""
    argv = [sys.executable, "-m", "triogroups.cli", "demo"] + (
        ["--stack", "tcp"] if stack == "tcp" else []
    )
    result = await trio.run_process(
        argv,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "120"},
    )
    out = result.stdout.decode()
    assert result.returncode == 0, out[-3000:] + result.stderr.decode()[-3000:]
    assert "views seen" in out and "restart: B came back as incarnation 2" in out
    assert "every member delivered exactly once and in per-sender order" in out
    assert ("DISCARD dropped" in out) is (stack == "udp")


async def test_demo_exits_non_zero_when_its_checker_is_fed_a_broken_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same run with the last message from a surviving sender dropped from a survivor's
    log before the check: the verdict says the contract is broken and the exit status is 1."""
    real_logs = _demo._logs

    def broken(*args: Any) -> list[MemberLog]:
        logs = real_logs(*args)
        first = next(log for log in logs if log.survived)
        sender = next(log.uuid for log in logs if log.survived and log.sent)
        delivered = {**first.delivered, sender: list(first.delivered[sender])[:-1]}
        return [MemberLog(first.uuid, first.name, first.sent, first.views, delivered, True)] + [
            log for log in logs if log is not first
        ]

    monkeypatch.setattr(_demo, "_logs", broken)
    console = Console(record=True, width=120)
    args = argparse.Namespace(members=3, messages=300, loss=0.1, stack="udp")
    assert await _demo.run_real_demo(console, args) == 1
    assert "delivery contract broken (1 problems)" in console.export_text()


async def test_demo_that_does_not_finish_says_who_waits_for_what_and_exits_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 12 item 5 for the real demo: a run that does not finish in time ends with the
    members still waiting and for whom (no raw TooSlowError), status 1, no process left."""
    monkeypatch.setattr(_demo, "FINISH_TIMEOUT", 4.0)
    console = Console(record=True, width=200)
    args = argparse.Namespace(members=2, messages=30_000, loss=0.0, stack="udp")
    assert await _demo.run_real_demo(console, args) == 1
    text = console.export_text()
    assert "the demo did not finish within 4 s" in text
    assert re.search(r"- [AB]#\d+ (in view .* has no 'done' from|.*no progress line)", text), text
    assert "Traceback" not in text and "TooSlowError" not in text
