"""The `triogroups` command: the demo and the listing commands."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
from importlib.metadata import version
from pathlib import Path

import pytest
from rich.console import Console

from triogroups import StackConfig
from triogroups._demo import _sim as _demo
from triogroups.cli import main


def test_demo_delivers_every_message_despite_loss(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--sim", "--members", "3", "--messages", "60", "--loss", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "every message delivered exactly once" in out
    assert out.count("60/60") == 9


@pytest.mark.parametrize("seed", [5, 32])
def test_demo_five_members_with_20_percent_loss_converge(
    seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 12 item 5, the README's ``--members 5 --loss 0.2``: seed 5 left a member in
    the old view (a lost HIGHEST_SEQNO that was never repeated); seed 32 left a joiner
    alone (its first JOIN_REQ was lost, and the demo's 0.5 s join_timeout gave up after
    ten attempts while UNICAST3 asks for a lost first message once per sync_min_interval)."""
    args = ["demo", "--sim", "--members", "5", "--messages", "200", "--loss", "0.2"]
    args += ["--seed", str(seed)]
    assert main(args) == 0
    assert "every message delivered exactly once" in capsys.readouterr().out


def test_demo_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--loss", "1.5"]) == 2
    assert "--loss must be in [0, 1), got 1.5" in capsys.readouterr().err


def test_stacks_lists_the_presets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stacks"]) == 0
    out = capsys.readouterr().out
    assert "udp" in out and "tcp" in out and "UDP" in out


def test_protocol_shows_properties_and_unknown_names_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["protocol", "UNICAST3"]) == 0
    assert "conn_expiry_timeout" in capsys.readouterr().out
    assert main(["protocol", "NOPE"]) == 2
    assert "unknown protocol 'NOPE'" in capsys.readouterr().err


def _lines_with(out: str, word: str) -> list[str]:
    return [line for line in out.splitlines() if word in line]


def test_help_is_plain_text_with_examples_and_a_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`triogroups --help` shows no reST markup; `--version` names the installed version
    and the form of the wire codec's core (compiled or pure Python)."""
    with pytest.raises(SystemExit) as exit_help:
        main(["--help"])
    assert exit_help.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out
    assert "triogroups demo --members 5 --loss 0.2" in out
    with pytest.raises(SystemExit) as exit_version:
        main(["--version"])
    assert exit_version.value.code == 0
    name, form = capsys.readouterr().out.strip().splitlines()
    assert name == f"triogroups {version('triogroups')}"
    assert form.startswith("wire codec: "), form


def test_protocol_shows_defaults_with_units_and_rules(capsys: pytest.CaptureFixture[str]) -> None:
    """Durations and sizes as a TOML stack writes them, and each property's rule."""
    assert main(["protocol", "UNICAST3"]) == 0
    (row,) = _lines_with(capsys.readouterr().out, "xmit_interval ")
    assert re.search(r'│ "500ms"\s+│ > 0\s+│', row), row
    assert main(["protocol", "UDP"]) == 0
    (row,) = _lines_with(capsys.readouterr().out, "mcast_recv_buf_size")
    assert '"5MB"' in row, row
    assert main(["protocol", "DISCARD"]) == 0
    (row,) = _lines_with(capsys.readouterr().out, "up_loss")
    assert "in [0, 1]" in row, row


def test_protocol_prints_brackets_in_rules_and_docs_as_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """TCPPING's ``host[port]`` is text, not rich markup (it printed as "host" and the docs
    site, which shows the same rows, said "host[port]")."""
    monkeypatch.delenv("COLUMNS", raising=False)  # piped: every cell whole on one line
    assert main(["protocol", "TCPPING"]) == 0
    (row,) = _lines_with(capsys.readouterr().out, "initial_hosts")
    assert "a list of host[port] entries" in row, row
    assert "endpoints to ask: host[port], ..." in row, row


_DEMO_STACK = _demo.demo_stack


def _unrepaired_stack(loss: float, seed: int) -> StackConfig:
    """DISCARD above GMS: what it drops was already delivered by NAKACK2, so nothing heals."""
    return _DEMO_STACK(0.0, seed).insert_above("GMS", "DISCARD", up_loss=loss, seed=seed)


def _without_progress(out: str) -> str:
    return "\n".join(
        line for line in out.splitlines() if not line.startswith(("joining:", "delivering:"))
    )


