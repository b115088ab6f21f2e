"""A wall-clock deadline for every Trio test, so that a test that hangs fails instead of
holding CI until its 90 minutes run out.

`deadline_run` is what pytest-trio calls instead of ``trio.run`` (tests/conftest.py
marks every Trio test with it). Past its deadline it lists the test's tasks on stderr,
where each waits, and cancels the test through Trio: the test's own cleanup runs
(member processes reaped, sockets closed) and it fails with `TestTimedOut`. Wall time,
not Trio's clock: a test on a `MockClock` may jump through hours of virtual time.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import trio

#: Seconds of wall time a Trio test may run. The slowest test takes about 65 s on two
#: cores with three other workers beside it.
TEST_TIMEOUT = 300.0

_TRIO = os.path.dirname(trio.__file__)


class TestTimedOut(Exception):
    """A test still ran when its wall-clock deadline passed."""

    __test__ = False  # not a test class, whatever its name says


def deadline_run(seconds: float) -> Callable[..., Any]:
    """A ``trio.run`` that cancels its function after ``seconds`` of wall time and then
    raises `TestTimedOut` (whatever the cancelled function raised becomes its cause)."""

    def run(
        async_fn: Callable[[], Awaitable[Any]],
        *,
        clock: trio.abc.Clock | None = None,
        instruments: Sequence[trio.abc.Instrument] = (),
    ) -> Any:
        expired = False

        async def main() -> Any:
            nonlocal expired
            token = trio.lowlevel.current_trio_token()
            done = False

            def expire() -> None:  # in Trio's thread, through the token
                nonlocal expired
                if done:
                    return
                expired = True
                print(
                    f"still running after {seconds:g} s of wall time; its tasks:", file=sys.stderr
                )
                for line in _task_lines(trio.lowlevel.current_root_task(), 0):
                    print(line, file=sys.stderr)
                scope.cancel()

            with trio.CancelScope() as scope:
                timer = threading.Timer(seconds, _call_soon, (token, expire))
                timer.daemon = True
                timer.start()
                try:
                    return await async_fn()
                finally:
                    done = True
                    timer.cancel()

        try:
            result = trio.run(main, clock=clock, instruments=instruments)
        except BaseException as exc:
            if expired:
                raise TestTimedOut(f"cancelled after {seconds:g} s of wall time") from exc
            raise
        if expired:
            raise TestTimedOut(f"cancelled after {seconds:g} s of wall time")
        return result

    return run


def _call_soon(token: trio.lowlevel.TrioToken, fn: Callable[[], None]) -> None:
    with contextlib.suppress(trio.RunFinishedError):  # the run ended as the timer fired
        token.run_sync_soon(fn)


def _task_lines(task: trio.lowlevel.Task, depth: int) -> Iterator[str]:
    """Each task under ``task``, indented by depth, with the innermost line outside Trio
    it awaits at."""
    frames = [f for f in task.iter_await_frames() if not f[0].f_code.co_filename.startswith(_TRIO)]
    where = ""
    if frames:
        frame, lineno = frames[-1]
        where = f" at {frame.f_code.co_filename}:{lineno} ({frame.f_code.co_name})"
    yield f"{'  ' * depth}{task.name}{where}"
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            yield from _task_lines(child, depth + 1)
