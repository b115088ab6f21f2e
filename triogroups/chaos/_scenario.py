"""The scenario of one campaign run: a pure function of preset and seed.

`scenario` draws everything a simulated run does from ``random.Random(seed)`` (and
from nothing else: no clock, no trio, no hash order), as `fault_schedule` does for
real chaos runs, so ``triogroups campaign --seed S`` replays the same run: how many
members, the stack's knobs (small MCAST windows and flow-control credits in some
runs), the traffic mix, and a timed list of `Step`\\ s. The runner (`_campaign_run`)
carries the steps out on the simulated network on virtual time.

Rules that keep a run meaningful (a group that can always recover), as in
`fault_schedule`:

- 3 to 9 members at any time; steps start after ``warmup`` and every step has
  ended by ``quiet_at``: the quiet period heals every split, ends every burst,
  resumes every paused member and restarts every killed one, and traffic goes
  on for a while, so the group merges and retransmits before the check;
- at most ``(present - 1) // 2`` members are down at once (killed until they are
  back, leaving to restart, paused), counted against the members present then;
  a member that is down, leaving or joining gets no other step until it is back;
- at most two network splits (partitions, one-way partitions) overlap, and one
  burst of each network-quality kind (loss, dup, delay) at a time;
- on a TCP stack (``tcp``, ``tcp-total``) only the kinds of `LOSSLESS_KINDS` (nothing that drops:
  TCP loses nothing it carries), joins and leaves, and lost connections
  (``connloss``, one at a time): for 0.2 to 2 s, well inside failure detection,
  what one member sends another is dropped, as a TCP transport drops the bundles
  it queued for a peer when a connection breaks or cannot be made (a real chaos
  run lost 78 multicasts that way, which only NAKACK2's retransmission brings
  back). Its fault record is a one-way split, so the checker knows the pair could
  not talk meanwhile.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from triogroups.chaos._schedule import (
    _DOWN,
    _QUALITY,
    _SPLIT,
    FAULT_KINDS,
    LOSSLESS_KINDS,
)
from triogroups.chaos._schedule import _WEIGHTS as FAULT_WEIGHTS

__all__ = ["BLOCKS_SUFFIX", "PRESETS", "STEP_KINDS", "Scenario", "Step", "scenario"]

#: the campaign's stacks: the presets and the seeds' UNICAST2 stack (udp with UNICAST2 in
#: place of UNICAST3); ``tcp`` and ``tcp-total`` run on lossless links. On ``udp-total``
#: and ``tcp-total`` (SEQUENCER) every regular multicast is in the total order, and the
#: checker's **total_order** rule compares the members' orders. The ``-blocks`` presets
#: run the total-order stacks with every member also taking locks and incrementing a
#: counter (`_campaign_blocks`), judged by the lock and counter
#: rules: a preset of their own, so that the total-order presets' seeds replay unchanged
BLOCKS_SUFFIX = "-blocks"
PRESETS = (
    "udp",
    "tcp",
    "udp-mcast",
    "unicast2",
    "udp-total",
    "tcp-total",
    "udp-total-blocks",
    "tcp-total-blocks",
)
_LOSSLESS_PRESETS = ("tcp", "tcp-total", "tcp-total-blocks")
# the faults and their weights are chaos runs' own (`fault_schedule`); a campaign adds
# joins and graceful leaves, which a chaos run makes through restarts
STEP_KINDS = ("join", "leave", *FAULT_KINDS)
_WEIGHTS = {"join": 2, "leave": 2, "connloss": 2, **FAULT_WEIGHTS}
_NAMES = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_MAX_MEMBERS = 9
_MIN_MEMBERS = 3
_MAX_SPLITS = 2
_BACK_AFTER = 4.0  # a restarted or joining member is busy this long after it starts


@dataclass(frozen=True)
class Step:
    """One timed step: what, when (seconds from the start), whom, and until when.

    ``members`` are whom it hits: the joining, leaving, killed, restarted or paused
    member; one side of a ``partition`` (``others`` the other side); for ``oneway``
    the members that stop hearing ``others``. ``loss``, ``dup`` and ``delay`` hit
    the whole network, ``value`` being the probability or the longest delay (s).
    ``until``: when a pause, split or burst ends, when a killed member's new
    incarnation starts, when a member restarting after a graceful leave joins
    again. A leave with ``value`` 1 sends a burst of multicasts right before it
    leaves; ``coord`` says the member was chosen as the coordinator (the oldest).
    """

    at: float
    kind: str
    members: tuple[str, ...] = ()
    until: float | None = None
    others: tuple[str, ...] = ()
    value: float = 0.0
    coord: bool = False

    def describe(self) -> str:
        """The step as one readable line (without its time)."""
        who = ",".join(self.members)
        end = "" if self.until is None else f" until {self.until:.2f}"
        if self.kind == "partition":
            return f"partition {who} | {','.join(self.others)}{end}"
        if self.kind == "oneway":
            return f"oneway {who} stop hearing {','.join(self.others)}{end}"
        if self.kind == "connloss":  # read by the checker as the one-way split it is
            return f"oneway {who} stop hearing {','.join(self.others)}{end} (connection lost)"
        if self.kind in _QUALITY:
            return f"{self.kind} {self.value:g}{end}"
        if self.kind == "kill":
            return f"kill {who}, new incarnation at {self.until:.2f}"
        if self.kind == "restart":
            return f"restart {who} (graceful leave, rejoins at {self.until:.2f})"
        if self.kind == "leave":
            how = " right after a burst" if self.value else ""
            return f"leave {who}{' (coordinator)' if self.coord else ''}{how}"
        return f"{self.kind} {who}{end}"


@dataclass(frozen=True)
class Scenario:
    """Everything one run does, drawn from its seed."""

    preset: str
    seed: int
    members: tuple[str, ...]  # the members at the start, in join order
    duration: float  # the whole run, quiet period included
    quiet_at: float  # when the quiet period starts
    traffic_until: float  # when members stop sending
    rate: float  # messages per second per member
    mix: dict[str, float]  # share of regular / oob / noloop multicasts and unicasts
    burst: int  # largest burst of multicasts sent at once
    knobs: dict[str, dict[str, int]] = field(default_factory=dict)  # protocol -> properties
    steps: tuple[Step, ...] = ()
    #: the indices of the drawn steps this scenario keeps (`only`), None for all of them
    kept: tuple[int, ...] | None = None

    def only(self, indices: Sequence[int]) -> Scenario:
        """This scenario with only the drawn steps at ``indices`` (for shrinking a failing
        run: everything else, traffic included, is drawn as before). IndexError for an
        index that is not a step's."""
        drawn = scenario(self.preset, self.seed).steps
        kept = tuple(sorted(set(indices)))
        for i in kept:
            if not 0 <= i < len(drawn):
                raise IndexError(f"steps must be in 0..{len(drawn) - 1}, got {i}")
        return replace(self, steps=tuple(drawn[i] for i in kept), kept=kept)

    def describe(self) -> list[str]:
        """The scenario as readable lines: the setup, then one line per timed step."""
        knobs = "; ".join(
            f"{p} " + ", ".join(f"{k}={v}" for k, v in props.items())
            for p, props in self.knobs.items()
        )
        lines = [
            f"preset {self.preset}, seed {self.seed}: members {','.join(self.members)}, "
            f"{self.duration:g} s (quiet from {self.quiet_at:g} s, traffic until "
            f"{self.traffic_until:g} s), {self.rate:g} msgs/s per member, bursts up to "
            f"{self.burst}" + (f", {knobs}" if knobs else ""),
        ]
        numbers = self.kept if self.kept is not None else range(len(self.steps))
        for i, step in zip(numbers, self.steps, strict=True):
            lines.append(f"  {step.at:7.2f}  {step.describe()}  [{i}]")
        lines.append(f"  {self.quiet_at:7.2f}  quiet: heal, end bursts, resume, restart")
        return lines


