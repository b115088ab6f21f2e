"""Locks and counters across member processes over UDP on loopback.

Three processes (`_lock_member.py`) take turns holding a lock around appends to one
file and increment a counter. The file is the guarded resource: its lines must show
one holder at a time and tokens that only grow; the increments must each have seen a
value of their own, 1 to their number. Deadlines are generous; nothing is timed.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
import trio

from triogroups.testing import free_ports

pytestmark = pytest.mark.real

MEMBER = Path(__file__).with_name("_lock_member.py")
ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 15


async def test_lock_and_counter_across_processes_over_udp(tmp_path: Path) -> None:
    cluster = f"blocks-{uuid.uuid4().hex[:8]}"
    port = free_ports()
    shared = tmp_path / "resource.txt"
    outputs: dict[str, bytes] = {}

    async def run(name: str) -> None:
        args = [sys.executable, str(MEMBER), cluster, name, str(port), "3", str(ROUNDS)]
        done = await trio.run_process(
            [*args, str(shared)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
        )
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        outputs[name] = done.stdout

    with trio.fail_after(180):
        async with trio.open_nursery() as nursery:
            for name in "ABC":
                nursery.start_soon(run, name)
    lines = [line.split() for line in shared.read_text().splitlines()]
    assert len(lines) == 2 * 3 * ROUNDS
    tokens = []
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter[0] == "enter" and leave[0] == "exit", "two holders at once"
        assert enter[1:] == leave[1:]
        tokens.append(int(enter[2]))
    assert tokens == sorted(set(tokens)), "tokens did not grow"
    results = [n for out in outputs.values() for n in json.loads(out.splitlines()[-1])]
    assert sorted(results) == list(range(1, 3 * ROUNDS + 1))
