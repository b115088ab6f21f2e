"""One campaign seed in this process: run it, shrink a failing one, and report it as text.

`run_seed` runs a seed on virtual time (`_campaign_run`), `shrink` drops steps while
the run still breaks a rule it broke, and `report` and `replay_command` say what a
run did and how to replay it. The command (`_campaign`) calls these from its worker
processes and for ``--seed``; nothing here reads arguments or handles signals.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing

from triogroups.chaos._campaign_run import CampaignResult, run_scenario
from triogroups.chaos._scenario import BLOCKS_SUFFIX, scenario

__all__ = ["replay_command", "report", "run_seed", "shrink"]

_SHOWN = 5  # violations printed with their excerpts


def run_seed(
    preset: str,
    seed: int,
    keep: Path | None = None,
    say: Any = None,
    *,
    steps: Sequence[int] | None = None,
) -> CampaignResult:
    """Run one seed on virtual time in this process; histories go to ``keep`` (kept) or
    a temporary directory (removed). ``steps``: the indices of the drawn steps to keep
    (`Scenario.only`), None for all."""
    sc = scenario(preset, seed)
    if steps is not None:
        sc = sc.only(steps)
    root = keep if keep is not None else Path(tempfile.mkdtemp(prefix="triogroups-campaign-"))
    if keep is not None:
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
    try:
        clock = trio.testing.MockClock(autojump_threshold=0)
        return trio.run(run_scenario, sc, root, say, clock=clock)
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def shrink(
    preset: str, seed: int, steps: Sequence[int] | None = None, say: Any = None
) -> CampaignResult:
    """A smaller failing run of ``seed``: drop one step at a time, last first, keeping the
    drop whenever the run still breaks a rule the first run broke (each try is a whole
    run: about a second of CPU per step). Returns the smallest failing run found (the
    run itself if it passes)."""
    say = say or (lambda text: None)
    best = run_seed(preset, seed, steps=steps)
    rules = {v.rule for v in best.violations}
    if not rules:
        return best
    kept = list(best.scenario.kept or range(len(best.scenario.steps)))
    for i in reversed(list(kept)):
        trial = [k for k in kept if k != i]
        result = run_seed(preset, seed, steps=trial)
        if rules & {v.rule for v in result.violations}:
            kept, best = trial, result
            say(f"without step {i}: still fails ({len(kept)} steps left)")
        else:
            say(f"without step {i}: passes, step {i} stays")
    return best


def replay_command(preset: str, seed: int, kept: Sequence[int] | None = None) -> str:
    """The one-line command that replays ``seed`` (with only the steps ``kept``) verbosely."""
    only = "" if kept is None else f" --steps {','.join(map(str, kept)) or 'none'}"
    return f"triogroups campaign --preset {preset} --seed {seed}{only}"


def report(result: CampaignResult) -> str:
    """A failed (or replayed) run as text: seed, schedule, violations, replay command."""
    sc = result.scenario
    steps = ", ".join(f"{k} {v}" for k, v in sorted(result.steps_done.items())) or "none"
    lines = [
        *sc.describe(),
        f"incarnations {result.incarnations}, sent {result.sent}, delivered "
        f"{result.delivered}, views {result.views}"
        + (
            f", locks {result.locks}, increments {result.increments}"
            if sc.preset.endswith(BLOCKS_SUFFIX)
            else ""
        )
        + f"; steps {steps}"
        + (f"; skipped {len(result.skipped)}" if result.skipped else ""),
    ]
    if result.violations:
        kinds = Counter(v.rule for v in result.violations)
        lines.append(
            f"violations: {len(result.violations)} ("
            + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
            + ")"
        )
        lines += [str(v) for v in result.violations[:_SHOWN]]
    else:
        lines.append("violations: 0")
    lines.append(f"replay: {replay_command(sc.preset, sc.seed, sc.kept)}")
    if result.violations and sc.kept is None:
        lines.append(f"shrink: {replay_command(sc.preset, sc.seed)} --shrink")
    return "\n".join(lines)
