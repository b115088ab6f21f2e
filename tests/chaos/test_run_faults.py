"""The real chaos runner's fault log, as the history checker reads it: every split's end is a
``heal``, and the end of the schedule is the quiet period's ``heal`` that no fault follows."""

from __future__ import annotations

from pathlib import Path

import trio

from triogroups import Address, View
from triogroups.chaos._run import _Board, _Runner
from triogroups.chaos._schedule import Fault
from triogroups.testing import HistoryWriter, check_histories, read_histories

A, B = Address(0xA, "A.00000a"), Address(0xB, "B.00000b")


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_chaos_runner_records_the_quiet_heal_so_a_member_that_never_resumes_is_reported(
    tmp_path: Path,
) -> None:
    """A split of A and B heals at 8, then both are paused at 9 (within resume_within: that
    heal asks nothing of them, chaos udp-mcast seed 5005); the schedule ends at 14. A and B
    stay singletons to t = 50, hearing each other and never merging: the quiet period's heal
    the runner records at the end of the schedule reports both."""
    clock = Clock()
    faults = HistoryWriter(tmp_path / "faults.jsonl", None, clock)
    writers = {m: HistoryWriter(tmp_path / f"{m.name}.jsonl", m, clock) for m in (A, B)}
    runner = _Runner(None, _Board(), faults)  # type: ignore[arg-type]  # no process to signal
    split = Fault(5.0, "oneway", ("A",), 8.0, others=("B",))

    async def start_split() -> None:
        async with trio.open_nursery() as nursery:
            await runner.start(split, nursery)

    clock.t = 1.0
    for m, w in writers.items():
        w.view(View.create(m, 1, [m]))
    clock.t = 5.0
    trio.run(start_split)
    clock.t = 8.0
    runner.end(split)
    for t, name in ((9.0, "A"), (9.5, "B")):  # as runner.start records a pause (no SIGSTOP here)
        clock.t = t
        runner._record("pause", Fault(t, "pause", (name,), t + 2.0))
    for t, name in ((11.0, "A"), (11.5, "B")):
        clock.t = t
        runner._record("resume", Fault(t - 2.0, "pause", (name,), t))
    clock.t = 14.0
    runner.resume_all()
    for i in range(1, 26):
        clock.t = 2.0 * i
        for m, w in writers.items():
            w.send(f"{m.name[0]}{i}")
            w.deliver(m, f"{m.name[0]}{i}")
    for w in (*writers.values(), faults):
        w.close()
    found = check_histories(read_histories(tmp_path), settle=100.0, resume_within=30.0)
    heals = [
        (v.excerpt[0].record["t"], v.excerpt[0].record["detail"], v.text.split()[0])
        for v in found
        if v.rule == "no_traffic_after_heal"
    ]
    assert heals == [(14.0, "quiet period", "A.00000a"), (14.0, "quiet period", "B.00000b")]