def test_demo_failure_says_who_lacks_what_and_exits_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that does not converge ends with what did not, a seed that replays it
    (the demo runs on a virtual clock), status 1 and no traceback."""
    monkeypatch.setattr(_demo, "demo_stack", _unrepaired_stack)
    monkeypatch.setattr(_demo, "DELIVERY_TIMEOUT", 5.0)
    argv = ["demo", "--sim", "--members", "3", "--messages", "20", "--loss", "0.3", "--seed", "3"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "the group did not converge" in out
    assert re.search(r"[ABC] lacks \d+ of [ABC]'s 20 multicasts \(delivered \d+\)", out), out
    assert "seed 3 replays it exactly" in out
    for raw in ("Traceback", "ExceptionGroup", "TooSlowError", "reproduce with seed"):
        assert raw not in out
    assert main(argv) == 1
    assert _without_progress(capsys.readouterr().out) == _without_progress(out)


def test_demo_report_names_members_in_different_views() -> None:
    """The failure seen with --members 5 --loss 0.2: one member stays in the previous view."""
    members = ["A", "B", "C", "D", "E"]
    outcome = _demo.Outcome(
        members,
        messages=4,
        joined=False,
        views={"A": "A|5", "B": "A|5", "C": "A|5", "D": "A|4", "E": "A|5"},
        view_members={"A|5": members, "A|4": members[:4]},
    )
    console = Console(record=True, width=200)
    args = argparse.Namespace(members=5, messages=4, loss=0.2, seed=1)
    assert _demo.report(console, outcome, args) == 1
    text = console.export_text()
    assert "members disagree on the view: A, B, C, E in A|5 (A, B, C, D, E); D in A|4" in text
    assert "did not agree on one view within 60 s (virtual time), so nobody multicast" in text
    assert not _demo.problems(
        _demo.Outcome(
            ["A"],
            1,
            views={"A": "A|1"},
            view_members={"A|1": ["A"]},
            sent={"A": 1},
            delivered={("A", "A"): 1},
        )
    )


def test_demo_shows_progress_while_it_waits(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a terminal the demo prints a line with the delivered count and the views."""
    monkeypatch.setattr(_demo, "PROGRESS_EVERY", 0.0)
    assert main(["demo", "--sim", "--members", "2", "--messages", "50", "--loss", "0.1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^joining: \d/2 members have a view; views ", out, re.MULTILINE), out
    assert re.search(r"^delivering: \d+/200 delivered; views A\|2;", out, re.MULTILINE), out


def test_demo_seed_replays_the_run_in_another_process() -> None:
    """The seed the demo offers replays it: two processes (different hash seeds) print the
    same drops, retransmission requests and virtual time."""
    argv = ["demo", "--sim", "--members", "3", "--messages", "100", "--loss", "0.2", "--seed", "7"]
    outputs = []
    for hash_seed in ("1", "2"):
        result = subprocess.run(
            [sys.executable, "-m", "triogroups.cli", *argv],
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        outputs.append((result.returncode, _without_progress(result.stdout)))
    assert "DISCARD dropped" in outputs[0][1]
    assert outputs[0] == outputs[1]


# Issue 38: the command as a user meets it, run for real (a subprocess; stdout, stderr and the
# exit status checked; every process reaped by subprocess.run).

_CLI = [sys.executable, "-m", "triogroups.cli"]


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_CLI, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def _one_error_line(done: subprocess.CompletedProcess[str], command: str, status: int = 2) -> str:
    """The refusal: ``status``, nothing on stdout, one ``triogroups COMMAND: error:`` line on
    stderr (no traceback); returns that line."""
    assert done.returncode == status, done.stdout + done.stderr
    assert done.stdout == "", done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"triogroups {command}: error: "), lines
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["protocol", "NOPE"], "unknown protocol 'NOPE'"),
        (["demo", "--loss", "1.5"], "--loss must be in [0, 1), got 1.5"),
        (["demo", "--sim", "--members", "0"], "--members must be >= 1, got 0"),
        (["probe", "--set", "nonsense"], "--set must be PROTOCOL.PROPERTY=VALUE, got 'nonsense'"),
        (["probe", "--timeout", "0"], "--timeout must be > 0, got 0"),
        (["chaos", "--members", "1"], "--members must be >= 3, got 1"),
        (["campaign", "--preset", "udp"], "campaign needs --seeds N or --seed S"),
    ],
    ids=["protocol", "demo", "demo-sim", "probe-set", "probe-timeout", "chaos", "campaign"],
)
def test_errors_go_to_stderr_with_a_non_zero_exit_in_every_command(
    argv: list[str], said: str
) -> None:
    """Issue 38 item 5: every command says its error on stderr, exits 2, keeps stdout clean."""
    assert said in _one_error_line(_cli(*argv), argv[0])


