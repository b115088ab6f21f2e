"""Start-up errors a restart cannot fix fail at once, naming their cause (issue 12 item 8).

A taken port range, a ``bind_addr`` that is not an address of this host and a
missing simulated network used to surface only as RestartIntensityExceeded
after four identical retries, the real error hidden in its reports.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

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
