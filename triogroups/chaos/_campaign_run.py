"""One campaign seed carried out: a whole group on the simulated network, on virtual time.

A FoundationDB-style simulation campaign: each seed is one run of a whole group
in one process, on the simulated network (`triogroups.testing.open_cluster`) on
virtual time (a `trio.testing.MockClock` that jumps whenever every task waits),
so a run of a minute of group life costs about a second of CPU and the same
seed replays it byte for byte. `scenario` draws the run from the seed (members,
stack knobs, traffic mix, timed steps); `run_scenario` carries it out:

- members send regular, OOB and DONT_LOOPBACK multicasts and unicasts at a
  seeded rate (bursts fill MCAST windows and flow-control credits), each
  incarnation from its own seeded stream;
- steps join new members, leave gracefully (the coordinator too, and right
  after a burst), kill (`SimMember.kill`, then a new incarnation joins), restart
  (a graceful leave, then a new incarnation), pause (`SimMember.pause`: the
  member's clock stops, not only its network), split the network (symmetric and
  one-way partitions, up to two overlapping, re-applied to new incarnations),
  on tcp lose a connection for a moment (what one member sends another is
  dropped for up to 2 s, as a TCP transport drops what it queued; recorded as
  the one-way split it is) and set network-wide loss, duplication and delay
  (reordering) bursts;
- the quiet period heals and resumes everything, traffic goes on for a while,
  and `check_histories` judges every history file, with ``settle``,
  ``resume_within`` and ``max_window`` as the real chaos runner uses them (every
  member samples the messages its reliability layers hold every 2 s).

Only the quiet period's heal is recorded as a ``heal`` fault (a split's end is an
``end``): ``no_traffic_after_heal`` asks for traffic within ``resume_within`` of a
heal, and in a campaign the next split or pause may come a second after one split
ends (udp seed 1026: B, cut off again 0.7 s after a one-way split healed, then
paused, was reported as hearing nothing after that heal).

A graceful leave is recorded in the member's history (`HistoryWriter.leave`)
with what ``await member.disconnect()`` returned: the ``flushed_leave`` rule
holds a member to it once a disconnect promises its multicasts got through.

Decisions: traffic stops at a member (never by cancelling a send: a cancelled
send is recorded but not sent, which the checker would count as lost) before
it leaves; a leave's burst and its disconnect get bounded virtual time, and a
member that left is then stopped (its process exits). A member whose send
still waits after a kill is cancelled with it: its history ends there, so
nothing it sent then is owed. This module never spawns processes nor reads
the command line: the command (`_campaign`) and a seed's replay and shrink
(`_campaign_seed`) sit above it.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from triogroups.chaos._campaign_blocks import BlocksMember
from triogroups.chaos._member import windows
from triogroups.chaos._scenario import BLOCKS_SUFFIX, PRESETS, Scenario, Step
from triogroups.config import StackConfig
from triogroups.message import Flag
from triogroups.testing._cluster import SimCluster, SimMember, open_cluster
from triogroups.testing._history import HistoryViolation, check_histories, read_histories

__all__ = [
    "MAX_WINDOW",
    "RESUME_WITHIN",
    "SETTLE",
    "CampaignResult",
    "campaign_config",
    "run_scenario",
]

SETTLE = 10.0  # the checker's settle, as the real chaos runner's default
RESUME_WITHIN = 12.0  # traffic must resume this soon after a heal (quiet is 15 s)
MAX_WINDOW = 20_000  # messages a layer may hold, the real chaos runner's default
_SAMPLE_EVERY = 2.0  # seconds between two samples of a member's windows
_BASE_DELAY = (0.001, 0.002)
_LEAVE_TIMEOUT = 10.0  # virtual seconds a leave's burst and its disconnect may take


def campaign_config(preset: str, knobs: dict[str, dict[str, int]] | None = None) -> StackConfig:
    """``preset``'s stack (``unicast2``: udp with UNICAST2 for UNICAST3; ``X-blocks``: X's)
    with the real chaos runner's fast failure detection and merging, and the scenario's
    ``knobs``."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    stack = preset.removesuffix(BLOCKS_SUFFIX)
    config = StackConfig.preset("udp" if stack == "unicast2" else stack)
    if preset == "unicast2":
        config = config.replace("UNICAST3", "UNICAST2")
    config = config.configure("FD_ALL3", interval=0.5, timeout=3.0)
    config = config.configure("VERIFY_SUSPECT", timeout=1.0)
    config = config.configure("MERGE3", min_interval=0.5, max_interval=2.0)
    config = config.configure(
        "GMS", join_timeout=1.0, view_ack_collection_timeout=1.0, leave_timeout=1.0
    )
    for name, properties in (knobs or {}).items():
        config = config.configure(name, **properties)
    return config


