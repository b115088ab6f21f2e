"""The example scripts as real processes on loopback UDP multicast."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from triogroups.testing import free_ports

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[2]


def stack_file(tmp_path: Path, *, total: bool = False) -> Path:
    """UDP on a free-looking multicast port, with membership and reliability (and
    SEQUENCER's total order with ``total``)."""
    path = tmp_path / "stack.toml"
    port = free_ports()
    layers = [
        f'name = "UDP"\nbind_addr = "127.0.0.1"\nmcast_port = {port}\nip_ttl = 0',
        'name = "PING"',
        'name = "NAKACK2"',
        'name = "UNICAST3"',
        *(['name = "SEQUENCER"'] if total else []),
        'name = "STABLE"',
        'name = "GMS"\njoin_timeout = "500ms"',
        'name = "FRAG"',
    ]
    path.write_text("".join(f"[[protocol]]\n{layer}\n\n" for layer in layers))
    return path


class Script:
    """A running example: its output lines so far, and its stdin."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self.stderr = b""
        self.stderr_closed = trio.Event()
        self._changed = trio.Event()

    async def read(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            self.lines += [line.decode() for line in complete]
            self._changed.set()
            self._changed = trio.Event()

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for chunk in self.process.stderr:
            self.stderr += chunk
        self.stderr_closed.set()

    async def wait_for(self, check: Callable[[str], bool]) -> str:
        with trio.fail_after(20):
            while True:
                for line in self.lines:
                    if check(line):
                        return line
                await self._changed.wait()

    async def type(self, text: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(text.encode())

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def exit_code(self) -> int:
        with trio.fail_after(20):
            return await self.process.wait()


@asynccontextmanager
async def scripts(
    tmp_path: Path, *, total: bool = False
) -> AsyncIterator[Callable[..., trio.Process]]:
    stack = stack_file(tmp_path, total=total)
    cluster = f"ex-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started: list[Script] = []
    async with trio.open_nursery() as nursery:

        async def start(name: str, *args: str) -> Script:
            argv = [sys.executable, str(ROOT / "examples" / f"{name}.py"), *args]
            argv += ["--stack", str(stack), "--cluster", cluster]
            process = await trio.lowlevel.open_process(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
            )
            script = Script(process)
            started.append(script)
            nursery.start_soon(script.read)
            nursery.start_soon(script.read_stderr)
            return script

        try:
            yield start
        finally:
            for script in started:
                if script.process.returncode is None:
                    script.process.kill()
            nursery.cancel_scope.cancel()


async def test_chat_processes_talk_and_see_each_other_leave(tmp_path: Path) -> None:
    async with scripts(tmp_path) as start:
        a = await start("chat", "--name", "A")
        await a.wait_for(lambda line: line == "* view: A")
        b = await start("chat", "--name", "B")
        await b.wait_for(lambda line: line == "* view: A, B")
        await b.type("hello over udp\n")
        await a.wait_for(lambda line: line == "[B] hello over udp")
        await b.close_stdin()
        assert await b.exit_code() == 0
        await a.wait_for(lambda line: a.lines[-1] == "* view: A")
        await a.close_stdin()
        assert await a.exit_code() == 0


@pytest.mark.parametrize(
    ("signum", "victim"),
    [(signal.SIGTERM, "C"), (signal.SIGINT, "C"), (signal.SIGTERM, "A")],
    ids=["sigterm-participant", "sigint-participant", "sigterm-coordinator"],
)
async def test_chat_process_sent_a_signal_leaves_gracefully(
    tmp_path: Path, signum: signal.Signals, victim: str
) -> None:
    """Issue 12 item 7: SIGTERM or Ctrl-C (SIGINT) to a chat process in a group of three makes
    it leave: the two others print the smaller view, and the process exits with status
    128 + signal and no traceback. The stack has no failure detection at all, so only a
    graceful leave can shrink the view."""
    async with scripts(tmp_path) as start:
        chats = {}
        for name in "ABC":
            chats[name] = await start("chat", "--name", name)
            await chats[name].wait_for(lambda line: line.startswith("* view:"))
        for chat in chats.values():
            await chat.wait_for(lambda line: line == "* view: A, B, C")
        chats[victim].process.send_signal(signum)
        rest = ", ".join(n for n in "ABC" if n != victim)
        for name, chat in chats.items():
            if name != victim:
                await chat.wait_for(lambda line, rest=rest: line == f"* view: {rest}")
        assert await chats[victim].exit_code() == 128 + signum
        with trio.fail_after(20):
            await chats[victim].stderr_closed.wait()
        assert b"Traceback" not in chats[victim].stderr, chats[victim].stderr.decode()
        for name, chat in chats.items():
            if name != victim:
                await chat.close_stdin()
                assert await chat.exit_code() == 0


async def test_counter_rpc_demo_across_processes(tmp_path: Path) -> None:
    async with scripts(tmp_path) as start:
        a = await start("counter_rpc", "--name", "A")
        await a.wait_for(lambda line: line.startswith("* A serves"))
        b = await start("counter_rpc", "--name", "B", "--members", "2", "--demo")
        assert await b.exit_code() == 0
        assert "incr(1) on all: {'A': 1, 'B': 1}" in b.lines
        assert "slow_get(5) with a 1 s timeout: timed out = True" in b.lines
        assert any(line.startswith("fail() on A raised ValueError") for line in b.lines)
        await a.close_stdin()
        assert await a.exit_code() == 0


async def test_replicated_kv_late_joiner_process_gets_the_data(tmp_path: Path) -> None:
    async with scripts(tmp_path, total=True) as start:
        a = await start("replicated_kv", "--name", "A")
        await a.wait_for(lambda line: line.startswith("* node A"))
        await a.type("put colour blue\nput size 3\ndump\n")
        await a.wait_for(lambda line: line == "size = '3'")
        b = await start("replicated_kv", "--name", "B")
        await b.wait_for(lambda line: line == "* node B: 2 keys after joining")
        await b.type("get colour\n")
        await b.wait_for(lambda line: line == "'blue'")
        for script in (a, b):
            await script.close_stdin()
            assert await script.exit_code() == 0
