"""The ``triogroups chaos`` command refuses a run it cannot make before starting anything, and
a signal stops it with its member processes reaped."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._stop_line import assert_stopped_in_one_line
from triogroups.cli import main


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--members", "2"], "--members must be >= 3, got 2"),
        (["--duration", "5"], "--duration must be >= 10 (seconds), got 5"),
        (["--rate", "0"], "--rate must be > 0, got 0"),
    ],
    ids=["two-members", "five-seconds", "no-rate"],
)
def test_chaos_refuses_too_few_members_too_short_a_run_or_no_traffic(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line on stderr naming the argument and its value (issue 38 item 7)."""
    assert main(["chaos", *argv]) == 2
    assert capsys.readouterr().err == f"triogroups chaos: error: {said}\n"


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.real
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_chaos_stopped_by_a_signal_reaps_its_members_and_says_so_in_one_line(
    signum: signal.Signals,
) -> None:
    """Issue 38 item 6 for chaos: Ctrl-C was a KeyboardInterrupt traceback and SIGTERM ended
    the runner at once, its members left to notice; now the member processes are stopped
    and gone when it exits, with one line on stderr and exit status 130 or 143."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "triogroups.cli", "chaos", "--members", "3", "--duration", "60"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while len(members := _children(proc.pid)) < 3:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signum, out + err
    assert_stopped_in_one_line(err, "chaos", signum)
    assert [pid for pid in members if _alive(pid)] == []


@pytest.mark.parametrize(("stack", "bottom"), [("udp-total", "UDP"), ("tcp-total", "TCP")])
def test_chaos_total_order_stacks_keep_sequencer_above_the_fault_layers(
    stack: str, bottom: str
) -> None:
    """``--stack udp-total`` and ``tcp-total`` are chaos stacks: SEQUENCER stays in them (the
    members then send total_order=True), the fault layers sit above the transport (DISCARD
    only over UDP), and a TCP stack gets ports of its own and only lossless faults."""
    from triogroups.chaos._run import STACKS, chaos_config

    assert stack in STACKS
    names = chaos_config(stack, 5).names()
    assert names[0] == bottom and "SEQUENCER" in names
    assert ("DISCARD" in names) == (bottom == "UDP")
    assert names.index("DELAY") < names.index("SEQUENCER")
