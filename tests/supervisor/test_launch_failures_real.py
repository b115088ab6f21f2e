"""How ``triogroups launch`` ends when its members cannot run (issue 38), as a real command:
a crash loop is given up on with its defaults and its traceback shown once; a member that
cannot start (a taken port) ends the run with one line, not restarted; a socket-buffer
shortfall is said once per launch, not per member and restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from supervisor_kit import APPS, fast_udp, run_command, write_toml

from tests.test_startup_errors import taken_ports
from triogroups import StackConfig

pytestmark = pytest.mark.real

TRACEBACK = "Traceback (most recent call last)"
BUFFERS = "smaller socket buffers"


def _rmem_max() -> int:
    return int(Path("/proc/sys/net/core/rmem_max").read_text())


def _greedy_udp() -> StackConfig:
    """`fast_udp` asking for more receive buffer than this kernel grants."""
    wanted = 4 * _rmem_max()
    if wanted >= 1 << 31:
        pytest.skip("this kernel grants any socket buffer a stack may ask for")
    return fast_udp().configure("UDP", ucast_recv_buf_size=wanted, mcast_recv_buf_size=wanted)


async def test_launch_gives_up_on_a_crash_loop_with_its_defaults_and_one_traceback(
    tmp_path: Path,
) -> None:
    """Issue 38 item 1: three members that crash as they start, default restart options. A
    restart costs seconds here, so "3 restarts within 5 s" of wall clock never tripped and
    the command looped for ever. Now it gives up (exit status 1) after 3 restarts, naming the
    member and the rule, and the crash's traceback is printed once in all; the repeats show
    its last line. (How long it took is the machine's business: no duration is asserted.)"""
    stack = write_toml(_greedy_udp(), tmp_path / "stack.toml")
    ran = await run_command("launch", "-n", "3", "--stack", str(stack), f"{APPS}:crash")
    everything = ran.out + ran.err
    assert ran.status == 1, everything
    assert ran.err.startswith("triogroups launch: error: member '"), ran.err
    assert "more than max_restarts=3 restarts within 30 s of running time" in ran.err
    assert "RuntimeError: boom at start-up" in ran.err
    assert everything.count(TRACEBACK) == 1, everything
    assert everything.count("restarted (incarnation ") == 3, everything
    assert everything.count(BUFFERS) == 1, everything


async def test_a_member_that_cannot_start_ends_the_run_with_one_line(tmp_path: Path) -> None:
    """Issue 38 item 3: every port of the member's range is taken when it binds (nothing
    the launcher can see before: it was free when checked, or taken after). That is a
    `StartupError`, which a restart would meet again: the member is not restarted, the
    command exits 1 with that one line on stderr and no traceback anywhere."""
    with taken_ports(2) as base:
        config = StackConfig.preset("tcp").configure("TCP", bind_port=base, port_range=1)
        stack = write_toml(config, tmp_path / "stack.toml")
        ran = await run_command("launch", "-n", "1", "--stack", str(stack), f"{APPS}:views")
    assert ran.status == 1, ran.out + ran.err
    assert ran.err == (
        "triogroups launch: error: member 'A' cannot start: TCP cannot start: no free port "
        f"on 127.0.0.1 in {base}..{base + 1}: address already in use\n"
    )
    assert "restarted" not in ran.out and TRACEBACK not in ran.out, ran.out


async def test_a_socket_buffer_shortfall_is_said_once_per_launch(tmp_path: Path) -> None:
    """Issue 38 item 13: the stack asks for more buffer than the kernel grants. Each member
    (and each restart) used to warn; the launcher says it once, with the fix, and the
    members keep it at INFO."""
    stack = write_toml(_greedy_udp(), tmp_path / "stack.toml")
    ran = await run_command("launch", "-n", "3", "--stack", str(stack), f"{APPS}:returns")
    assert ran.status == 0, ran.out + ran.err
    lines = [line for line in ran.out.splitlines() if BUFFERS in line]
    assert len(lines) == 1, ran.out
    assert lines[0].startswith("launch | warning: ") and "sysctl -w net.core.rmem_max=" in lines[0]
    assert BUFFERS not in ran.err


async def test_a_crash_not_restarted_is_one_error_line_on_stderr(tmp_path: Path) -> None:
    """``--restart never``: the member's crash ends the run with exit status 1 and a line on
    stderr naming the member, how it ended, the restart policy and the error (stderr was
    empty)."""
    stack = write_toml(fast_udp(), tmp_path / "stack.toml")
    ran = await run_command(
        "launch", "-n", "1", "--restart", "never", "--stack", str(stack), f"{APPS}:crash"
    )
    assert ran.status == 1, ran.out + ran.err
    assert ran.err == (
        "triogroups launch: error: member 'A' exited with status 1 and was not restarted "
        "(--restart never): RuntimeError: boom at start-up\n"
    )
    assert ran.out.count(TRACEBACK) == 1, ran.out
