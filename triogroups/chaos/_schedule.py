"""The fault schedule of a chaos run: a pure function of seed, duration and members.

`fault_schedule` draws every fault of a run up front from ``random.Random(seed)``,
so ``triogroups chaos --seed S`` replays the same faults at the same offsets. It
never reads a clock and never touches a process: the runner (`_run`) carries
the faults out, and `network_state` says what each member's network layers must
do while some faults are active.

Rules that keep a run meaningful (a group that can always recover):

- faults start after ``warmup`` and every fault has ended ``quiet`` seconds before
  the end, so the group heals, merges and retransmits before the histories are
  checked;
- at most ``(members - 1) // 2`` members are down (killed, restarting or paused)
  at once, and a member hit by one of these faults gets no other until it is back;
- one network split (a partition or a one-way partition) at a time, and one
  network-quality fault (loss, duplication or delay) at a time.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "FAULT_KINDS",
    "LOSSLESS_KINDS",
    "Fault",
    "NetworkState",
    "fault_schedule",
    "network_state",
    "quiet_time",
]

FAULT_KINDS = ("kill", "restart", "pause", "partition", "oneway", "loss", "dup", "delay")
# what a TCP stack meets: TCP itself loses nothing, and its connections do not partition
# one way (a stack without retransmission below NAKACK2 could take nothing that drops)
LOSSLESS_KINDS = ("kill", "restart", "pause", "dup", "delay")

_WEIGHTS = {
    "kill": 3,
    "restart": 1,
    "pause": 3,
    "partition": 2,
    "oneway": 2,
    "loss": 2,
    "dup": 1,
    "delay": 1,
}
_DOWN = ("kill", "restart", "pause")
_SPLIT = ("partition", "oneway")
_QUALITY = ("loss", "dup", "delay")
_BACK_AFTER = 6.0  # a killed or restarted member is busy this long (restart, rejoin)


@dataclass(frozen=True)
class Fault:
    """One fault: what, when (seconds from the start), whom, and until when.

    ``members`` are the members it hits: the killed, restarted or paused one; one
    side of a ``partition`` (``others`` is the other side); for ``oneway`` the
    members that stop hearing ``others`` (who still hear them); for ``loss``,
    ``dup`` and ``delay`` the members whose arriving traffic is hit, with
    ``value`` the loss or duplication probability or the longest delay in
    seconds. ``until`` is when it ends (None for kill and restart, which the
    supervisor ends by starting a new incarnation).
    """

    at: float
    kind: str
    members: tuple[str, ...]
    until: float | None = None
    others: tuple[str, ...] = ()
    value: float = 0.0

    def describe(self) -> str:
        """One line for the fault log and the live display."""
        who = ",".join(self.members)
        if self.kind == "partition":
            return f"{who} | {','.join(self.others)}"
        if self.kind == "oneway":
            return f"{who} stop hearing {','.join(self.others)}"
        if self.kind in _QUALITY:
            return f"{who} {self.kind} {self.value:.2f}"
        return who


def fault_schedule(
    seed: int,
    duration: float,
    members: Sequence[str],
    *,
    kinds: Sequence[str] = FAULT_KINDS,
    warmup: float = 3.0,
    quiet: float | None = None,
    gap: tuple[float, float] | None = None,
) -> list[Fault]:
    """The faults of a run of ``duration`` seconds over ``members``, sorted by start.

    ``quiet`` (default `quiet_time`) is the fault-free tail; ``gap`` bounds the time
    between two fault starts (default 1 to 4 s, half that in runs under a minute).
    """
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"kinds must be among {', '.join(FAULT_KINDS)}, got {unknown}")
    if len(members) < 2:
        raise ValueError(f"members must name at least 2 members, got {list(members)}")
    if quiet is None:
        quiet = quiet_time(duration)
    if gap is None:
        gap = (1.0, 4.0) if duration >= 60 else (0.5, 2.0)
    rng = random.Random(seed)
    names = list(members)
    last = duration - quiet
    weights = [_WEIGHTS[k] for k in kinds]
    busy = dict.fromkeys(names, 0.0)  # member -> when it is back
    split_until = quality_until = 0.0
    max_down = (len(names) - 1) // 2
    out: list[Fault] = []
    t = warmup
    while True:
        t += rng.uniform(*gap)
        if t > last - 1.0:
            return out
        kind = rng.choices(list(kinds), weights)[0]
        free = [n for n in names if busy[n] <= t]
        length = rng.uniform(2.0, 10.0)
        until = min(t + length, last)
        if kind in _DOWN:
            down = sum(1 for n in names if busy[n] > t)
            if down >= max_down or not free:
                continue
            victim = rng.choice(free)
            if kind == "pause":
                until = min(t + rng.uniform(1.0, 6.0), last)
                out.append(Fault(t, kind, (victim,), until))
                busy[victim] = until + 1.0
            else:
                out.append(Fault(t, kind, (victim,)))
                busy[victim] = t + _BACK_AFTER
        elif kind in _SPLIT:
            if split_until > t:
                continue
            shuffled = rng.sample(names, len(names))
            cut = rng.randint(1, len(names) - 1)
            side, other = tuple(sorted(shuffled[:cut])), tuple(sorted(shuffled[cut:]))
            out.append(Fault(t, kind, side, until, others=other))
            split_until = until + 1.0
        else:
            if quality_until > t:
                continue
            hit = tuple(sorted(rng.sample(names, rng.randint(1, len(names)))))
            if kind == "delay":
                value = round(rng.uniform(0.01, 0.2), 3)
            else:
                value = round(rng.uniform(0.05, 0.3), 3)
            out.append(Fault(t, kind, hit, until, value=value))
            quality_until = until + 1.0


def quiet_time(duration: float) -> float:
    """The default fault-free tail of a run: a fifth of it, between 8 and 20 seconds."""
    return min(20.0, max(8.0, duration / 5))


@dataclass(frozen=True)
class NetworkState:
    """What one member's DISCARD, DUPL and DELAY do: whose messages to drop, the loss and
    duplication probabilities of what arrives and its longest delay."""

    ignore: tuple[str, ...] = ()  # uuids (32 hex digits) of the incarnations not heard
    loss: float = 0.0
    dup: float = 0.0
    delay: float = 0.0


def network_state(
    member: str, active: Sequence[Fault], uuids: Mapping[str, Sequence[str]]
) -> NetworkState:
    """The network state of ``member`` while the faults ``active`` are in force.

    ``uuids`` maps each member name to the uuids of all its incarnations so far, so
    a partition also keeps out a restarted member's new incarnation.
    """
    deaf_to: set[str] = set()
    loss = dup = delay = 0.0
    for fault in active:
        if fault.kind == "partition":
            if member in fault.members:
                deaf_to.update(fault.others)
            elif member in fault.others:
                deaf_to.update(fault.members)
        elif fault.kind == "oneway" and member in fault.members:
            deaf_to.update(fault.others)
        elif fault.kind in _QUALITY and member in fault.members:
            if fault.kind == "loss":
                loss = fault.value
            elif fault.kind == "dup":
                dup = fault.value
            else:
                delay = fault.value
    ignore = tuple(sorted(u for name in deaf_to for u in uuids.get(name, ())))
    return NetworkState(ignore, loss, dup, delay)
