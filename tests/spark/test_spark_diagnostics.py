"""The diagnostics port of a spark group's members (issue 39, item 8), in local[4] mode.

A member on a cluster binds to its executor's address: a diagnostics listener there answers
anyone who reaches the host (its view, properties, counters, and sets properties at run
time). The ``spark`` preset keeps it closed unless the stack asks for it
(``TCP.enable_diagnostics``), and in shared-secret mode a probe needs the secret, as for
every stack. What a member listens on is read from ``/proc`` in its own Python worker.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
import trio

from triogroups import Channel, StackConfig
from triogroups.inspector import probe
from triogroups.supervisor.spark import SparkTask, run_group

pytestmark = pytest.mark.spark

DIAG_PORTS = range(7500, 7551)  # the TCP transport's diagnostics_port .. + port_range


def listening() -> list[tuple[str, int]]:
    """The TCP sockets this process listens on (address, port), from /proc."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, state, inode = fields[1], fields[3], fields[9]
        if state == "0A" and inode in inodes:  # 0A: LISTEN
            host, port = address.split(":")
            found.append((socket.inet_ntoa(struct.pack("<I", int(host, 16))), int(port, 16)))
    return sorted(found)


async def sockets(ch: Channel, task: SparkTask) -> dict[str, Any]:
    """What this member listens on, and where its diagnostics answer (None: nowhere)."""
    responder = ch.stack.diagnostics
    if ch.stack.protocols[0].enable_diagnostics:
        with trio.fail_after(60):
            while responder is None or responder.tcp is None:
                await trio.sleep(0.05)
                responder = ch.stack.diagnostics
    return {
        "listening": listening(),
        "tcp": None if responder is None else responder.tcp,
        "bind": ch.stack.protocols[0].bind_addr,
    }


def test_spark_preset_members_open_no_diagnostics_port_unless_asked(spark: Any) -> None:
    """By default a spark group's members listen on their group port only, none in
    7500-7550 (the preset turns diagnostics off: on a cluster they would listen on the
    executor's address, unauthenticated); with ``TCP.enable_diagnostics`` each member
    listens on one diagnostics port where its transport binds."""
    for member in run_group(spark, 2, sockets):
        assert member["tcp"] is None
        assert [port for _host, port in member["listening"] if port in DIAG_PORTS] == []
        assert len(member["listening"]) == 1  # the group's TCP port
    asked = StackConfig.resolve("spark").configure("TCP", enable_diagnostics=True)
    for member in run_group(spark, 2, sockets, stack=asked):
        host, port = member["tcp"].rsplit(":", 1)
        assert (host, int(port)) in member["listening"]
        assert host == member["bind"] and int(port) in DIAG_PORTS


def _sealed_probes(secret: bytes) -> Any:
    async def member(ch: Channel, task: SparkTask) -> dict[str, Any]:
        where = (await sockets(ch, task))["tcp"].rsplit(":", 1)
        target = [(where[0], int(where[1]))]
        without = await probe(targets=target, udp=False, timeout=1)
        wrong = await probe(
            cluster=ch.cluster, secret=b"w" * 32, targets=target, udp=False, timeout=1
        )
        right = await probe(
            cluster=ch.cluster, secret=secret, targets=target, udp=False, timeout=60, expect=1
        )
        return {"without": without, "wrong": wrong, "right": [a["name"] for a in right]}

    return member


def test_spark_members_diagnostics_in_shared_secret_mode_answer_only_with_the_secret(
    spark: Any, tmp_path: Path
) -> None:
    """Asked for with a shared secret (``TCP.secret_file``), a member's diagnostics are
    sealed as on every stack: a probe without the secret, or with another, gets no answer;
    with the cluster's secret it gets the member's report."""
    secret = os.urandom(16).hex().encode()
    (tmp_path / "secret").write_bytes(secret)
    stack = StackConfig.resolve("spark").configure(
        "TCP", enable_diagnostics=True, secret_file=str(tmp_path / "secret")
    )
    results = run_group(spark, 2, _sealed_probes(secret), stack=stack)
    for partition, result in enumerate(results):
        assert result["without"] == [] and result["wrong"] == []
        assert result["right"] == [f"p{partition}"]
