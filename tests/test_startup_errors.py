"""Start-up errors a restart cannot fix fail at once, naming their cause (issue 12 item 8).

A taken port range, a ``bind_addr`` that is not an address of this host and a
missing simulated network used to surface only as RestartIntensityExceeded
after four identical retries, the real error hidden in its reports.
"""

from __future__ import annotations

import errno
import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import trio

from triogroups import Stack, StackConfig, StartupError, open_channel
from triogroups.testing import free_ports

FOREIGN = "10.255.255.1"  # TEST-NET-like: never an address of this host, only ever bound


@contextmanager
def taken_ports(count: int) -> Iterator[int]:
    """Listen on ``count`` consecutive loopback ports; yields the first."""
    for _ in range(50):
        base = free_ports(count)
        with ExitStack() as held:
            try:
                for port in range(base, base + count):
                    sock = held.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
                    sock.listen()
            except OSError:
                continue
            yield base
            return
    raise RuntimeError("found no free run of loopback ports")


async def _run_until_it_fails(stack: Stack) -> BaseException:
    with pytest.raises(BaseExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            with trio.fail_after(10):
                await nursery.start(stack.run)
            nursery.cancel_scope.cancel()
    assert len(info.value.exceptions) == 1
    return info.value.exceptions[0]


async def test_stack_without_its_simulated_network_fails_at_once_naming_it() -> None:
    stack = Stack(StackConfig.of(("SIM", {"network": "nowhere"}), "PASS"), "c", "A")
    error = await _run_until_it_fails(stack)
    assert isinstance(error, StartupError)
    assert "SIM cannot start: no simulated network named 'nowhere' is open" in str(error)
    assert len(stack.crash_reports) == 1 and stack.incarnation == 1


async def test_stack_with_a_taken_port_range_fails_at_once_naming_the_range() -> None:
    with taken_ports(3) as base:
        config = StackConfig.preset("tcp").configure("TCP", bind_port=base, port_range=2)
        stack = Stack(config, "c", "A")
        error = await _run_until_it_fails(stack)
    assert isinstance(error, StartupError)
    assert str(error) == (
        f"TCP cannot start: no free port on 127.0.0.1 in {base}..{base + 2}: address already in use"
    )
    assert isinstance(error.__cause__, OSError) and error.__cause__.errno == errno.EADDRINUSE
    assert len(stack.crash_reports) == 1 and stack.incarnation == 1


async def test_open_channel_with_a_taken_port_range_raises_the_cause_not_restarts() -> None:
    with taken_ports(2) as base:
        config = StackConfig.preset("tcp").configure("TCP", bind_port=base, port_range=1)
        expected = r"no free port on 127\.0\.0\.1"
        with trio.fail_after(10), pytest.raises(StartupError, match=expected):
            async with open_channel("c", config):
                pytest.fail("joined without a port")


@pytest.mark.parametrize("preset", ["udp", "tcp"])
async def test_open_channel_with_a_foreign_bind_addr_says_it_is_not_an_address_here(
    preset: str,
) -> None:
    transport = preset.upper()
    config = StackConfig.preset(preset).configure(transport, bind_addr=FOREIGN)
    with trio.fail_after(10), pytest.raises(StartupError) as info:
        async with open_channel("c", config):
            pytest.fail("joined on a foreign address")
    assert str(info.value).startswith(
        f"{transport} cannot start: bind_addr {FOREIGN} is not an address of this host"
    )


_SCRIPT = """
import sys
import trio
from triogroups import StackConfig, open_channel

async def main() -> None:
    config = StackConfig.preset("tcp").configure("TCP", bind_port=int(sys.argv[1]), port_range=0)
    async with open_channel("c", config):
        pass

trio.run(main)
"""


def test_a_plain_script_on_a_taken_port_shows_the_start_up_error_once(tmp_path: Path) -> None:
    """Issue 38 item 4: a script whose port is taken printed 104 lines and 6 tracebacks:
    the layer crash logged at WARNING with its whole chain, then the same error raised. Now
    the stack keeps the crash at INFO (it is raised, and the script's caller says it) and
    the system's OSError is not chained twice: Python's report of the uncaught error alone,
    the StartupError and the OSError under it."""
    script = tmp_path / "taken.py"
    script.write_text(_SCRIPT)
    with taken_ports(1) as port:
        ran = subprocess.run(
            [sys.executable, str(script), str(port)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert ran.returncode == 1
    assert ran.stdout == ""
    assert "crashed" not in ran.stderr, ran.stderr
    assert ran.stderr.count("Traceback (most recent call last)") == 2, ran.stderr
    assert ran.stderr.count("no free port on 127.0.0.1") == 2, ran.stderr  # OSError, StartupError
    assert ran.stderr.rstrip().splitlines()[-1] == (
        f"triogroups.StartupError: TCP cannot start: no free port on 127.0.0.1 in "
        f"{port}..{port}: address already in use"
    )


@pytest.mark.parametrize(("level", "traceback"), [(logging.INFO, False), (logging.DEBUG, True)])
async def test_a_start_up_failure_is_logged_once_with_its_traceback_at_debug_only(
    level: int, traceback: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The stack's record of a layer that cannot start: one, at INFO, and the traceback
    only when DEBUG is on."""
    caplog.set_level(level, logger="triogroups")
    with taken_ports(1) as base:
        config = StackConfig.preset("tcp").configure("TCP", bind_port=base, port_range=0)
        await _run_until_it_fails(Stack(config, "c", "A"))
    crashed = [r for r in caplog.records if "crashed" in r.getMessage()]
    assert len(crashed) == 1, caplog.text
    assert crashed[0].levelno == logging.INFO
    assert (crashed[0].exc_info is not None) == traceback
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
