"""`free_ports`: ports for the clusters the tests, chaos runs, the demo and the benchmarks
start, free when drawn, from a block below the ephemeral range that runs side by side split."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import _worker_block
from triogroups._ports import DEFAULT_BLOCK, PORTS_ENV, free_ports, port_block


def _bindable(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def test_free_ports_gives_a_run_of_free_ports_inside_the_block() -> None:
    low, high = port_block()
    for _ in range(20):
        base = free_ports(5)
        assert low <= base and base + 4 <= high
        assert all(_bindable(port) for port in range(base, base + 5))


def test_the_default_block_lies_below_the_kernels_ephemeral_range() -> None:
    """The point of the block: no outgoing connection or port-0 socket takes one of its
    ports (Linux hands those out from ip_local_port_range, 32768-60999 by default)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except OSError:
        pytest.skip("no /proc/sys/net/ipv4/ip_local_port_range")
    assert DEFAULT_BLOCK[1] < ephemeral_low


def test_a_port_in_use_is_never_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block of two ports whose first has a listener: only the second is drawn, and a run
    of two does not fit."""
    base = free_ports(2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base))
        taken.listen()
        monkeypatch.setenv(PORTS_ENV, f"{base}-{base + 1}")
        assert {free_ports() for _ in range(20)} == {base + 1}
        with pytest.raises(RuntimeError, match=rf"no 2 consecutive free ports .* {base}-"):
            free_ports(2)


def test_a_udp_socket_on_a_port_makes_it_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    base = free_ports(2)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", base + 1))
        monkeypatch.setenv(PORTS_ENV, f"{base}-{base + 1}")
        assert {free_ports() for _ in range(20)} == {base}


@pytest.mark.parametrize("value", ["20000", "x-y", "30000-20000", "80-90", "20000-70000", "-"])
def test_a_bad_block_names_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(PORTS_ENV, value)
    with pytest.raises(ValueError, match=f"{PORTS_ENV} must be LOW-HIGH .* got '{value}'"):
        free_ports()


@pytest.mark.parametrize("count", [0, -1, 100])
def test_a_count_the_block_cannot_hold_is_refused(
    monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    monkeypatch.setenv(PORTS_ENV, "20000-20009")
    with pytest.raises(ValueError, match=rf"count must be in 1\.\.10 .* got {count}"):
        free_ports(count)


def test_test_workers_draw_from_disjoint_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pytest-xdist worker of four gets its own quarter of the default block."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    blocks = []
    for index in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        low, high = map(int, _worker_block().split("-"))
        blocks.append(range(low, high + 1))
    ports = [port for block in blocks for port in block]
    assert len(ports) == len(set(ports)) > 11_000
    assert DEFAULT_BLOCK[0] <= min(ports) and max(ports) <= DEFAULT_BLOCK[1]
