"""Spark groups across two "hosts" (issue 39): network namespaces joined by a bridge.

Each of a standalone master's two workers (one core each) runs in a network namespace of
its own at its own address; the master and the driver (`multihost_app`) run in the root
namespace, which reaches the bridge through a veth pair the test adds. So a group of two
has one member per host, and the members reach each other only over the bridge. One
cluster serves the module, run once per test run (`once_per_run`); every namespace, link
and process it made is removed after it, even when it fails, and the last test checks that
nothing is left. Needs root and ``ip``; skipped with the reason elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _once import once_per_run
from _standalone import StandaloneCluster, processes, spark_home

from triogroups.supervisor.spark import SparkUnavailable
from triogroups.supervisor.spark._setup import find_java, require_pyspark

_DRIVER_TIMEOUT = 600  # seconds for the whole driver (a loaded 2-core machine)
_STOP_TIMEOUT = 30.0
# The first test of a worker waits for the whole run (or runs it), bounded by its deadlines.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.sparkcluster,
    pytest.mark.multihost,
    pytest.mark.whole_run,
    pytest.mark.timeout(1200),
]

APP = Path(__file__).with_name("multihost_app.py")
ROOT = Path(__file__).resolve().parents[2]


def _ip(*args: str) -> str:
    return subprocess.run(
        ["ip", *args], check=True, capture_output=True, text=True, timeout=10
    ).stdout


def _subnet() -> str:
    """A 10.x.y.0/24 that no address of the root namespace is in yet (``10.x.y``)."""
    taken = _ip("-4", "-o", "addr")
    while True:
        prefix = f"10.{random.randint(100, 199)}.{random.randint(0, 255)}"
        if f" {prefix}." not in taken:
            return prefix


@contextmanager
def two_hosts() -> Iterator[tuple[str, list[tuple[str, str]], str]]:
    """Two namespaces on a bridge (in a third namespace) and a veth pair from the root
    namespace to it: yields the root's address, the (namespace, address) of each host, and
    the tag every namespace and link made here carries; removes them all after."""
    if os.geteuid() != 0:
        pytest.skip("multi-host test needs root to create network namespaces")
    if shutil.which("ip") is None:
        pytest.skip("multi-host test needs the 'ip' command (iproute2)")
    tag = f"tg{uuid.uuid4().hex[:6]}"
    bridge, root_link = f"{tag}-br", f"{tag}-h"
    made: list[str] = []
    try:
        try:
            prefix = _subnet()
            _ip("netns", "add", bridge)
            made.append(bridge)
            _ip("-n", bridge, "link", "add", "br0", "type", "bridge")
            _ip("-n", bridge, "link", "set", "br0", "up")
            _ip("link", "add", root_link, "type", "veth", "peer", "name", "up0", "netns", bridge)
            _ip("-n", bridge, "link", "set", "up0", "master", "br0", "up")
            _ip("addr", "add", f"{prefix}.1/24", "dev", root_link)
            _ip("link", "set", root_link, "up")
            hosts = []
            for i in range(2):
                ns, address = f"{tag}-{i}", f"{prefix}.{i + 2}"
                _ip("netns", "add", ns)
                made.append(ns)
                _ip("-n", bridge, "link", "add", f"p{i}", "type", "veth",
                    "peer", "name", "eth0", "netns", ns)  # fmt: skip
                _ip("-n", bridge, "link", "set", f"p{i}", "master", "br0", "up")
                _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                hosts.append((ns, address))
        except (OSError, subprocess.SubprocessError) as exc:
            detail = str(getattr(exc, "stderr", "") or exc).strip()
            pytest.skip(f"cannot create network namespaces here: {detail}")
        yield f"{prefix}.1", hosts, tag
    finally:
        # Deleting the bridge's namespace deletes its end of the root's veth, and so the pair.
        subprocess.run(["ip", "link", "del", root_link], capture_output=True, timeout=10)
        for ns in reversed(made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


def _end_session(driver: subprocess.Popen[bytes] | None) -> dict[int, str]:
    """Wait for the driver's session (its JVM exits after it) to end, kill what is left of
    it after `_STOP_TIMEOUT` seconds and return that."""
    if driver is None:
        return {}
    deadline = time.monotonic() + _STOP_TIMEOUT
    while processes({driver.pid}, zombies=True) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes({driver.pid})
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # ours: started in the driver's session
    return left


def _run_on_two_hosts(directory: Path) -> dict[str, Any]:
    """Start the cluster on two hosts, run the driver, tear everything down: what the
    driver reported, the hosts' addresses, and what was left after the teardown."""
    try:
        require_pyspark()
        find_java()
    except SparkUnavailable as exc:
        pytest.skip(str(exc))
    started = time.monotonic()
    with two_hosts() as (root, hosts, tag):
        cluster = StandaloneCluster(directory, workers=2, cores=1, host=root)
        sessions: set[int] = set()
        driver: subprocess.Popen[bytes] | None = None
        try:
            cluster.start(workers=0)
            for ns, address in hosts:
                cluster.start_worker(address, ns, wait=False)
            sessions = cluster.sessions
            env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": root}
            env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(APP.parent)])
            env.pop("SPARK_MASTER", None)
            report = directory / "report.json"
            with open(directory / "driver.log", "wb") as log:
                # Started with the workers: its groups wait for their executors' slots.
                driver = subprocess.Popen(
                    [sys.executable, str(APP), cluster.url, root, str(report)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=directory,
                    start_new_session=True,  # its JVM too: found by session as the cluster's
                )
            sessions.add(driver.pid)
            cluster.wait_workers(2)
            returncode = driver.wait(timeout=_DRIVER_TIMEOUT)
            assert returncode == 0, (directory / "driver.log").read_text()[-3000:]
        finally:
            if driver is not None and driver.poll() is None:
                driver.kill()
                driver.wait()
            left = {**cluster.stop(), **_end_session(driver)}
    namespaces = _ip("netns", "list")
    links = _ip("-o", "link")
    return {
        "report": json.loads(report.read_text()),
        "hosts": [address for _, address in hosts],
        "left": {
            "processes": {**left, **processes(sessions)},
            "namespaces": [line for line in namespaces.splitlines() if tag in line],
            "links": [line for line in links.splitlines() if tag in line],
        },
        "seconds": round(time.monotonic() - started, 1),  # for the notes, never asserted
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return once_per_run(tmp_path_factory, "multihost", _run_on_two_hosts)


def _check_member_placement(members: list[dict[str, Any]], hosts: list[str]) -> None:
    """One member per host, each bound at its executor's own address (never loopback),
    and the stage gathered exactly those endpoints."""
    assert [m["partition"] for m in members] == [0, 1]
    assert sorted(m["bound"][0] for m in members) == sorted(hosts)
    for m in members:
        assert m["bound"][0] == m["executor"]
        assert not m["bound"][0].startswith("127.")
        endpoints = sorted(f"{m['bound'][0]}[{m['bound'][1]}]" for m in members)
        assert sorted(m["gathered"]) == endpoints


def test_spark_group_spans_two_hosts_each_member_at_its_executors_address(
    run: dict[str, Any],
) -> None:
    """`run_group` of 2 on two hosts: each member bound TCP at its own executor's address on
    the bridge, one view of both (the same everywhere), every multicast heard."""
    members = run["report"]["run_group"]
    _check_member_placement(members, run["hosts"])
    assert len({m["view_id"] for m in members}) == 1
    assert all(sorted(m["view"]) == ["p0", "p1"] for m in members)
    assert all(m["heard"] == [0, 1] for m in members)


def test_spark_map_in_group_spans_two_hosts_and_sums_every_partition(
    run: dict[str, Any],
) -> None:
    """`map_in_group` over 2 partitions on two hosts: each member at its executor's address,
    one view of both, each holds its partition and hears the other's sum."""
    records = sorted(run["report"]["map_in_group"], key=lambda r: r["partition"])
    _check_member_placement(records, run["hosts"])
    assert len({r["view_id"] for r in records}) == 1
    assert all(sorted(r["view"]) == ["p0", "p1"] for r in records)
    assert [r["rows"] for r in records] == [500, 500]
    assert all(r["total"] == sum(range(1000)) for r in records)


def test_spark_two_host_cluster_leaves_no_process_namespace_or_link(
    run: dict[str, Any],
) -> None:
    """After the run no process the cluster started is alive, and no namespace or link the
    test made is left."""
    assert run["left"] == {"processes": {}, "namespaces": [], "links": []}
