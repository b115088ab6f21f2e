"""The real chaos runner against real member processes: a kill or a pause aimed at a member
whose process already ended is logged as a ``skip``, not counted as done, and the runner counts
the members really up (chaos udp-mcast 5005 at load 28 had 1-4 of 7 up most of the time while
the schedule assumed a killed member back after 6 s)."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
import trio

from triogroups.actors import Restart
from triogroups.chaos._run import _MEMBER_APP, _Board, _Runner, chaos_config
from triogroups.chaos._schedule import Fault
from triogroups.supervisor._group import open_process_group
from triogroups.testing import HistoryWriter, wait_until

pytestmark = pytest.mark.real

STEP = 120  # seconds per awaited condition: generous, for a busy 2-core machine


async def test_chaos_runner_skips_a_kill_or_pause_of_a_member_whose_process_ended(
    tmp_path: Path,
) -> None:
    """Three chaos members that are never restarted (TEMPORARY): C is killed, so a second kill
    of C and a pause of C signal nobody and are skipped; a pause of B is carried out. The
    members up drop from 3 to 2 (C dead) to 1 (B paused) and back to 2 when B resumes. A
    graceful restart of A is logged with the ``start`` of its next incarnation."""
    board = _Board()
    faults = tmp_path / "faults.jsonl"
    with HistoryWriter(faults, None, time.time) as logs:
        async with open_process_group(
            _MEMBER_APP,
            3,
            stack=chaos_config("udp", 3),
            args=(str(tmp_path), 5.0, 1),
            restart=Restart.TEMPORARY,
            stop_timeout=5.0,
            output=board.output,
        ) as group:
            with trio.fail_after(STEP):
                await group.wait_for_view(3)
            runner = _Runner(group, board, logs)
            assert runner.count_up() == 3
            async with trio.open_nursery() as nursery:
                await runner.start(Fault(1.0, "kill", ("C",)), nursery)
                await wait_until(lambda: group.member("C").returncode is not None, timeout=STEP)
                assert runner.count_up() == 2
                await runner.start(Fault(2.0, "kill", ("C",)), nursery)
                skipped_pause = Fault(3.0, "pause", ("C",), 4.0)
                await runner.start(skipped_pause, nursery)
                runner.end(skipped_pause)
                pause = Fault(5.0, "pause", ("B",), 6.0)
                await runner.start(pause, nursery)
                assert runner.count_up() == 1
                runner.end(pause)
                assert runner.count_up() == 2
                await runner.start(Fault(7.0, "restart", ("A",)), nursery)
    records = [json.loads(line) for line in faults.read_text().splitlines()]
    assert [(r["kind"], r["detail"]) for r in records if r["k"] == "fault"] == [
        ("kill", "C"),
        ("skip", "kill C: not restarted yet"),
        ("skip", "pause C: not restarted yet"),
        ("pause", "B"),
        ("resume", "B"),
        ("restart", "A"),
        ("start", "A"),  # ends A's leave for the checker (`Outages`)
    ]
    assert group.member("A").incarnation == 2
    assert board.done == Counter(kill=1, pause=1, restart=1)
    assert board.skipped == Counter(kill=1, pause=1)
