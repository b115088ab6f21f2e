"""Member processes driven by JSON lines, for the benchmarks that use the public API.

A benchmark script runs itself as a member (``script _member <spec>``); the
member prints one JSON object per line on stdout and reads one command per
line on stdin, and ends when its stdin closes. `Group` starts the members,
gathers their lines on one thread each (so a silent member cannot hang the
driver: every wait has a deadline and a failure shows the members' last
words), and always reaps them: stdin closed, then a kill after a grace; on
Linux a member is also killed when the driver dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import trio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = 120.0  # longest the driver waits for any one report before giving up on a run


# looked up here, not in the child: a forked child of a threaded driver must not dlopen
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGKILL when the driver dies, however it dies."""
    assert _prctl is not None
    _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


#: ``preexec_fn`` for every process a benchmark starts: it dies with the benchmark (Linux;
#: elsewhere, None: it ends when its stdin closes).
DIE_WITH_PARENT = _die_with_parent if sys.platform == "linux" else None


def emit(**fields: Any) -> None:
    """Member side: one report line to the driver."""
    print(json.dumps(fields), flush=True)


async def command(*, last: bool = False) -> dict[str, Any]:
    """Member side: the driver's next command. Its stdin closing ends the run: expected
    when ``last`` (``{}`` then); otherwise the driver is gone and the member exits."""
    line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    if not line.strip():
        if last:
            return {}
        sys.exit("the driver is gone: stdin closed")
    result: dict[str, Any] = json.loads(line)
    return result


class _Proc:
    def __init__(self, script: str, spec: dict[str, Any]) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(script), "_member", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=DIE_WITH_PARENT,
        )
        self.name = str(spec.get("name", "?"))
        self.reports: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.reports.put(json.loads(line))

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            del self.stderr[:-20]

    def tell(self, **fields: Any) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.write(json.dumps(fields) + "\n")
            self.proc.stdin.flush()


class Group:
    """One process per spec, running ``script`` as a member; a context manager that reaps."""

    def __init__(self, script: str, specs: list[dict[str, Any]]) -> None:
        self.procs = [_Proc(script, spec) for spec in specs]

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tell(self, **fields: Any) -> None:
        for proc in self.procs:
            proc.tell(**fields)

    def expect(self, key: str, timeout: float = WAIT) -> list[dict[str, Any]]:
        """Every member's next report that carries ``key`` (others are skipped)."""
        deadline = time.monotonic() + timeout
        found = []
        for proc in self.procs:
            while True:
                left = deadline - time.monotonic()
                try:
                    report = proc.reports.get(timeout=max(left, 0.0))
                except queue.Empty:
                    raise RuntimeError(f"no {key!r} within {timeout}s{self._diagnosis()}") from None
                if key in report:
                    found.append(report)
                    break
        return found

    def _diagnosis(self) -> str:
        lines = []
        for proc in self.procs:
            lines.append(f"\n  {proc.name} (exit {proc.proc.poll()}):")
            lines.extend(f"\n    {line.rstrip()}" for line in proc.stderr[-5:])
        return "".join(lines)

    def close(self, grace: float = 15.0) -> None:
        """Close every stdin (members leave and exit), then kill what is still running."""
        for proc in self.procs:
            if proc.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.proc.stdin.close()
        deadline = time.monotonic() + grace
        for proc in self.procs:
            try:
                proc.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.proc.kill()
                proc.proc.wait()
