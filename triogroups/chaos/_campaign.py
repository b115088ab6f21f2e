"""``triogroups campaign``: many seeded simulated runs, each judged by the history checker.

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
nothing it sent then is owed. Runs are spread over worker processes
(`multiprocessing` with ``spawn``; a worker ignores SIGINT, so Ctrl-C reaches
only the parent, which terminates and reaps the pool).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import random
import shutil
import signal
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
import trio.testing

from triogroups._cli_exit import Stopped, fail, stopped
from triogroups.chaos._member import windows
from triogroups.chaos._scenario import PRESETS, Scenario, Step, scenario
from triogroups.config import StackConfig
from triogroups.message import Flag
from triogroups.testing._cluster import SimCluster, SimMember, open_cluster
from triogroups.testing._history import HistoryViolation, check_histories, read_histories

__all__ = [
    "CampaignResult",
    "add_campaign_parser",
    "campaign_config",
    "run_campaign",
    "run_scenario",
    "run_seed",
    "shrink",
]

SETTLE = 10.0  # the checker's settle, as the real chaos runner's default
RESUME_WITHIN = 12.0  # traffic must resume this soon after a heal (quiet is 15 s)
MAX_WINDOW = 20_000  # messages a layer may hold, the real chaos runner's default
_SAMPLE_EVERY = 2.0  # seconds between two samples of a member's windows
_BASE_DELAY = (0.001, 0.002)
_LEAVE_TIMEOUT = 10.0  # virtual seconds a leave's burst and its disconnect may take
_SHOWN = 5  # violations printed with their excerpts


def campaign_config(preset: str, knobs: dict[str, dict[str, int]] | None = None) -> StackConfig:
    """``preset``'s stack (``unicast2``: udp with UNICAST2 for UNICAST3) with the real chaos
    runner's fast failure detection and merging, and the scenario's ``knobs``."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    config = StackConfig.preset("udp" if preset == "unicast2" else preset)
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
    steps_done: Counter[str] = field(default_factory=Counter)
    skipped: list[str] = field(default_factory=list)


@dataclass
class _Life:
    """One incarnation of a member name: its traffic, and whether it is going away."""

    member: SimMember
    number: int
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
        return member

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
            self.cluster.record_fault("kill", name)
        elif kind == "pause":
            life = self.live(name)
            if life is None:
                self.skip(step)
                return
            life.member.pause()
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
        self.cluster.record_fault("heal", "quiet period")


async def _disconnect(member: SimMember) -> bool:
    return await member.disconnect()


def _actions(sc: Scenario) -> Iterator[tuple[float, int, Step]]:
    """(time, 0 = end / 1 = start, step), ends first when they coincide."""
    out = [(s.at, 1, s) for s in sc.steps]
    out += [(s.until, 0, s) for s in sc.steps if s.until is not None and s.kind != "leave"]
    return iter(sorted(out, key=lambda a: (a[0], a[1])))


async def run_scenario(sc: Scenario, root: Path, say: Any = None) -> CampaignResult:
    """Carry out ``sc`` with histories in ``root`` and check them (on virtual time: run
    it under a `trio.testing.MockClock` with ``autojump_threshold=0``)."""
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


# --- the command -------------------------------------------------------------------------


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
        f"{result.delivered}, views {result.views}; steps {steps}"
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


@dataclass(frozen=True)
class _Outcome:
    seed: int
    failed: bool
    text: str
    cpu: float


def _work(job: tuple[str, int]) -> _Outcome:
    preset, seed = job
    start = time.process_time()
    try:
        result = run_seed(preset, seed)
    except Exception as exc:  # a crash of the run itself is a failure of that seed too
        text = "\n".join(
            [
                *scenario(preset, seed).describe(),
                f"the run crashed: {type(exc).__name__}: {exc}",
                f"replay: {replay_command(preset, seed)}",
            ]
        )
        return _Outcome(seed, True, text, time.process_time() - start)
    return _Outcome(seed, bool(result.violations), report(result), time.process_time() - start)


_STOPS = {signal.SIGINT, signal.SIGTERM}


def _quiet_worker() -> None:
    """A worker: Ctrl-C is the parent's to handle, and member logs would drown the report.
    It was started with the stop signals blocked (`_outcomes`): the pool's SIGTERM ends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
    logging.disable(logging.CRITICAL)


def add_campaign_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``campaign`` subcommand and its options."""
    campaign = sub.add_parser(
        "campaign",
        help="many seeded simulated runs under faults, each checked",
        description="Each seed is one simulated run of a whole group on virtual time: "
        "joins, graceful leaves, kills and restarts, pauses, partitions, lost TCP "
        "connections, loss, duplication and delay while members send multicasts and "
        "unicasts; every run ends with a quiet period and is judged by the history "
        "checker. --seed replays one run verbosely.",
    )
    campaign.add_argument("--preset", choices=PRESETS, required=True, help="the stack")
    campaign.add_argument("--seeds", type=int, default=None, help="how many seeds to run")
    campaign.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    campaign.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    campaign.add_argument("--seed", type=int, default=None, help="replay one seed verbosely")
    campaign.add_argument("--keep", metavar="DIR", help="with --seed: keep the histories in DIR")
    campaign.add_argument(
        "--steps",
        metavar="I,J,...",
        help="with --seed: keep only these steps of the schedule (numbers as printed; none)",
    )
    campaign.add_argument(
        "--shrink",
        action="store_true",
        help="with --seed: drop steps while the run still fails, print the smallest",
    )