@dataclass
class CampaignResult:
    """One run: its scenario, what it did and what the checker found."""

    scenario: Scenario
    violations: list[HistoryViolation]
    sent: int = 0
    delivered: int = 0
    incarnations: int = 0
    views: int = 0
    locks: int = 0  # grants recorded (``-blocks`` presets)
    increments: int = 0  # counter results recorded (``-blocks`` presets)
    steps_done: Counter[str] = field(default_factory=Counter)
    skipped: list[str] = field(default_factory=list)


@dataclass
class _Life:
    """One incarnation of a member name: its traffic, and whether it is going away."""

    member: SimMember
    number: int
    blocks: BlocksMember | None = None  # its lock and counter services (``-blocks``)
    stopping: bool = False
    done: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)


@dataclass
class _Slot:
    """One member name: its current incarnation and the addresses of all of them."""

    name: str
    life: _Life | None = None
    count: int = 0
    addresses: list[Any] = field(default_factory=list)


class _Run:
    def __init__(self, cluster: SimCluster, sc: Scenario, nursery: trio.Nursery, say: Any) -> None:
        self.cluster = cluster
        self.sc = sc
        self.nursery = nursery
        self.say = say
        self.slots: dict[str, _Slot] = {}
        self.splits: list[Step] = []
        self.quality: dict[str, float] = {}
        self.done: Counter[str] = Counter()
        self.skipped: list[str] = []
        # one lock mode for the whole group, as every member of a group must use
        self.majority = random.Random(f"{sc.preset}/{sc.seed}/majority").random() < 0.5

    # --- members -----------------------------------------------------------------

    async def start(self, name: str) -> SimMember:
        """Start a new incarnation of ``name``, connect it and let it send."""
        slot = self.slots.setdefault(name, _Slot(name))
        member = await self.cluster.add_member(name)
        slot.count += 1
        life = slot.life = _Life(member, slot.count)
        slot.addresses.append(member.address)
        self.apply_network()
        await member.connect()
        rng = random.Random(f"{self.sc.preset}/{self.sc.seed}/{name}/{life.number}")
        self.nursery.start_soon(self.traffic, name, life, rng)
        if self.sc.preset.endswith(BLOCKS_SUFFIX):
            life.blocks = self.blocks_member(slot, life)
            self.nursery.start_soon(life.blocks.run)
        return member

    def blocks_member(self, slot: _Slot, life: _Life) -> BlocksMember:
        """``life``'s lock and counter services (`BlocksMember`), its address split with it."""

        def placed(address: Any) -> None:
            slot.addresses.append(address)
            self.apply_network()

        return BlocksMember(
            self.cluster,
            campaign_config(self.sc.preset, self.sc.knobs),
            slot.name,
            random.Random(f"{self.sc.preset}/{self.sc.seed}/{slot.name}/{life.number}/blocks"),
            majority=self.majority,
            until=self.sc.traffic_until,
            on_address=placed,
        )

    async def sample(self) -> None:
        """Every `_SAMPLE_EVERY` seconds, what each running member's reliability layers hold
        (as a chaos member samples itself; no RSS: every member shares one process). A
        paused member records nothing, as a stopped process would not."""
        while True:
            await trio.sleep(_SAMPLE_EVERY)
            for slot in self.slots.values():
                life = slot.life
                if life is None or life.stopping or life.member.paused:
                    continue
                history = life.member.history
                if history is not None:
                    history.sample(0, windows(life.member.stack.stats()))

    async def traffic(self, name: str, life: _Life, rng: random.Random) -> None:
        sc, member = self.sc, life.member
        prefix = f"{name}{life.number}-"
        seq = 0
        with life.scope:
            while not life.stopping and trio.current_time() < sc.traffic_until:
                await trio.sleep(rng.expovariate(sc.rate))
                view = member.view
                if life.stopping or view is None or member.address not in view:
                    continue
                r = rng.random()
                if r < 0.04:
                    count = rng.randint(2, sc.burst)
                    ids = [f"{prefix}{seq + i}".encode() for i in range(count)]
                    seq += count
                    await member.send_many(ids)
                    continue
                payload = f"{prefix}{seq}".encode()
                seq += 1
                mix = sc.mix
                if r < mix["regular"]:
                    await member.send(payload)
                elif r < mix["regular"] + mix["oob"]:
                    await member.send(payload, flags=Flag.OOB)
                elif r < mix["regular"] + mix["oob"] + mix["noloop"]:
                    await member.send(payload, flags=Flag.DONT_LOOPBACK)
                else:
                    others = [m for m in view.members if m != member.address]
                    if others:
                        await member.send(payload, to=rng.choice(others))
        life.done.set()

    def apply_network(self) -> None:
        """Block what the splits in force block, for every incarnation of their members."""
        net = self.cluster.network
        net.heal()
        for split in self.splits:
            side = [a for n in split.members for a in self.slots.get(n, _Slot(n)).addresses]
            other = [a for n in split.others for a in self.slots.get(n, _Slot(n)).addresses]
            if split.kind == "partition":
                net.partition(side, other)
            else:
                for deaf in side:
                    for src in other:
                        net.block(src, deaf)

    def apply_quality(self) -> None:
        self.cluster.network.set_faults(
            loss=self.quality.get("loss", 0.0),
            duplicate=self.quality.get("dup", 0.0),
            min_delay=_BASE_DELAY[0],
            max_delay=max(_BASE_DELAY[1], self.quality.get("delay", 0.0)),
        )

    def live(self, name: str) -> _Life | None:
        slot = self.slots.get(name)
        return None if slot is None or slot.life is None or slot.life.stopping else slot.life

    async def leave(self, step: Step, life: _Life) -> None:
        name, member = step.members[0], life.member
        life.stopping = True  # the traffic stops between two sends, never inside one
        if life.blocks is not None:
            life.blocks.leave()
        with trio.move_on_after(_LEAVE_TIMEOUT / 2):
            await life.done.wait()
        life.scope.cancel()
        flushed: bool | None = None
        with trio.move_on_after(_LEAVE_TIMEOUT):
            if step.value:
                count = random.Random(f"{self.sc.seed}/{step.at}").randint(2, self.sc.burst)
                ids = [f"{name}{life.number}-last{i}".encode() for i in range(count)]
                await member.send_many(ids)
            # disconnect returns whether the leave flushed: if it did, the
            # flushed_leave rule holds the member to it
            flushed = await _disconnect(member)
        if member.history is not None:
            member.history.leave(flushed)
        self.cluster.record_fault("leave", f"{name} flushed={bool(flushed)}")
        with trio.move_on_after(_LEAVE_TIMEOUT):
            while not member.left:
                await trio.sleep(0.1)
        member.kill()
        self.say(f"{trio.current_time():7.2f}  {name} left (flushed={flushed})")

    # --- steps ---------------------------------------------------------------------

    async def begin(self, step: Step) -> None:
        kind, name = step.kind, step.members[0] if step.members else ""
        self.done[kind] += 1
        if kind == "join":
            self.cluster.record_fault("join", name)
            await self.start(name)
        elif kind in ("leave", "restart"):
            life = self.live(name)
            if life is None:
                self.skip(step)
                return
            self.cluster.record_fault(kind, name)
            self.nursery.start_soon(self.leave, step, life)
        elif kind == "kill":
            life = self.live(name)
            if life is None:
                self.skip(step)
                return
            life.stopping = True
            life.scope.cancel()
            life.member.kill()
            if life.blocks is not None:
                life.blocks.kill()
            self.cluster.record_fault("kill", name)
        elif kind == "pause":
            life = self.live(name)
            if life is None:
                self.skip(step)
                return
            life.member.pause()
            if life.blocks is not None:
                life.blocks.pause()
        elif kind in ("partition", "oneway", "connloss"):
            self.splits.append(step)  # a lost connection blocks one way, as a oneway split
            self.apply_network()
            self.cluster.record_fault("oneway" if kind == "connloss" else kind, step.describe())
        else:
            self.quality[kind] = step.value
            self.apply_quality()
            self.cluster.record_fault(kind, step.describe())

    async def end(self, step: Step) -> None:
        kind, name = step.kind, step.members[0] if step.members else ""
        if kind in ("kill", "restart"):
            await self.start(name)
            self.cluster.record_fault("start", name)
        elif kind == "pause":
            slot = self.slots.get(name)
            if slot is not None and slot.life is not None:
                slot.life.member.resume()
                if slot.life.blocks is not None:
                    slot.life.blocks.resume()
        elif kind in ("partition", "oneway", "connloss"):
            self.splits.remove(step)
            self.apply_network()
            self.cluster.record_fault("end", step.describe())
        elif kind in ("loss", "dup", "delay"):
            self.quality.pop(kind, None)
            self.apply_quality()
            self.cluster.record_fault("end", step.describe())

    def skip(self, step: Step) -> None:
        self.skipped.append(f"{step.at:.2f} {step.describe()}")
        self.say(f"{trio.current_time():7.2f}  skipped: {step.describe()}")

    def quiet(self) -> None:
        """The quiet period: heal every split, end every burst, resume every member."""
        self.splits.clear()
        self.quality.clear()
        self.apply_network()
        self.apply_quality()
        for slot in self.slots.values():
            if slot.life is not None and slot.life.member.paused:
                slot.life.member.resume()
            if slot.life is not None and slot.life.blocks is not None:
                slot.life.blocks.resume()
        self.cluster.record_fault("heal", "quiet period")


