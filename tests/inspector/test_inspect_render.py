"""The inspector's screen rendered on rich's recording console (issue 16)."""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator

import trio
from inspect_kit import answers
from rich.console import Console, RenderableType
from rich.segment import Segment

from triogroups.config import StackConfig
from triogroups.inspector._model import Display, step
from triogroups.inspector._render import bar, render, sparkline
from triogroups.inspector._select import Selection
from triogroups.inspector._tui import run_tui
from triogroups.testing import SimCluster, open_cluster, wait_until

WIDTH = 140


def screen(renderable: RenderableType) -> tuple[str, list[Segment]]:
    """The text of a frame and its styled segments."""
    console = Console(
        file=io.StringIO(), record=True, width=WIDTH, color_system="truecolor", force_terminal=True
    )
    segments = list(console.render(renderable))
    console.print(renderable)
    return console.export_text(), segments


def styled(segments: list[Segment], text: str) -> list[Segment]:
    return [s for s in segments if text in s.text and s.style is not None]


async def split_by_discard(cluster: SimCluster) -> Display:
    """Rounds until DISCARD's partition (A, B | C) shows as two views."""
    a, b, c = cluster.members
    display = step(None, answers(cluster.members), trio.current_time())
    for x, y in ((a, c), (b, c)):
        x.protocol("DISCARD").ignore(y.address)
        y.protocol("DISCARD").ignore(x.address)
    with trio.fail_after(60):
        while {g.view.members for g in display.clusters[0].views} != {("A", "B"), ("C",)}:
            await trio.sleep(0.5)
            display = step(display, answers(cluster.members), trio.current_time())
    return display


def discard_stack() -> StackConfig:
    return StackConfig.preset("udp").insert_above("UDP", "DISCARD")


async def test_inspect_render_shows_members_view_and_selected_protocol(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One view of A, B, C (coordinator A): its label and members, a row per member with its
    address prefix, the selected member's selected layer with counters and credit bars."""
    async with open_cluster(3, "udp", cluster="shown") as cluster:
        first = step(None, answers(cluster.members), trio.current_time())
        await cluster[1].send(b"hello")
        await cluster.wait_until_delivered()
        await trio.sleep(1.0)
        display = step(first, answers(cluster.members), trio.current_time())
        b = f"{cluster[1].address.uuid:032x}"
    text, segments = screen(render(display, Selection(b, "MFC")))
    assert "cluster shown" in text and "view A|3" in text and "SPLIT" not in text
    assert "A B C" in text and "held by A B C" in text
    for member in cluster.members:
        assert f"{member.address.uuid:032x}"[:8] in text
    assert "> B" in text and f"B {b[:8]}" in text
    assert "bytes_sent" in text and "credits A" in text and "/5000000" in text
    assert not styled(segments, "disagrees")


async def test_inspect_render_highlights_a_split_made_by_discard(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """DISCARD drops everything between {A, B} and C: the frame says SPLIT in bold red with
    both views side by side, and C's view cell says it disagrees, in red."""
    async with open_cluster(3, discard_stack(), seed=2) as cluster:
        display = await split_by_discard(cluster)
    text, segments = screen(render(display, Selection()))
    assert "SPLIT into 2 views" in text
    assert "view A|4" in text and "held by A B" in text and "held by C" in text
    (split,) = styled(segments, "SPLIT")
    assert split.style is not None and split.style.bold and split.style.color is not None
    assert split.style.color.name == "red"
    row = next(line for line in text.splitlines() if "disagrees" in line)
    assert " C " in row
    assert all(s.style.color.name == "red" for s in styled(segments, "disagrees") if s.style.color)


def test_inspect_render_bars_and_sparklines_scale() -> None:
    """A bar is its fill in cells (clamped); a sparkline scales to its highest value."""
    assert bar(0.5, 10) == "█████░░░░░"
    assert bar(2.0, 4) == "████" and bar(-1, 4) == "░░░░"
    assert sparkline([0, 5, 10]) == "▁▅█"
    assert sparkline([0, 0]) == "▁▁"
    assert sparkline([0, 100, 10, 20], width=3) == "█▂▂"  # the oldest value left out


async def test_inspect_tui_draws_rounds_follows_keys_and_quits_on_q(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """run_tui on in-process answers: it draws a round, Down and Right move the detail to B's
    second layer, q ends it (the key task and the polling task both stop)."""
    console = Console(file=io.StringIO(), record=True, width=WIDTH, force_terminal=True)
    async with open_cluster(3, "udp", cluster="live") as cluster:
        rounds = 0

        async def source() -> list[dict[str, object]]:
            nonlocal rounds
            rounds += 1
            return answers(cluster.members)

        async def keys() -> AsyncIterator[str]:
            await wait_until(lambda: rounds >= 2, timeout=120, interval=0.1)
            for key in ("down", "right", "q", "never read"):
                yield key

        with trio.fail_after(30):
            await run_tui(source, console, keys=keys(), interval=1.0, screen=False)
        b = f"{cluster[1].address.uuid:032x}"[:8]
        ended = trio.current_time()
        await trio.sleep(5)
    assert rounds == 2 and ended < 5
    text = console.export_text()
    last = text[text.rindex("triogroups inspect") :]
    assert "cluster live" in last and "view A|3" in last
    assert f"B {b}" in last and "> B" in last
    assert "responses_received" in last  # the second layer, PING, is selected: its counters


async def test_inspect_render_marks_a_member_that_stopped_answering_as_silent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C is killed: three rounds later its row says silent (dimmed) and the header counts two
    members answering; the view panel lists only A and B as holders."""
    async with open_cluster(3, "udp") as cluster:
        display = step(None, answers(cluster.members), trio.current_time())
        cluster[2].kill()
        for _ in range(3):
            await trio.sleep(1.0)
            display = step(display, answers(cluster.members[:2]), trio.current_time())
    text, segments = screen(render(display, Selection()))
    (row,) = [line for line in text.splitlines() if line.startswith("│   C ")]
    assert "silent" in row
    assert "2 member(s) answering" in text and re.search(r"held by A B +│", text)
    assert any(s.style.dim for s in styled(segments, "silent") if s.style is not None)
