"""``triogroups demo`` as a user meets it while it runs (issue 38): it prints its cluster, the
probe commands of docs/how-to/probe-and-inspector.md find it there, and Ctrl-C or SIGTERM stop
it in one line with its member processes reaped.

Each test starts the real command (member processes on loopback, on a cluster name of its own)
and probes it with the real ``probe`` command; every process is reaped, whatever happens.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests._stop_line import assert_stopped_in_one_line

pytestmark = pytest.mark.real

_CLI = [sys.executable, "-m", "triogroups.cli"]
_MESSAGES = "30000"  # at 300/s per member: the demo runs far longer than any test needs
_DEADLINE = 180.0  # for a step on a loaded machine; never reached when it works


@contextmanager
def _demo(*argv: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A running ``triogroups demo`` and the first line it printed; killed and reaped at the
    end if the test did not end it."""
    proc = subprocess.Popen(
        [*_CLI, "demo", "--messages", _MESSAGES, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(_DEADLINE, proc.kill)  # a first line that never comes
    watchdog.start()
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        watchdog.cancel()
        yield proc, first
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=_DEADLINE)


def _probe(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_CLI, "probe", *argv],
        capture_output=True,
        text=True,
        timeout=_DEADLINE,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _members(cluster: str) -> list[dict[str, Any]]:
    """The demo's three members, once each answers ``probe --json`` (stdout is JSON only).
    A probe asks once, so it is repeated until the members that start now are up."""
    deadline = time.monotonic() + _DEADLINE
    while True:
        done = _probe("--cluster", cluster, "--json", "--expect", "3", "--timeout", "3")
        assert done.returncode in (0, 1), done.stdout + done.stderr
        answers: list[dict[str, Any]] = json.loads(done.stdout)
        if len(answers) == 3 or time.monotonic() > deadline:
            break
    assert sorted(a["name"] for a in answers) == ["A", "B", "C"], answers
    assert {a["cluster"] for a in answers} == {cluster}
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return answers


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_demo_stopped_by_a_signal_says_so_in_one_line_after_reaping_its_members(
    signum: signal.Signals,
) -> None:
    """Issue 38 item 6: Ctrl-C printed a 20-line KeyboardInterrupt traceback; SIGTERM ended
    the demo silently while its members lived on for about a second. Now either stops the
    members (gone when the demo has exited), says so in one line on stderr and exits
    128 + the signal's number (130, 143), as ``--help`` documents."""
    cluster = f"[cli38]-{uuid.uuid4().hex[:8]}"  # printed as given, not as rich markup
    with _demo("--cluster", cluster) as (proc, first):
        assert first == f"cluster {cluster} (probe it: triogroups probe --cluster {cluster})\n"
        pids = [a["pid"] for a in _members(cluster)]
        assert all(_alive(pid) for pid in pids)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=_DEADLINE)
    assert proc.returncode == 128 + signum, out + err
    assert_stopped_in_one_line(err, "demo", signum)
    assert [pid for pid in pids if _alive(pid)] == []
    assert out.endswith("\n")


def test_demo_prints_its_cluster_and_the_readme_probe_commands_find_it() -> None:
    """Issue 38 item 11: the README's probe commands use ``--cluster demo``, but the demo ran
    on a fresh name it never printed. It prints it first (``--cluster`` chooses it, see the
    test above), and the README's probe commands, with that name, find the running demo."""
    with _demo() as (proc, first):
        found = re.fullmatch(r"cluster (demo-[0-9a-f]{8}) \(probe it: .*\)\n", first)
        assert found, first
        cluster = found[1]
        assert f"triogroups probe --cluster {cluster}" in first
        _members(cluster)
        table = _probe("--cluster", cluster, "--member", "A", "--protocol", "NAKACK2")
        assert table.returncode == 0, table.stdout + table.stderr
        assert f"A@{cluster}" in table.stdout and "xmit_reqs_sent" in table.stdout
        for change in (["--reset"], ["--set", "NAKACK2.xmit_interval=250ms"]):
            done = _probe("--cluster", cluster, "--expect", "3", "--timeout", "60", *change)
            assert done.returncode == 0, done.stdout + done.stderr
            assert done.stderr == ""
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=_DEADLINE)


def test_probe_set_that_members_refuse_exits_non_zero_naming_each() -> None:
    """Issue 38 item 5: a ``--set`` every member refuses (no such property) exited 0; now
    each refusal is a line on stderr and the exit status is 1."""
    cluster = f"cli38-{uuid.uuid4().hex[:8]}"
    with _demo("--cluster", cluster) as (proc, _first):
        _members(cluster)
        done = _probe(
            "--cluster", cluster, "--expect", "3", "--timeout", "60", "--set", "NAKACK2.nope=1"
        )
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=_DEADLINE)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"triogroups probe: error: {name}@{cluster} refused --set NAKACK2.nope=1: "
        "NAKACK2 has no property 'nope'"
        for name in "ABC"
    ]
    assert "members" in done.stdout  # the answers are still shown


def test_demo_under_the_inspector_stopped_by_sigterm_reaps_its_members_in_one_line() -> None:
    """``demo --inspect`` (no terminal: it runs until the demo ends) used to die of SIGTERM
    at once, its members left for a moment; now it stops them, then says so in one line
    and exits 143, as the plain demo does."""
    cluster = f"inspected-{uuid.uuid4().hex[:8]}"
    # a frame a second: its output goes nowhere, so that nothing waits on a full pipe
    argv = [*_CLI, "demo", "--messages", _MESSAGES, "--inspect", "--cluster", cluster]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        pids = [a["pid"] for a in _members(cluster)]
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=_DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    assert_stopped_in_one_line(err, "demo", signal.SIGTERM)
    assert [pid for pid in pids if _alive(pid)] == []