async def _disconnect(member: SimMember) -> bool:
    return await member.disconnect()


def _actions(sc: Scenario) -> Iterator[tuple[float, int, Step]]:
    """(time, 0 = end / 1 = start, step), ends first when they coincide."""
    out = [(s.at, 1, s) for s in sc.steps]
    out += [(s.until, 0, s) for s in sc.steps if s.until is not None and s.kind != "leave"]
    return iter(sorted(out, key=lambda a: (a[0], a[1])))


class _Crashes(logging.Handler):
    """Every layer crash a stack reports (`Stack._crashed` logs each one): a run in which a
    layer crashed fails with a **crash** violation, however its histories read (a stale
    compiled module crashed every member's transport at its first send, and histories
    with nothing in them broke no rule)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "crashed" in str(record.msg):
            self.found.append(record.getMessage())


@contextmanager
def _crashes_seen() -> Iterator[_Crashes]:
    logger = logging.getLogger("triogroups.stack")
    handler = _Crashes()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


async def run_scenario(sc: Scenario, root: Path, say: Any = None) -> CampaignResult:
    """Carry out ``sc`` with histories in ``root`` and check them (on virtual time: run
    it under a `trio.testing.MockClock` with ``autojump_threshold=0``)."""
    with _crashes_seen() as crashes:
        result = await _run_scenario(sc, root, say)
    result.violations += [HistoryViolation("crash", text, ()) for text in crashes.found]
    return result


async def _run_scenario(sc: Scenario, root: Path, say: Any) -> CampaignResult:
    say = say or (lambda text: None)
    config = campaign_config(sc.preset, sc.knobs)
    async with (
        open_cluster(
            0,
            config,
            seed=sc.seed,
            cluster="campaign",
            view=False,
            history=root,
            name="campaign",
            min_delay=_BASE_DELAY[0],
            max_delay=_BASE_DELAY[1],
        ) as cluster,
        trio.open_nursery() as nursery,
    ):
        run = _Run(cluster, sc, nursery, say)
        t0 = trio.current_time()
        nursery.start_soon(run.sample)
        for name in sc.members:
            await run.start(name)
            await trio.sleep(0.3)
        for at, edge, step in _actions(sc):
            await trio.sleep_until(t0 + at)
            say(f"{trio.current_time() - t0:7.2f}  {'' if edge else 'end: '}{step.describe()}")
            if edge:
                await run.begin(step)
            else:
                await run.end(step)
        await trio.sleep_until(t0 + sc.quiet_at)
        say(f"{trio.current_time() - t0:7.2f}  quiet period")
        run.quiet()
        await trio.sleep_until(t0 + sc.duration)
        nursery.cancel_scope.cancel()
    histories = read_histories(root)
    violations = check_histories(
        histories, settle=SETTLE, resume_within=RESUME_WITHIN, max_window=MAX_WINDOW
    )
    result = CampaignResult(sc, violations, steps_done=run.done, skipped=run.skipped)
    views = set()
    for h in histories:
        if h.member is None:
            continue
        if not h.traffic:  # a member's lock and counter services
            result.locks += sum(1 for _ in h.of("lock"))
            result.increments += sum(1 for _ in h.of("count"))
            continue
        result.incarnations += 1
        for line in h.lines:
            k = line.record["k"]
            if k == "send":
                result.sent += 1
            elif k == "deliver":
                result.delivered += 1
            elif k == "view":
                views.add(tuple(line.record["id"]))
    result.views = len(views)
    return result