def test_probe_json_prints_only_json_on_stdout() -> None:
    """Issue 38 item 5: ``probe --json`` with nobody answering is ``[]`` on stdout (it parses)
    and the "no member answered" line on stderr, exit status 1."""
    cluster = f"nobody-{os.getpid()}"
    done = _cli("probe", "--cluster", cluster, "--json", "--timeout", "0.5")
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout) == []
    assert done.stderr == (
        f"triogroups probe: error: no member of cluster {cluster!r} answered within 0.5s\n"
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["probe", "--port", "-5"], "--port must be a port (1-65535), got -5"),
        (["probe", "--port", "70000"], "--port must be a port (1-65535), got 70000"),
        (["chaos", "--keep", "/proc/nope"], "--keep '/proc/nope': No such file or directory"),
    ],
    ids=["port-negative", "port-too-high", "keep-unwritable"],
)
def test_a_bad_port_or_keep_dir_is_one_line_not_a_traceback(argv: list[str], said: str) -> None:
    """Issue 38 item 6: a port out of range (was a 32-line exception group) and a --keep
    directory that cannot be made (26 lines) are refused before anything starts."""
    assert said in _one_error_line(_cli(*argv), argv[0])


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["demo", "--stack", "tcp", "--loss", "0.2"], "--loss does not apply to --stack tcp"),
        (["demo", "--seed", "3"], "--seed replays a --sim run"),
        (["demo", "--sim", "--stack", "tcp"], "--stack chooses the real demo's stack"),
        (["demo", "--sim", "--cluster", "x"], "--cluster names the real demo's cluster"),
        (["probe", "--target", "nohost.invalid:1"], "host 'nohost.invalid' does not resolve"),
        (["demo", "--members", "1"], "--members must be >= 2, got 1"),
        (["demo", "--messages", "2"], "--messages must be >= 3, got 2"),
        (["chaos", "--duration", "5"], "--duration must be >= 10 (seconds), got 5"),
        (["probe", "--ttl", "300"], "--ttl must be in 0..255, got 300"),
        (["probe", "--expect", "0"], "--expect must be >= 1, got 0"),
        (["probe", "--addr", "nope"], "--addr must be an IPv4 multicast address, got 'nope'"),
    ],
    ids=[
        "tcp-loss",
        "real-seed",
        "sim-stack",
        "sim-cluster",
        "unresolvable-target",
        "members",
        "messages",
        "duration",
        "ttl",
        "expect",
        "addr",
    ],
)
def test_options_that_do_not_apply_or_are_out_of_range_are_refused_by_name(
    argv: list[str], said: str
) -> None:
    """Issue 38 item 7: an option that does not apply is refused, not ignored; a range error
    names the argument and its value."""
    assert said in _one_error_line(_cli(*argv), argv[0])


def test_a_lower_case_protocol_in_a_partial_stack_file_says_did_you_mean(
    tmp_path: Path,
) -> None:
    """Issue 38 item 7: a stack file without GMS whose transport is ``name = "udp"`` gets the
    README's "did you mean 'UDP'?" (the launcher said "stack must contain GMS" first)."""
    stack = tmp_path / "partial.toml"
    stack.write_text('[[protocol]]\nname = "udp"\n[[protocol]]\nname = "PING"\n')
    app = tmp_path / "app.py"
    app.write_text("async def member(ch):\n    pass\n")
    done = _cli("launch", "-n", "2", "--stack", str(stack), f"{app}:member")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.strip().endswith(
        f"stack config in {stack}: unknown protocol 'udp': protocol names are upper-case, "
        "did you mean 'UDP'?"
    ), done.stderr


def test_piped_demo_keeps_wide_table_cells_whole() -> None:
    """Issue 38 item 8: ``demo --sim --members 8 | cat`` cut every cell to ``100…`` at rich's
    80 columns; piped, the console is wide enough for the whole table."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = _cli("demo", "--sim", "--members", "8", "--messages", "100", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("100/100") == 64, done.stdout
    assert "…" not in done.stdout


def test_help_documents_the_exit_statuses() -> None:
    """Issue 38 item 6: the exit statuses, 130 for Ctrl-C and 143 for SIGTERM among them,
    are in ``--help`` and in the demo's and the probe's help (each still wrapped)."""
    for argv in ([], ["demo"], ["probe"]):
        done = _cli(*argv, "--help")
        assert done.returncode == 0, done.stderr
        assert "130  stopped by Ctrl-C (SIGINT), 143 stopped by SIGTERM" in done.stdout
        assert max(len(line) for line in done.stdout.splitlines()) <= 100, done.stdout


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_sim_demo_stopped_by_a_signal_says_so_in_one_line(signum: signal.Signals) -> None:
    """Issue 38 item 6 for ``demo --sim``: Ctrl-C was a KeyboardInterrupt traceback, SIGTERM a
    silent end; now one line on stderr and exit status 130 or 143. (The real demo, whose
    member processes must be reaped first, is tested in test_cli_demo_real.py.)"""
    proc = subprocess.Popen(
        [*_CLI, "demo", "--sim", "--messages", "1000000"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(300, proc.kill)  # a first line that never comes
    watchdog.start()
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("triogroups demo: 3 members on the simulated network"), first
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=300)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signum, out + err
    assert err == f"triogroups demo: stopped by {signum.name}: nothing was checked\n"


def test_sim_demo_piped_into_a_reader_that_quits_ends_without_a_traceback() -> None:
    """Issue 38 items 6 and 8: ``demo --sim | head -1``. The reader goes away after the first
    line; rich's answer to the broken pipe (SystemExit 1) came out of the members' nurseries
    as an exception-group traceback. Now it is exit status 1 and nothing on stderr."""
    proc = subprocess.Popen(
        [*_CLI, "demo", "--sim", "--messages", "100"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith("triogroups demo: ")
        proc.stdout.close()  # as head -1 does
        err = proc.stderr.read()
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert err == ""
