"""``triogroups campaign``: many seeded simulated runs, each judged by the history checker.

The command's part: its arguments, the worker processes the seeds run in, and
Ctrl-C and SIGTERM. What one seed does is `_campaign_run` (the simulated run and
its checks) and `_campaign_seed` (run, shrink and report one seed). Runs are spread
over worker processes (`multiprocessing` with ``spawn``; a worker ignores SIGINT,
so Ctrl-C reaches only the parent, which terminates and reaps the pool).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import signal
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triogroups._cli_exit import Stopped, fail, stopped
from triogroups.chaos._campaign_seed import replay_command, report, run_seed, shrink
from triogroups.chaos._scenario import PRESETS, scenario

__all__ = ["add_campaign_parser", "run_campaign"]


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
