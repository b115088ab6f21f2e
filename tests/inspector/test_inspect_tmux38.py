"""The real ``triogroups inspect`` in tmux through a graceful leave and a restart, and its
new keys (issue 38). A tmux server of its own (``-L``) is always killed in a ``finally``."""

from __future__ import annotations

import re
import signal
import sys
import uuid
from collections.abc import Callable

import pytest
import trio
from test_inspect_tmux import ROOT, STEP, chatter, fast_udp, quiet, tmux

from triogroups import open_process_group
from triogroups.testing import free_ports

pytestmark = pytest.mark.real

COLUMNS = ("member", "address", "pid", "view", "status", "msgs/s", "throughput", "warnings")


class Pane:
    """The inspector's tmux pane; every screen captured is kept, in order."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.screens: list[str] = []

    def keys(self, *keys: str) -> None:
        tmux(self.server, "send-keys", "-t", "inspect", *keys)

    async def until(self, done: Callable[[str], bool], what: str) -> str:
        """The first screen for which ``done`` holds (within STEP seconds)."""
        screen = ""
        with trio.move_on_after(STEP):
            while True:
                screen = tmux(self.server, "capture-pane", "-p", "-t", "inspect").stdout
                self.screens.append(screen)
                if done(screen):
                    return screen
                await trio.sleep(0.3)
        raise AssertionError(f"no screen with {what} within {STEP} s; the last:\n{screen}")

    async def watch(self, seconds: float) -> None:
        """Capture a screen every 0.3 s for ``seconds``."""
        with trio.move_on_after(seconds):
            while True:
                self.screens.append(tmux(self.server, "capture-pane", "-p", "-t", "inspect").stdout)
                await trio.sleep(0.3)

    async def showing(self, *wanted: str) -> str:
        return await self.until(lambda s: all(w in s for w in wanted), f"{wanted}")


def rows(screen: str) -> list[str]:
    """The member rows' labels, in screen order."""
    return re.findall(r"^│ [> ] (\S+) +[0-9a-f]{8} ", screen, flags=re.M)


def header_places(screen: str) -> tuple[int, ...] | None:
    lines = [line for line in screen.splitlines() if "address" in line and "throughput" in line]
    return tuple(lines[0].index(c) for c in COLUMNS) if lines else None


async def test_inspect_in_tmux_leave_and_restart_help_filter_sort() -> None:
    """In a 150x50 pane on three chattering members: `?` opens and closes the help; `/b`
    Enter leaves only B's row, Escape brings all back; `s` sorts by msgs/s. Then C gets
    SIGTERM: it leaves gracefully and the supervisor restarts it. In no screen captured
    meanwhile (every 0.3 s) is the cluster split or are there two rows called C: the old C
    shows as left (or is already gone) and the new one as C#2, holding the view with A and
    B. In the screens from 10 s to 20 s after C#2 appeared none warns of UNICAST3
    retransmissions (the coordinator resent to the departed C for up to 60 s; a resend
    during the join, on a busy machine, is no failure), and the column headers never moved
    in any screen. --silent-after is generous (10 s): on a loaded machine a view change can
    take seconds to reach every member, and the test is about leaves, not about speed."""
    cluster = f"tui38-{uuid.uuid4().hex[:8]}"
    server = f"tg-inspect38-{uuid.uuid4().hex[:8]}"
    port = free_ports()
    command = (
        f"env -u COLUMNS -u LINES {sys.executable} -m triogroups.cli inspect "
        f"--cluster {cluster} --port {port} --port-range 0 --silent-after 10 --forget-after 30"
    )
    async with open_process_group(
        chatter, 3, stack=fast_udp(port), cluster=cluster, output=quiet
    ) as group:
        with trio.fail_after(STEP):
            await group.wait_for_view(3)
        pane = Pane(server)
        try:
            started = tmux(
                server,
                "new-session", "-d", "-s", "inspect", "-x", "150", "-y", "50", "-c", str(ROOT),
                f"{command}; echo exit=$?; sleep 60",
            )  # fmt: skip
            assert started.returncode == 0, started.stderr
            await pane.showing("held by A B C", "sort: name")
            pane.keys("?")
            await pane.showing("keys (? to close)", "filter the members")
            pane.keys("?")
            await pane.until(lambda s: "keys (? to close)" not in s, "help closed")
            pane.keys("/", "b", "Enter")
            await pane.until(lambda s: rows(s) == ["B"] and "filter: b" in s, "filtered")
            pane.keys("Escape")
            await pane.until(lambda s: rows(s) == ["A", "B", "C"], "filter cleared")
            pane.keys("s")
            await pane.showing("sort: msgs/s")
            pane.keys("s", "s", "s")
            await pane.showing("sort: name")
            seen = len(pane.screens)
            group.kill("C", signal.SIGTERM)
            await pane.showing("held by A B C#2")
            during = pane.screens[seen:]
            split = [s for s in during if "SPLIT" in s]
            assert not split, split[0]
            assert all(rows(s).count("C") <= 1 for s in during)
            assert any("C#2" in rows(s) for s in during)
            await pane.watch(10)
            quiet_from = len(pane.screens)
            await pane.watch(10)
            xmits = [s for s in pane.screens[quiet_from:] if "UNICAST3: xmit" in s]
            assert not xmits, xmits[0]
            assert not [s for s in pane.screens[seen:] if "SPLIT" in s]
            assert rows(pane.screens[-1]) == ["A", "B", "C#2"]
            places = {header_places(s) for s in pane.screens} - {None}
            assert len(places) == 1, places
            pane.keys("q")
            screen = await pane.showing("exit=")
            assert "exit=0" in screen and "Traceback" not in screen
        finally:
            tmux(server, "kill-server")
