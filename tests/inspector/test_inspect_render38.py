"""The inspector's screen and keys after issue 38: fixed columns, help, filter and sort."""

from __future__ import annotations

import io
import os
import re

import trio
from inspect_kit import answers
from rich.console import Console, RenderableType

from triogroups.inspector._keys import parse_keys
from triogroups.inspector._model import Display, step
from triogroups.inspector._render import render
from triogroups.inspector._select import QUIT, SORTS, Selection, apply_key, visible
from triogroups.testing import open_cluster

WIDTH = 150
COLUMNS = ("member", "address", "pid", "view", "status", "msgs/s", "throughput", "warnings")


def text_of(renderable: RenderableType) -> str:
    console = Console(file=io.StringIO(), record=True, width=WIDTH)
    console.print(renderable)
    return console.export_text()


def layout(screen: str) -> dict[str, int]:
    """Where each column header and each counter name of the detail pane starts."""
    lines = screen.splitlines()
    (header,) = [line for line in lines if "address" in line and "throughput" in line]
    places = {c: header.index(c) for c in COLUMNS}
    for line in lines:
        for name in re.findall(r"(?<= )([a-z_]+_[a-z_]+)(?= +[\d,.-]+)", line):
            places.setdefault(name, line.index(f" {name} ") + 1)
    rows = [line for line in lines if re.match(r"│ [> ] [ABC] ", line)]
    for row in rows:
        places[f"row {row[4]} pid"] = row.index(str(os.getpid()))
    return places


async def test_inspect_render_columns_keep_their_place_between_refreshes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A first round (no rates, no sparkline), rounds with traffic (rates, sparklines of 1 to
    20 values, throughput in the hundreds) and rounds where C has stopped answering: every
    column header, and every counter of the selected member's UNICAST3, starts at the same
    place in each frame (rich sized the columns by their contents, which moved them)."""
    frames = []
    async with open_cluster(3, "udp", cluster="widths") as cluster:
        display: Display | None = None
        a, b, _ = cluster.members
        for round_ in range(24):
            if 2 <= round_ < 20:
                await a.send_many([b"x" * 10] * (40 * round_), to=b.address)
            live = cluster.members if round_ < 21 else [a, b]
            display = step(display, answers(live), trio.current_time())
            frames.append(text_of(render(display, Selection(protocol="UNICAST3"))))
            await trio.sleep(1.0)
    places = [layout(f) for f in frames]
    for key in places[0]:
        assert {p[key] for p in places if key in p} == {places[0][key]}, key
    assert any(" xmit" in f or "/s" in f for f in frames[3:])  # rates did appear


async def test_inspect_keys_help_filter_and_sort(autojump_clock: trio.testing.MockClock) -> None:
    """`?` opens and closes the help; `/` types a filter (q is text then, Backspace takes a
    character off) that leaves only the matching rows, Enter keeps it and the arrows move
    within it, Escape clears it; `s` cycles the sorts, msgs/s putting the busiest first;
    Ctrl-C quits even while typing."""
    assert parse_keys(b"/b\x7f?") == ["/", "b", "backspace", "?"]
    async with open_cluster(3, "udp", cluster="keys") as cluster:
        display = step(None, answers(cluster.members), trio.current_time())
        await cluster[2].send_many([b"busy"] * 200)
        await trio.sleep(1.0)
        display = step(display, answers(cluster.members), trio.current_time())

    def press(selection: Selection, *keys: str) -> Selection:
        for key in keys:
            chosen = apply_key(selection, display, key)
            assert isinstance(chosen, Selection)
            selection = chosen
        return selection

    sel = press(Selection(), "?")
    assert sel.help and "keys (? to close)" in text_of(render(display, sel))
    assert not press(sel, "?").help
    sel = press(Selection(), "/", "b", "q", "backspace")
    assert sel.typing and sel.filter == "b"
    assert [m.label for m in visible(display, sel)] == ["B"]
    assert "filter: b" in text_of(render(display, sel))
    sel = press(sel, "enter", "down", "up")
    assert not sel.typing and sel.resolve(display)[0].label == "B"  # type: ignore[union-attr]
    rows = [line for line in text_of(render(display, sel)).splitlines() if "│ > " in line]
    assert len(rows) == 1 and "B" in rows[0]
    assert press(sel, "escape").filter == ""
    assert apply_key(press(Selection(), "/"), display, "ctrl-c") == QUIT
    sorts = [Selection().sort]
    sel = Selection()
    for _ in SORTS:
        sel = press(sel, "s")
        sorts.append(sel.sort)
    assert sorts == [*SORTS, SORTS[0]]
    busiest = [m.throughput[-1] for m in visible(display, Selection(sort="msgs/s"))]
    assert busiest == sorted(busiest, reverse=True) and busiest[0] > busiest[-1]
    assert "sort: msgs/s" in text_of(render(display, Selection(sort="msgs/s")))
