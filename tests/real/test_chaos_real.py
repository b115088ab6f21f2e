"""Chaos runs over real member processes (`triogroups chaos`), checked by the history checker.

Each run starts its members through the process supervisor, carries out a seeded fault
schedule (chosen so that every kind its stack allows happens) and must end with no
violation of the delivery contract; on failure the assertion shows the violations with their
history excerpts. The processes are stopped by the supervisor when the run ends.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from triogroups.chaos._run import ChaosResult, run_chaos_async

pytestmark = pytest.mark.real


async def _run(
    stack: str, members: int, duration: float, seed: int
) -> tuple[ChaosResult, list[dict[str, Any]]]:
    """One run and the members' log records (``members.log``); its histories are removed
    when it passes and kept (the path is in the failure message) when it does not."""
    keep = Path(tempfile.mkdtemp(prefix=f"triogroups-chaos-{stack}-{seed}-"))
    args = argparse.Namespace(
        members=members,
        duration=duration,
        seed=seed,
        stack=stack,
        rate=40.0,
        settle=10.0,
        max_rss=400.0,
        max_window=20_000,
        keep=str(keep),
    )
    out = io.StringIO()
    result = await run_chaos_async(Console(file=out, width=120), args)
    shown = "\n".join(str(v) for v in result.violations[:5])
    assert result.violations == [], f"{len(result.violations)} violations in {keep}:\n{shown}"
    with open(keep / "members.log", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    shutil.rmtree(keep)
    assert result.sent > 0 and result.delivered > result.sent
    return result, records


async def test_chaos_udp_30s_kills_pauses_partitions_loss_dup_delay() -> None:
    """Seed 759's schedule has every kind: kill, restart, pause, partition, one-way partition,
    loss, duplication and delay, in 30 s (a run under a minute draws its faults twice as
    densely, so half a minute holds them all, as 60 s of seed 6 did). ``members.log`` says
    what GMS did meanwhile: every member's views, and the suspicions the kills and the
    partition caused."""
    result, records = await _run("udp", 5, 30.0, 759)
    assert set(result.faults) == {
        "kill",
        "restart",
        "pause",
        "partition",
        "oneway",
        "loss",
        "dup",
        "delay",
    }
    assert result.incarnations > 5 and max(result.max_rss.values()) > 0
    gms = [r for r in records if r.get("logger") == "triogroups.protocols.gms"]
    installed = {r["member"] for r in gms if " installed " in r["message"]}
    assert installed == {"A", "B", "C", "D", "E"}, installed
    assert any(r["level"] == "WARNING" and " suspects " in r["message"] for r in gms)
    assert all(isinstance(r["time"], float) for r in records)


async def test_chaos_tcp_kill_pause_dup() -> None:
    """TCP takes no loss below NAKACK2: a kill (rejoins as a new incarnation), pauses (a
    member excluded while paused is merged back; its first multicasts after the merge reach
    members that have not installed the merge view yet and wait there for it) and duplication."""
    result, _ = await _run("tcp", 4, 20.0, 3)
    assert {"kill", "pause"} <= set(result.faults)


async def test_chaos_udp_mcast_partition_kill_loss_delay() -> None:
    """MCAST in place of NAKACK2, through a partition, a kill, loss and delay."""
    result, _ = await _run("udp-mcast", 4, 20.0, 8)
    assert set(result.faults) == {"delay", "partition", "kill", "loss"}
