"""The real ``triogroups inspect`` in a terminal (tmux) against three member processes
started by the supervisor: its screen shows the members and their view, and q ends it
(issue 16). A tmux server of its own (``-L``) is always killed in a ``finally``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import trio

from triogroups import Channel, StackConfig, open_process_group
from triogroups.testing import free_ports

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
STEP = 60  # seconds per awaited condition: generous, a busy 2-core machine needs a few


async def chatter(ch: Channel) -> None:
    """The member app: multicast a little, forever, so the counters move."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_drain, ch)
        k = 0
        while True:
            k += 1
            await ch.send(f"{ch.name} {k}")
            await trio.sleep(0.05)


async def _drain(ch: Channel) -> None:
    async for _ in ch:
        pass


def quiet(name: str, line: str) -> None:
    """Member output is kept by the group; nothing is printed."""


def fast_udp(diagnostics_port: int) -> StackConfig:
    """The udp preset on ports of its own (cluster and diagnostics), with short join timers."""
    config = StackConfig.preset("udp").configure(
        "UDP", mcast_port=free_ports(), diagnostics_port=diagnostics_port
    )
    return config.configure("GMS", join_timeout=1.0, view_ack_collection_timeout=1.0)


def tmux(server: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["tmux", "-L", server, *args], capture_output=True, text=True, check=False
    )


async def wait_for_screen(server: str, wanted: list[str]) -> str:
    """The pane's text once it holds every string of ``wanted``."""
    screen = ""
    with trio.fail_after(STEP):
        while not all(w in screen for w in wanted):
            await trio.sleep(0.3)
            screen = tmux(server, "capture-pane", "-p", "-t", "inspect").stdout
    return screen


async def test_inspect_in_tmux_shows_the_live_cluster_and_quits_on_q() -> None:
    """`triogroups inspect --cluster C` on the members' own diagnostics port in a 150x50 tmux
    pane: the screen names A, B and C and their common view, held by all three, no split;
    Down and Right select B and its PING layer; `send-keys q` ends the command with status 0,
    its process is gone and the terminal is back in canonical mode with echo and signals
    (`stty -a` run after it in the same pane)."""
    cluster = f"tui-{uuid.uuid4().hex[:8]}"
    server = f"tg-inspect-{uuid.uuid4().hex[:8]}"
    port = free_ports()
    # without the COLUMNS and LINES pytest's environment may carry: rich would size by them
    command = (
        f"env -u COLUMNS -u LINES {sys.executable} -m triogroups.cli inspect "
        f"--cluster {cluster} --port {port} --port-range 0"
    )
    async with open_process_group(
        chatter, 3, stack=fast_udp(port), cluster=cluster, output=quiet
    ) as group:
        with trio.fail_after(STEP):
            await group.wait_for_view(3)
        try:
            started = tmux(
                server,
                "new-session", "-d", "-s", "inspect", "-x", "150", "-y", "50", "-c", str(ROOT),
                f"{command}; echo exit=$?; stty -a; sleep 60",
            )  # fmt: skip
            assert started.returncode == 0, started.stderr
            shell = tmux(server, "display", "-p", "-t", "inspect", "#{pane_pid}").stdout
            screen = await wait_for_screen(server, ["held by A B C", f"cluster {cluster}"])
            assert "view A|" in screen and "SPLIT" not in screen
            rows = [line for line in screen.splitlines() if re.match(r"│ [> ] [ABC] ", line)]
            assert [row[4] for row in rows] == ["A", "B", "C"], screen
            assert all(" A|" in row for row in rows)
            inspector = subprocess.run(
                ["pgrep", "-P", shell.strip()], capture_output=True, text=True, check=False
            ).stdout.split()
            assert len(inspector) == 1
            tmux(server, "send-keys", "-t", "inspect", "Down", "Right")
            await wait_for_screen(server, ["> B", "responses_received"])  # B's PING counters
            tmux(server, "send-keys", "-t", "inspect", "q")
            screen = await wait_for_screen(server, ["exit=", "speed"])
            assert "exit=0" in screen and "Traceback" not in screen
            assert "triogroups inspect" not in screen  # the alternate screen is gone
            flags = set(screen.split())
            assert {"icanon", "echo", "isig"} <= flags, screen
            assert not Path(f"/proc/{inspector[0]}").exists()
        finally:
            tmux(server, "kill-server")


async def test_demo_inspect_in_tmux_shows_the_demo_live_then_its_summary() -> None:
    """`triogroups demo --inspect`: while the demo runs the inspector shows its own cluster
    (demo-...) with the members; the header says when it finished; q closes the inspector and
    the demo's summary and verdict follow, exit status 0."""
    server = f"tg-demo-{uuid.uuid4().hex[:8]}"
    command = (
        f"env -u COLUMNS -u LINES {sys.executable} -m triogroups.cli demo --inspect --messages 300"
    )
    try:
        started = tmux(
            server,
            "new-session", "-d", "-s", "inspect", "-x", "150", "-y", "50", "-c", str(ROOT),
            f"{command}; echo exit=$?; sleep 60",
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        screen = await wait_for_screen(server, ["demo running on cluster demo-", "> A "])
        assert re.search(r"cluster demo-[0-9a-f]{8}", screen)
        await wait_for_screen(server, ["demo finished (status 0): q for its summary"])
        tmux(server, "send-keys", "-t", "inspect", "q")
        screen = await wait_for_screen(server, ["exit="])
        assert "every member delivered exactly once" in screen and "exit=0" in screen
    finally:
        tmux(server, "kill-server")