def scenario(preset: str, seed: int, *, warmup: float = 2.0) -> Scenario:
    """The scenario of run ``seed`` over ``preset`` (see the module docstring)."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    rng = random.Random(f"{preset}/{seed}")
    n = rng.choice([3, 3, 4, 4, 5, 5, 6, 7, 8, 9])
    active = round(rng.uniform(12.0, 22.0), 2)
    quiet = 15.0
    knobs: dict[str, dict[str, int]] = {}
    if rng.random() < 0.3:
        if preset == "udp-mcast":
            knobs["MCAST"] = {"capacity": rng.choice([8, 16, 32, 64])}
        knobs["UFC"] = {"max_credits": rng.choice([2_000, 5_000, 20_000])}
        if preset != "udp-mcast":
            knobs["MFC"] = {"max_credits": rng.choice([2_000, 5_000, 20_000])}
    mix = {"regular": 0.6, "oob": 0.1, "noloop": 0.1, "unicast": 0.2}
    allowed = (*LOSSLESS_KINDS, "join", "leave") if preset in _LOSSLESS_PRESETS else STEP_KINDS
    kinds = [k for k in STEP_KINDS if k in allowed]
    if preset in _LOSSLESS_PRESETS:
        kinds.append("connloss")
    steps = _steps(rng, kinds, n, warmup, active)
    return Scenario(
        preset=preset,
        seed=seed,
        members=tuple(_NAMES[:n]),
        duration=round(active + quiet, 2),
        quiet_at=active,
        traffic_until=round(active + quiet - 4.0, 2),
        rate=round(rng.uniform(1.0, 3.0), 1),
        mix=mix,
        burst=rng.choice([5, 10, 30]),
        knobs=knobs,
        steps=tuple(steps),
    )


def _steps(rng: random.Random, kinds: list[str], n: int, warmup: float, last: float) -> list[Step]:
    weights = [_WEIGHTS[k] for k in kinds]
    present = list(_NAMES[:n])  # in join order: the first is the oldest (the coordinator)
    spare = list(_NAMES[n:])
    busy = dict.fromkeys(present, 0.0)  # member -> when it is free for another step
    down_until: dict[str, float] = {}  # member -> when it is back (counts as down)
    splits: list[float] = []  # when each split ends
    quality = dict.fromkeys(_QUALITY, 0.0)
    connloss_until = 0.0
    out: list[Step] = []
    t = warmup
    while True:
        t = round(t + rng.uniform(0.3, 1.5), 2)
        if t > last - 1.0:
            return out
        kind = rng.choices(kinds, weights)[0]
        free = [m for m in present if busy[m] <= t]
        until = round(min(t + rng.uniform(1.0, 8.0), last), 2)
        down = sum(1 for m in present if down_until.get(m, 0.0) > t)
        if kind == "join":
            if len(present) >= _MAX_MEMBERS or not spare:
                continue
            name = spare.pop(0)
            present.append(name)
            busy[name] = t + _BACK_AFTER
            out.append(Step(t, "join", (name,)))
        elif kind == "leave":
            if len(present) - down <= _MIN_MEMBERS or down > (len(present) - 2) // 2 or not free:
                continue
            coord = rng.random() < 0.4 and present[0] in free
            name = present[0] if coord else rng.choice(free)
            after_send = 1.0 if rng.random() < 0.5 else 0.0
            present.remove(name)
            out.append(Step(t, "leave", (name,), value=after_send, coord=coord))
        elif kind in _DOWN:
            if down + 1 > (len(present) - 1) // 2 or not free:
                continue
            name = rng.choice(free)
            if kind == "pause":
                until = round(min(t + rng.uniform(1.0, 6.0), last), 2)
                out.append(Step(t, kind, (name,), until))
                down_until[name] = until
                busy[name] = until + 1.0
            else:
                until = round(min(t + rng.uniform(1.0, 4.0), last), 2)
                out.append(Step(t, kind, (name,), until))
                down_until[name] = until + _BACK_AFTER
                busy[name] = until + _BACK_AFTER
                present.remove(name)  # rejoins at the end of the join order
                present.append(name)
        elif kind == "connloss":
            if connloss_until > t:
                continue
            deaf, source = rng.sample(present, 2)
            until = round(min(t + rng.uniform(0.2, 2.0), last), 2)
            out.append(Step(t, kind, (deaf,), until, others=(source,)))
            connloss_until = until
        elif kind in _SPLIT:
            splits = [end for end in splits if end > t]
            if len(splits) >= _MAX_SPLITS:
                continue
            shuffled = rng.sample(present, len(present))
            cut = rng.randint(1, len(present) - 1)
            side, other = tuple(sorted(shuffled[:cut])), tuple(sorted(shuffled[cut:]))
            out.append(Step(t, kind, side, until, others=other))
            splits.append(until)
        else:
            if quality[kind] > t:
                continue
            if kind == "delay":
                value = round(rng.uniform(0.01, 0.3), 3)
            else:
                value = round(rng.uniform(0.05, 0.3), 3)
            out.append(Step(t, kind, (), until, value=value))
            quality[kind] = until
