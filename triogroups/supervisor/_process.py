"""One incarnation of one member: a process started, read and waited for by the supervisor.

It spawns ``python -m triogroups.supervisor._member`` in a session of its own (so Ctrl-C in a
terminal reaches the supervisor only, which then stops the members in order), with four pipes:
stdin, on which the supervisor sends the payload (what to run) and then nothing more, so its
EOF tells the member the supervisor is gone,
stdout and stderr merged into one stream of output lines, the status pipe on which the
member reports ``joined`` and ``view``, and the command pipe (`_commands`) that carries
`ProcessGroup.send` to it. It keeps the last lines of output for the crash report.
It never decides about restarts.

The process is forked from the trio thread itself, not through `trio.lowlevel.open_process`,
which forks in a worker thread: Linux sends the parent-death signal when the *thread* that
forked a child ends, and trio's idle worker threads end after a while, which would stop members
for no reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import trio

__all__ = ["Incarnation", "member_argv", "member_env"]

_AFTER_EXIT = 2.0  # how long output still in the pipes is read after the process ended


def member_argv(
    name: str,
    cluster: str,
    status_fd: int,
    command_fd: int,
    log_format: str,
    launcher: Sequence[str] = (),
    log_level: str = "WARNING",
) -> list[str]:
    """The member program's command line, behind ``launcher`` (a command that execs the rest,
    such as ``ip netns exec NS``)."""
    return [
        *launcher,
        sys.executable,
        "-m",
        "triogroups.supervisor._member",
        "--name",
        name,
        "--cluster",
        cluster,
        "--status-fd",
        str(status_fd),
        "--command-fd",
        str(command_fd),
        "--parent",
        str(os.getpid()),
        "--log-format",
        log_format,
        "--log-level",
        log_level,
    ]


def member_env(name: str) -> dict[str, str]:
    """The supervisor's environment, with its ``sys.path`` so the member imports the same
    modules (a test module, the script's directory) and unbuffered output."""
    env = dict(os.environ)
    paths = [p or os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PYTHONUNBUFFERED"] = "1"
    env["TRIOGROUPS_MEMBER"] = name
    return env


async def _read_lines(stream: trio.abc.ReceiveStream, line: Callable[[str], None]) -> None:
    buffer = b""
    async with stream:
        try:
            while chunk := await stream.receive_some(65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    line(raw.decode(errors="replace").rstrip("\r"))
        except trio.BrokenResourceError:
            pass
    if buffer:
        line(buffer.decode(errors="replace").rstrip("\r"))


class Incarnation:
    """One process of member ``name``; ``number`` counts its incarnations from 1."""

    def __init__(self, name: str, number: int, tail_lines: int) -> None:
        self.name = name
        self.number = number
        self.process: subprocess.Popen[bytes] | None = None
        self.output: deque[str] = deque(maxlen=tail_lines)
        self.settled = trio.Event()  # joined or ended
        self.ended = trio.Event()
        self.stopping = False  # the supervisor asked it to stop: its exit is expected
        self.traceback: str | None = None  # the application's, when it raised
        self.startup_error: str | None = None  # why it could not start, when a restart cannot help
        self.scope = trio.CancelScope(shield=True)  # cancelled: the process is killed
        self._commands: trio.lowlevel.FdStream | None = None  # open while the process runs
        self._command_lock = trio.StrictFIFOLock()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode

    def send_signal(self, signum: int) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signum)

    async def send_command(self, line: bytes) -> None:
        """Write one encoded command to the process's command pipe, in order with the others;
        RuntimeError once the process has ended (or ends while the pipe is full)."""
        async with self._command_lock:
            stream = self._commands
            if stream is None or self.ended.is_set():
                raise RuntimeError(f"member {self.name!r} incarnation {self.number} has ended")
            try:
                await stream.send_all(line)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise RuntimeError(
                    f"member {self.name!r} incarnation {self.number} ended before the command"
                ) from None

    async def run(
        self,
        argv: Callable[[int, int], Sequence[str]],
        payload: bytes,
        env: dict[str, str],
        on_output: Callable[[str], None],
        on_status: Callable[[dict[str, Any]], None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Start the process (``argv`` gets the status and command fds), send it ``payload``
        on its stdin (length first), report started, read it until it ends. Cancelled, it
        kills the process: a graceful stop is the supervisor's to ask."""
        status_read, status_write = os.pipe()
        command_read, command_write = os.pipe()
        try:
            self.process = process = subprocess.Popen(
                list(argv(status_write, command_read)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(status_write, command_read),
                env=env,
                start_new_session=True,
            )
        except BaseException:
            os.close(status_read)
            os.close(command_write)
            raise
        finally:
            os.close(status_write)
            os.close(command_read)
        self._commands = commands = trio.lowlevel.FdStream(command_write)
        assert process.stdout is not None and process.stdin is not None
        stdout = trio.lowlevel.FdStream(os.dup(process.stdout.fileno()))
        process.stdout.close()
        stdin = trio.lowlevel.FdStream(os.dup(process.stdin.fileno()))
        process.stdin.close()
        try:
            task_status.started()

            def output(line: str) -> None:
                self.output.append(line)
                on_output(line)

            def status(line: str) -> None:
                if line.strip():
                    on_status(json.loads(line))

            async with trio.open_nursery() as readers:
                readers.start_soon(_send_payload, stdin, payload)
                readers.start_soon(_read_lines, stdout, output)
                readers.start_soon(_read_lines, trio.lowlevel.FdStream(status_read), status)
                await _wait(process)
                readers.cancel_scope.deadline = trio.current_time() + _AFTER_EXIT
        finally:
            if process.returncode is None:
                process.kill()
                process.wait()
            with trio.CancelScope(shield=True):
                await stdin.aclose()  # EOF: the member would leave if it still ran
                self._commands = None
                await commands.aclose()
            self.settled.set()
            self.ended.set()


async def _send_payload(stdin: trio.lowlevel.FdStream, payload: bytes) -> None:
    """The payload, 8 bytes of length first; stdin then stays open (and silent)."""
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stdin.send_all(len(payload).to_bytes(8, "big") + payload)


async def _wait(process: subprocess.Popen[bytes]) -> int:
    """Wait for the process to end without a thread: a pidfd on Linux, polling elsewhere."""
    if hasattr(os, "pidfd_open"):
        pidfd = os.pidfd_open(process.pid)
        try:
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
    else:
        while process.poll() is None:
            await trio.sleep(0.05)
    return process.wait()