def _check_args(args: argparse.Namespace) -> str | None:
    if args.seed is None and args.seeds is None:
        return "campaign needs --seeds N or --seed S"
    if args.seed is not None and args.seeds is not None:
        return "--seed replays one seed: leave out --seeds"
    if args.seeds is not None and args.seeds < 1:
        return f"--seeds must be >= 1, got {args.seeds}"
    if args.jobs < 1:
        return f"--jobs must be >= 1, got {args.jobs}"
    if args.first_seed < 0:
        return f"--first-seed must be >= 0, got {args.first_seed}"
    if args.keep is not None and args.seed is None:
        return "--keep needs --seed"
    if (args.steps is not None or args.shrink) and args.seed is None:
        return "--steps and --shrink need --seed"
    if args.steps is not None:
        try:
            args.steps = _steps_arg(args.steps)
            scenario(args.preset, args.seed).only(args.steps)
        except (ValueError, IndexError) as exc:
            return f"--steps: {exc}"
    return None


def _steps_arg(text: str) -> list[int]:
    if text.strip() == "none":
        return []
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"want step numbers separated by commas, got {text!r}") from None


def run_campaign(args: argparse.Namespace, console: Any) -> int:
    """The ``campaign`` command: exit status 1 if any seed failed, 2 on bad arguments (one
    line on stderr), 130 or 143 when Ctrl-C or SIGTERM stopped it."""
    problem = _check_args(args)
    if problem is not None:
        return fail("campaign", problem)
    if args.seed is not None:
        return _replay(args, console)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    logging.disable(logging.CRITICAL)  # the members' logs: a failure prints its report
    failed: list[int] = []
    cpu = 0.0
    started = time.monotonic()
    try:
        for outcome in _outcomes(args.preset, seeds, args.jobs):
            cpu += outcome.cpu
            if outcome.failed:
                failed.append(outcome.seed)
                console.print(f"[red]seed {outcome.seed} failed[/red]", highlight=False)
                console.print(outcome.text, highlight=False, markup=False)
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:
        interrupt = _interruption(exc)
        if interrupt is None:
            raise
        return _stopped(interrupt)
    wall = time.monotonic() - started
    failed.sort()
    console.print(
        f"{len(seeds)} seeds, {len(failed)} failed"
        + (f": seeds {' '.join(map(str, failed))}" if failed else "")
        + f" ({args.preset}; {cpu:.0f} s CPU, {wall:.0f} s wall)",
        highlight=False,
    )
    return 1 if failed else 0


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt: the same way out."""


def _interrupt(signum: int, frame: Any) -> None:
    raise _Terminated


def _interruption(exc: BaseException) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (Ctrl-C, or SIGTERM as `_Terminated`) that ended a run, also when
    trio raised it inside an exception group (``--seed``, run in this process); None if none."""
    while isinstance(exc, BaseExceptionGroup):
        found, _rest = exc.split(KeyboardInterrupt)
        if found is None:
            return None
        exc = found.exceptions[0]
    return exc if isinstance(exc, KeyboardInterrupt) else None


def _stopped(exc: KeyboardInterrupt) -> int:
    """One line on stderr; 143 for SIGTERM, 130 for Ctrl-C. The interrupt may have landed
    between making a coroutine and awaiting it: its "never awaited" warning, printed as the
    process exits, would only be noise after that line."""
    warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
    signum = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
    return stopped("campaign", Stopped(signum))


def _outcomes(preset: str, seeds: list[int], jobs: int) -> Iterator[_Outcome]:
    """Each seed's outcome; SIGTERM stops the campaign as Ctrl-C does (SIGINT is restored
    too, which a shell ignores for a command run in the background), and either way the
    worker processes are terminated and reaped. Seeds run in worker processes even with one
    job: the interrupt then lands in this process's wait for them, never inside a seed's
    run, where the members' supervision took it for a crash of that seed and went on."""
    pool = None
    try:
        # A signal that interrupted the pool's start half-way through writing a worker's
        # start-up data made that worker die with a traceback ("Ran out of input"): the
        # signals wait until the pool is up (the workers unblock them, `_quiet_worker`), and
        # SIGTERM is ours only from then on: with the handler set before the pool, blocking
        # alone still let that traceback through, 1 test run in 8 on a loaded machine
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            pool = multiprocessing.get_context("spawn").Pool(jobs, initializer=_quiet_worker)
            signal.signal(signal.SIGTERM, _interrupt)
            signal.signal(signal.SIGINT, signal.default_int_handler)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        yield from pool.imap_unordered(_work, [(preset, s) for s in seeds], chunksize=1)
        pool.close()
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()


def _replay(args: argparse.Namespace, console: Any) -> int:
    keep = Path(args.keep) if args.keep else None

    def say(text: str) -> None:
        console.print(text, highlight=False, markup=False)

    try:
        if args.shrink:
            logging.disable(logging.CRITICAL)
            found = shrink(args.preset, args.seed, args.steps, say)
            args.steps = found.scenario.kept
            say(f"smallest failing schedule found: {len(args.steps or [])} steps")
        result = run_seed(args.preset, args.seed, keep, say, steps=args.steps)
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:
        interrupt = _interruption(exc)
        if interrupt is None:
            raise
        return _stopped(interrupt)
    console.print(report(result), highlight=False, markup=False)
    if keep is not None:
        console.print(f"histories kept in {keep}", highlight=False)
    return 1 if result.violations else 0
