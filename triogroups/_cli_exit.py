"""How a ``triogroups`` command ends when it does not end by itself.

A user's mistake is one line on stderr, ``triogroups COMMAND: error: ...``, and exit status
2, as argparse does for what it refuses itself. A stop by Ctrl-C (SIGINT) or SIGTERM cancels
the run, so that what it started (member processes) is stopped and reaped by the code that
owns it, then one line on stderr and exit status 128 + the signal's number (130, 143), as a
shell reports a command ended by that signal. Neither ever shows a traceback. Standard output
keeps only what the command is for (tables, JSON), so that it can be piped.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import trio

__all__ = ["EXIT_STATUS", "USAGE", "Stopped", "fail", "run_stoppable", "stopped"]

USAGE = 2
"""Exit status for bad arguments (argparse's own)."""

EXIT_STATUS = """exit status:
  0    success
  1    the run failed: its check found a problem, nobody answered a probe, or a member
       refused a probe's --set or --reset
  2    bad arguments: one line on stderr names the argument and its value
  130  stopped by Ctrl-C (SIGINT), 143 stopped by SIGTERM: member processes are stopped
       and reaped first; one line on stderr"""

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)


@dataclass(frozen=True)
class Stopped:
    """A run ended by a signal before it finished."""

    signum: int

    @property
    def status(self) -> int:
        """The exit status a shell gives a command ended by this signal."""
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def _first(group: BaseExceptionGroup[BaseException], kind: type[E]) -> E | None:
    """The first ``kind`` exception anywhere in ``group``; None if there is none."""
    found: BaseException | None = group.subgroup(kind)
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return found if isinstance(found, kind) else None


def fail(command: str, text: str, status: int = USAGE) -> int:
    """Say ``text`` on stderr as ``command``'s error; returns ``status`` (default 2)."""
    print(f"triogroups {command}: error: {text}", file=sys.stderr, flush=True)
    return status


def stopped(command: str, stop: Stopped, what: str = "") -> int:
    """Say on stderr that ``command`` was stopped by a signal (and ``what`` that means);
    returns its exit status."""
    tail = f": {what}" if what else ""
    print(f"triogroups {command}: stopped by {stop.name}{tail}", file=sys.stderr, flush=True)
    return stop.status


def run_stoppable(
    fn: Callable[[], Awaitable[T]], *, clock: trio.abc.Clock | None = None
) -> T | Stopped:
    """``trio.run(fn)``, cancelled by the first SIGINT or SIGTERM.

    Returns what ``fn`` returned, or `Stopped` when a signal cancelled it: ``fn``'s own
    cleanup (closing a process group stops and reaps its members) has run by then. What
    ``fn`` raises is raised as it is. Must be called from the main thread (signal handlers).
    """

    async def main() -> T | Stopped:
        got: list[int] = []
        done: list[T] = []
        failed: list[Exception | SystemExit] = []
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                work = trio.CancelScope()

                async def watch() -> None:
                    async for signum in signals:
                        got.append(signum)
                        work.cancel()

                nursery.start_soon(watch)
                with work:
                    try:
                        done.append(await fn())
                    except (Exception, SystemExit) as exc:  # raised as is below, not in a group
                        failed.append(exc)  # (SystemExit: rich's answer to a broken pipe)
                    except BaseExceptionGroup as group:  # that SystemExit, from a task
                        leaf = _first(group, SystemExit)
                        if leaf is None:
                            raise
                        failed.append(leaf)
                nursery.cancel_scope.cancel()
        if failed:
            raise failed[0]
        return done[0] if done else Stopped(got[0])

    return trio.run(main, clock=clock)
