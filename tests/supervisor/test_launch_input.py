"""``triogroups launch`` refuses bad input before it starts anything: one line naming the
problem, exit status 2, no process started. That includes a stack every member would fail on
(issue 38 item 3), and options written after APP are the command's own (item 2)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from supervisor_kit import APPS, children_of, fast_udp, run_command, write_toml

from triogroups import StackConfig
from triogroups.cli import main

FOREIGN = "10.255.255.1"  # never an address of this host


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``launch *argv`` here; check it refused with one line and started nothing."""
    before = children_of(os.getpid())
    assert main(["launch", *argv]) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("triogroups launch: error: ") and err.count("\n") == 1, err
    assert captured.out == ""
    assert children_of(os.getpid()) == before
    return err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no.such:module"], "cannot import app module 'no.such' (no.such:module): "),
        (["tests/supervisor/no_such_file.py:app"], "app file 'tests/supervisor/no_such_file.py'"),
        (["--stack", "nosuch", f"{APPS}:views"], "unknown stack preset 'nosuch'"),
        (["--stack", "nowhere.toml", f"{APPS}:views"], "stack file 'nowhere.toml' does not exist"),
        (["-n", "0", f"{APPS}:views"], "-n must be >= 1, got 0"),
        ([f"{APPS}:no_such_function"], "has no function 'no_such_function'"),
        (["just_a_module"], "app must be module:function or file.py:function"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in _refused(argv, capsys)


def _tcp_range(base: int) -> StackConfig:
    return StackConfig.preset("tcp").configure("TCP", bind_port=base, port_range=1)


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (lambda c: c.replace("PING", "PONG"), "unknown protocol 'PONG' (did you mean 'PING'?"),
        (lambda c: c.configure("UDP", bind_prot=7800), "UDP has no property 'bind_prot'"),
        (lambda c: c.configure("UDP", bind_port=-3), "UDP.bind_port must be in 0..65535, got -3"),
        (
            lambda c: c.configure("FD_ALL3", interval=5.0, timeout=2.0),
            "FD_ALL3.interval must be < timeout (2.0), got 5.0",
        ),
        (
            lambda c: c.configure("UDP", bind_addr=FOREIGN),
            f"UDP.bind_addr must be an address of this host, got {FOREIGN}",
        ),
        (
            lambda c: _tcp_range(7800),
            "TCP.port_range must give each of the 3 members a port of its own, "
            "got 7800..7801 (2 ports)",
        ),
    ],
    ids=["protocol", "property", "value", "rule", "bind_addr", "port_range"],
)
def test_a_stack_every_member_would_fail_on_is_refused_before_any_starts(
    broken: Callable[[StackConfig], StackConfig],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 38 item 3: such a stack used to start N members that each printed a traceback
    and restarted; with ``--restart never`` the command exited 1 with an empty stderr. Now
    it is one line naming the file, the protocol, the property and the rule."""
    stack = write_toml(broken(fast_udp()), tmp_path / "stack.toml")
    err = _refused(["-n", "3", "--stack", str(stack), f"{APPS}:views"], capsys)
    assert err.startswith(f"triogroups launch: error: stack file {str(stack)!r}: {message}")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [f"{APPS}:views", "--stakc", "tcp"],
            "unknown option '--stakc' after APP: launch's options go before or after APP, "
            "the application's own after --",
        ),
        ([f"{APPS}:views", "-n", "x"], "argument -n: invalid int value: 'x'"),
        (["-n", "2", "--"], "APP is missing"),
    ],
)
def test_a_bad_option_after_app_is_refused_saying_where_options_go(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in _refused(argv, capsys)


async def test_options_after_app_are_the_commands_and_after_double_dash_the_apps(
    tmp_path: Path,
) -> None:
    """Issue 38 item 2: ``launch APP -n 1 --stack S`` used to start 3 members on the udp
    preset, each getting ``-n 1 --stack S`` as its arguments. Options go on either side of
    APP (as for ``triogroups spark``); plain words stay the application's, and so does
    everything after ``--``, options included."""
    stack = write_toml(fast_udp(), tmp_path / "stack.toml")
    ran = await run_command(
        "launch", f"{APPS}:echo_args", "0.5", "-n", "1", "--stack", str(stack), "--", "-n", "2"
    )
    assert ran.status == 0, ran.out + ran.err
    assert ran.err == ""
    printed = [line for line in ran.out.splitlines() if "| args " in line]
    assert len(printed) == 1 and printed[0].lstrip().startswith("A | "), ran.out
    assert json.loads(printed[0].split("| args ", 1)[1]) == ["0.5", "-n", "2"]


def test_help_states_the_restart_rule_and_where_options_go(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 38 items 1 and 2: ``launch --help`` says when a crash loop is given up on and
    that options go on either side of APP, the application's own after ``--``."""
    with pytest.raises(SystemExit) as info:
        main(["launch", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "at most --max-restarts times (default 3) within --restart-window seconds" in text
    assert "(default 30) of running time" in text
    assert "given up on after 3 restarts however slow a start is" in text
    assert "The options may come before or after APP" in text
    assert "launch -n 3 app.py:member -- --verbose" in text
