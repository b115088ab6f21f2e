"""Three members on three "hosts": network namespaces joined by a bridge.

Each member runs in a namespace of its own with its own address on
10.77.0.0/24; a fourth namespace holds the bridge, so nothing is added to
the host's own network. Multicast crosses the bridge (TTL 1). Needs root and
``ip``; anywhere else the test is skipped with the reason.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests._members.processes import MemberProcess, exchange_and_check

pytestmark = [pytest.mark.real, pytest.mark.multihost]

STACKS = Path(__file__).parent / "stacks"  # transport and discovery only


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


@contextmanager
def bridged_namespaces(count: int) -> Iterator[list[tuple[str, str]]]:
    """``count`` namespaces on one bridge: yields (namespace, address) pairs; removes all after."""
    if os.geteuid() != 0:
        pytest.skip("multi-host test needs root to create network namespaces")
    if shutil.which("ip") is None:
        pytest.skip("multi-host test needs the 'ip' command (iproute2)")
    tag = uuid.uuid4().hex[:6]
    bridge_ns = f"tg-{tag}-br"
    made: list[str] = []
    hosts: list[tuple[str, str]] = []
    try:
        try:
            _ip("netns", "add", bridge_ns)
            made.append(bridge_ns)
            _ip("-n", bridge_ns, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
            _ip("-n", bridge_ns, "link", "set", "br0", "up")
            for i in range(count):
                ns = f"tg-{tag}-{i}"
                _ip("netns", "add", ns)
                made.append(ns)
                _ip(
                    "-n",
                    bridge_ns,
                    "link",
                    "add",
                    f"p{i}",
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    ns,
                )
                _ip("-n", bridge_ns, "link", "set", f"p{i}", "master", "br0", "up")
                address = f"10.77.0.{i + 1}"
                _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                hosts.append((ns, address))
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", "") or exc
            reason = f"cannot create network namespaces here: {str(detail).strip()}"
            print(reason)
            pytest.skip(reason)
        yield hosts
    finally:
        for ns in reversed(made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


async def run_on_hosts(hosts: list[tuple[str, str]], stack: str, port: int) -> None:
    cluster = f"multi-{uuid.uuid4().hex[:8]}"
    members: list[MemberProcess] = []
    try:
        async with trio.open_nursery() as nursery:
            with trio.fail_after(40):
                for i, (ns, address) in enumerate(hosts):
                    props: dict[str, dict[str, Any]]
                    if stack == "udp":
                        props = {"UDP": {"bind_addr": address, "mcast_port": port, "ip_ttl": 1}}
                    else:
                        listed = [f"{a}[{port}]" for _, a in hosts]
                        props = {
                            "TCP": {"bind_addr": address, "bind_port": port},
                            "TCPPING": {"initial_hosts": listed, "port_range": 0},
                        }
                    members.append(
                        await MemberProcess.start(
                            nursery,
                            "ABC"[i],
                            stack=str(STACKS / f"{stack}-transport.toml"),
                            cluster=cluster,
                            props=props,
                            prefix=["ip", "netns", "exec", ns],
                        )
                    )
                assert [m.physical[0] for m in members] == [a for _, a in hosts]
                await exchange_and_check(
                    members, find_timeout=2.0 if stack == "udp" else 5.0, multicasts=30, unicasts=10
                )
                for m in members:
                    assert await m.stop() == 0
    finally:
        for m in members:
            m.kill()


@pytest.mark.parametrize("stack", ["udp", "tcp"])
async def test_three_members_in_three_namespaces_exchange_unicasts_and_multicasts(
    stack: str,
) -> None:
    with bridged_namespaces(3) as hosts:
        await run_on_hosts(hosts, stack, random.randint(20_000, 60_000))
