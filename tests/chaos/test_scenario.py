"""The campaign's scenarios (`triogroups.chaos._scenario`): a pure function of preset and
seed that keeps a group able to recover, as the real chaos schedule does."""

from __future__ import annotations

import itertools

import pytest

from triogroups.chaos import LOSSLESS_KINDS
from triogroups.chaos._scenario import PRESETS, STEP_KINDS, Scenario, scenario

SEEDS = range(60)


def test_the_same_seed_gives_the_same_scenario_and_another_seed_another() -> None:
    """Replaying a seed replays its scenario; the preset is part of what is drawn."""
    assert scenario("udp", 7) == scenario("udp", 7)
    assert scenario("udp", 7).describe() == scenario("udp", 7).describe()
    assert scenario("udp", 7) != scenario("udp", 8)
    assert scenario("udp", 7).steps != scenario("unicast2", 7).steps


def _membership(sc: Scenario) -> list[tuple[float, int, int]]:
    """(time, members present, members down) after each step starts, replayed from the
    steps: a kill or restart is down until its new incarnation is back, a pause until
    it ends."""
    present = set(sc.members)
    down: dict[str, float] = {}
    out = []
    for step in sc.steps:
        t = step.at
        name = step.members[0] if step.members else ""
        if step.kind == "join":
            present.add(name)
        elif step.kind == "leave":
            present.discard(name)
        elif step.kind in ("kill", "restart", "pause"):
            assert step.until is not None
            down[name] = step.until
        out.append((t, len(present), sum(1 for u in down.values() if u > t)))
    return out


@pytest.mark.parametrize("preset", PRESETS)
def test_scenarios_keep_a_majority_up_and_3_to_9_members(preset: str) -> None:
    """Never more than (present - 1) // 2 members down at once, 3 to 9 members present,
    and a member already down is not left, killed, restarted or paused until it is back
    (splits cut the whole group, so they do include it)."""
    for seed in SEEDS:
        sc = scenario(preset, seed)
        assert 3 <= len(sc.members) <= 9
        for t, present, down in _membership(sc):
            assert 3 <= present <= 9, (seed, t)
            assert down <= (present - 1) // 2, (seed, t, present, down)
        for i, step in enumerate(sc.steps):
            if step.kind not in ("kill", "restart", "pause"):
                continue
            assert step.until is not None
            later = [
                s
                for s in sc.steps[i + 1 :]
                if s.kind in ("leave", "kill", "restart", "pause") and s.members == step.members
            ]
            assert all(s.at >= step.until for s in later), (seed, step)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_step_ends_before_the_quiet_period_and_traffic_goes_on_into_it(
    preset: str,
) -> None:
    """Steps start after the warm-up and end by quiet_at; the quiet period is long enough
    for the checker's settle (10 s) and traffic goes on for a while in it."""
    for seed in SEEDS:
        sc = scenario(preset, seed)
        assert round(sc.duration - sc.quiet_at, 6) >= 15
        assert sc.quiet_at < sc.traffic_until < sc.duration
        for step in sc.steps:
            assert 2.0 <= step.at < sc.quiet_at
            assert step.until is None or step.at <= step.until <= sc.quiet_at


@pytest.mark.parametrize("preset", ["tcp", "tcp-total"])
def test_tcp_gets_only_the_kinds_a_lossless_transport_can_take(preset: str) -> None:
    """No partitions, one-way partitions or loss on tcp (and tcp-total), but short lost
    connections (what a TCP transport drops when a connection breaks), one at a time,
    between two members."""
    scenarios = [scenario(preset, seed) for seed in SEEDS]
    kinds = {s.kind for sc in scenarios for s in sc.steps}
    assert kinds <= {*LOSSLESS_KINDS, "join", "leave", "connloss"}
    assert {"kill", "pause", "join", "leave", "connloss"} <= kinds
    for sc in scenarios:
        lost = [s for s in sc.steps if s.kind == "connloss"]
        for step in lost:
            assert step.until is not None and 0 < step.until - step.at <= 2.01  # rounded
            assert len(step.members) == len(step.others) == 1
            assert step.members != step.others
        for first, second in itertools.pairwise(lost):
            assert first.until is not None and first.until <= second.at
    assert "connloss" not in {s.kind for seed in SEEDS for s in scenario("udp", seed).steps}


def test_lossy_presets_draw_every_kind_and_small_windows_in_some_runs() -> None:
    """Over 60 seeds udp-mcast draws every step kind, some coordinator leaves and leaves
    right after a burst, and small MCAST windows and credits in some runs only."""
    scenarios = [scenario("udp-mcast", seed) for seed in SEEDS]
    assert {s.kind for sc in scenarios for s in sc.steps} == set(STEP_KINDS)
    leaves = [s for sc in scenarios for s in sc.steps if s.kind == "leave"]
    assert any(s.coord for s in leaves) and any(s.value for s in leaves)
    small = [sc for sc in scenarios if "MCAST" in sc.knobs]
    assert 0 < len(small) < len(scenarios)


def test_splits_overlap_at_most_two_at_a_time() -> None:
    """At most two partitions or one-way partitions are in force at any moment."""
    for seed in SEEDS:
        steps = [s for s in scenario("udp", seed).steps if s.kind in ("partition", "oneway")]
        for step in steps:
            assert sum(1 for s in steps if s.at <= step.at < (s.until or 0)) <= 2


def test_an_unknown_preset_is_refused() -> None:
    with pytest.raises(ValueError, match="preset must be one of"):
        scenario("nope", 1)


def test_only_keeps_the_chosen_steps_and_everything_else_as_drawn() -> None:
    """A shrunk scenario keeps the steps at the given indices (in order) and draws the
    rest (members, rate, knobs) as the whole one; an index out of range is refused."""
    whole = scenario("udp", 105)
    part = whole.only([3, 0])
    assert part.steps == (whole.steps[0], whole.steps[3]) and part.kept == (0, 3)
    assert (part.members, part.rate, part.knobs) == (whole.members, whole.rate, whole.knobs)
    assert whole.only([]).steps == ()
    assert "[3]" in "\n".join(part.describe())
    with pytest.raises(IndexError, match="steps must be in"):
        whole.only([len(whole.steps)])
