"""The chaos fault schedule: a pure function of seed, duration and members, within its rules."""

from __future__ import annotations

import pytest

from triogroups.chaos import (
    FAULT_KINDS,
    LOSSLESS_KINDS,
    Fault,
    fault_schedule,
    network_state,
    quiet_time,
)

NAMES = ["A", "B", "C", "D", "E"]


def test_the_same_seed_replays_the_same_schedule_and_another_seed_does_not() -> None:
    assert fault_schedule(7, 300, NAMES) == fault_schedule(7, 300, NAMES)
    assert fault_schedule(7, 300, NAMES) != fault_schedule(8, 300, NAMES)


@pytest.mark.parametrize("seed", range(20))
def test_schedule_keeps_a_majority_up_one_split_at_a_time_and_a_quiet_tail(seed: int) -> None:
    duration = 200.0
    schedule = fault_schedule(seed, duration, NAMES)
    assert schedule == sorted(schedule, key=lambda f: f.at)
    last = duration - quiet_time(duration)
    splits: list[Fault] = []
    for fault in schedule:
        assert fault.kind in FAULT_KINDS and set(fault.members) <= set(NAMES)
        assert 3.0 <= fault.at < last and (fault.until is None or fault.until <= last)
        if fault.kind in ("partition", "oneway"):
            assert set(fault.members).isdisjoint(fault.others) and fault.members and fault.others
            assert all(s.until is not None and s.until <= fault.at for s in splits)
            splits.append(fault)
    for t in range(200):  # members killed (back after 6 s) or paused at any moment
        down = [
            f
            for f in schedule
            if f.kind in ("kill", "restart", "pause")
            and f.at <= t < (f.until if f.until is not None else f.at + 6.0)
        ]
        assert len(down) <= (len(NAMES) - 1) // 2


def test_schedule_draws_every_kind_and_only_the_kinds_asked_for() -> None:
    kinds = {f.kind for seed in range(5) for f in fault_schedule(seed, 600, NAMES)}
    assert kinds == set(FAULT_KINDS)
    lossless = {
        f.kind for seed in range(5) for f in fault_schedule(seed, 600, NAMES, kinds=LOSSLESS_KINDS)
    }
    assert lossless == set(LOSSLESS_KINDS)


def test_schedule_refuses_unknown_kinds_and_too_few_members() -> None:
    with pytest.raises(ValueError, match="kinds must be among"):
        fault_schedule(1, 60, NAMES, kinds=["flood"])
    with pytest.raises(ValueError, match="at least 2 members"):
        fault_schedule(1, 60, ["A"])


def test_network_state_of_a_partition_keeps_out_every_incarnation_of_the_other_side() -> None:
    uuids = {"A": ["a1"], "B": ["b1", "b2"], "C": ["c1"]}
    split = Fault(5.0, "partition", ("A",), 9.0, others=("B", "C"))
    assert network_state("A", [split], uuids).ignore == ("b1", "b2", "c1")
    assert network_state("B", [split], uuids).ignore == ("a1",)


def test_network_state_of_a_one_way_partition_deafens_one_side_only() -> None:
    uuids = {"A": ["a1"], "B": ["b1"]}
    oneway = Fault(5.0, "oneway", ("A",), 9.0, others=("B",))
    assert network_state("A", [oneway], uuids).ignore == ("b1",)
    assert network_state("B", [oneway], uuids).ignore == ()


def test_network_state_of_loss_dup_and_delay_applies_to_the_members_hit() -> None:
    active = [
        Fault(1.0, "loss", ("A", "B"), 5.0, value=0.2),
        Fault(1.0, "delay", ("B",), 5.0, value=0.1),
    ]
    a, b, c = (network_state(n, active, {}) for n in "ABC")
    assert (a.loss, a.delay, b.loss, b.delay) == (0.2, 0.0, 0.2, 0.1)
    assert c == network_state("C", [], {})
