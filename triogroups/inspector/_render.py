"""The inspector's screen as rich renderables, from a `Display` and a `Selection`.

Pure presentation: nothing here reads the network or the keyboard, so a frame
renders the same on a recording console (the tests) as in the live terminal.
Per cluster: its views side by side (a split's border and title in red, the
members holding a minority view marked), then one row per member (silent and
left ones dimmed, warnings in yellow, a throughput sparkline); below, the
selected member's selected protocol: counters (with rates per second where
they count), window fill and flow-control credits as bars; or the help.

Every column and counter cell has a fixed width, so nothing moves between
refreshes: a long value is cut with an ellipsis instead of widening its column.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.columns import Columns
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from triogroups.inspector._model import Bar, ClusterState, Display, MemberState, ProtocolState
from triogroups.inspector._select import SORTS, Selection, visible

__all__ = ["HELP", "KEYS_HELP", "bar", "render", "sparkline"]

KEYS_HELP = "? help  / filter  s sort  up/down member  left/right protocol  q quit"
HELP = (
    ("up, down, j, k", "select a member"),
    ("left, right, h, l, Tab", "select a protocol of the member"),
    ("/", "filter the members: type, Enter keeps it, Escape clears it"),
    ("s", f"sort the members by {', then '.join(SORTS)}"),
    ("Escape", "clear the filter, close the help"),
    ("?", "show or hide this help"),
    ("q, Ctrl-C", "quit"),
)
"""The keys, and what they do (the ``?`` pane)."""
_SPARKS = "▁▂▃▄▅▆▇█"
_BAR_WIDTH = 20
_SPARK_WIDTH = 20
_COLUMNS = (
    ("member", 12, "left"),
    ("address", 8, "left"),
    ("pid", 7, "right"),
    ("view", 16, "left"),
    ("status", 8, "left"),
    ("msgs/s", 8, "right"),
    ("throughput", _SPARK_WIDTH, "left"),
)
"""The member table's fixed columns (name, width, justification); warnings take the rest."""
_VALUE_WIDTH = 14
_RATE_WIDTH = 13


def sparkline(values: Sequence[float], width: int = 20) -> str:
    """The last ``width`` values as block characters scaled to their maximum."""
    shown = list(values)[-width:]
    top = max(shown, default=0.0)
    if top <= 0:
        return _SPARKS[0] * len(shown)
    last = len(_SPARKS) - 1
    return "".join(_SPARKS[round(v / top * last)] for v in shown)


def bar(fill: float, width: int = _BAR_WIDTH) -> str:
    """``fill`` (0 to 1) as a bar of ``width`` cells."""
    full = round(max(0.0, min(1.0, fill)) * width)
    return "█" * full + "░" * (width - full)


def render(display: Display | None, selection: Selection, *, status: str = "") -> RenderableType:
    """The whole screen."""
    header = Text("triogroups inspect", style="bold")
    if display is None:
        header.append(f"  waiting for answers  {status}", style="dim")
        return Group(header, *_footer(selection))
    live = sum(m.answered and not m.left for m in display.members.values())
    header.append(
        f"  {len(display.clusters)} cluster(s), {live} member(s) answering  {status}", style="dim"
    )
    parts: list[RenderableType] = [header]
    member, protocol = selection.resolve(display)
    rows = visible(display, selection)
    shown = [
        c
        for c in display.clusters
        if not selection.filter or any(m.cluster == c.name for m in rows)
    ]
    parts += [_cluster(c, display, [m for m in rows if m.cluster == c.name], member) for c in shown]
    if selection.help:
        parts.append(_help())
    elif member is not None:
        parts.append(_detail(member, protocol))
    elif not display.clusters:
        parts.append(Text("no member answered", style="yellow"))
    else:
        parts.append(Text(f"no member matches the filter {selection.filter!r}", style="yellow"))
    parts += _footer(selection)
    return Group(*parts)


def _footer(selection: Selection) -> list[RenderableType]:
    line = Text(f"sort: {selection.sort}", style="dim")
    if selection.typing:
        line.append(f"  filter: {selection.filter}▏", style="bold")
        line.append("  (Enter keeps it, Escape clears it)", style="dim")
    elif selection.filter:
        line.append(f"  filter: {selection.filter}", style="bold")
    return [line, Text(KEYS_HELP, style="dim")]


def _help() -> Panel:
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for keys, what in HELP:
        table.add_row(keys, what)
    return Panel(table, title="keys (? to close)", title_align="left")


def _names(display: Display, addresses: Sequence[str]) -> str:
    members = display.members
    return " ".join(
        members[a].label or members[a].name if a in members else a[:8] for a in addresses
    )


def _cluster(
    cluster: ClusterState,
    display: Display,
    rows: Sequence[MemberState],
    selected: MemberState | None,
) -> Panel:
    views = []
    for index, group in enumerate(cluster.views):
        main = index == 0
        body = Text(" ".join(group.view.members) or "-")
        body.append(f"\nheld by {_names(display, group.holders)}", style="dim")
        views.append(
            Panel(
                body,
                title=f"view {group.view.label}",
                border_style="green" if main and not cluster.split else "red",
                expand=False,
            )
        )
    title = f"cluster {cluster.name}"
    if cluster.split:
        title += f"  [bold red]SPLIT into {len(cluster.views)} views[/]"
    return Panel(
        Group(Columns(views), _members(cluster, rows, selected)),
        title=title,
        title_align="left",
        border_style="red" if cluster.split else "blue",
    )


def _status(m: MemberState) -> Text:
    if m.left:
        return Text("left", style="magenta")
    if m.silent:
        return Text("silent", style="bold magenta")
    if not m.answered:
        return Text("missing", style="magenta")
    if m.gms_state == "leaving":
        return Text("leaving", style="yellow")
    if m.changing_since is not None:
        return Text("changing", style="yellow")
    return Text("ok", style="green")


def _members(
    cluster: ClusterState, rows: Sequence[MemberState], selected: MemberState | None
) -> Table:
    table = Table(expand=True, box=None, pad_edge=False)
    for column, width, justify in _COLUMNS:
        table.add_column(
            column, width=width, min_width=width, max_width=width, no_wrap=True,
            overflow="ellipsis", justify=justify,  # type: ignore[arg-type]
        )  # fmt: skip
    table.add_column("warnings", ratio=1, no_wrap=True, overflow="ellipsis")
    for m in rows:
        gone = m.silent or m.left
        rate = m.throughput[-1] if m.throughput and m.answered and not m.left else None
        view = Text(m.view.label if m.view and not m.left else "-")
        if m.address in cluster.disagreeing:
            view.stylize("bold red")
            view.append(" disagrees")
        warnings = Text()
        if m.warnings and not gone:
            warnings = Text("; ".join(m.warnings), style="yellow")
        chosen = selected is not None and selected.address == m.address
        table.add_row(
            ("> " if chosen else "  ") + (m.label or m.name),
            m.address[:8],
            str(m.pid),
            view,
            _status(m),
            "-" if rate is None else f"{rate:,.0f}",
            sparkline(m.throughput, _SPARK_WIDTH).ljust(_SPARK_WIDTH),
            warnings,
            style="dim" if gone else ("reverse" if chosen else None),
        )
    return table


def _detail(member: MemberState, chosen: str | None) -> Panel:
    tabs = Text()
    for p in member.protocols:
        style = "bold reverse" if p.name == chosen else ("yellow" if p.warnings else "")
        tabs.append(f" {p.name}{f' ({p.queue})' if p.queue else ''} ", style=style)
    parts: list[RenderableType] = [tabs]
    proto = member.protocol(chosen) if chosen else None
    if proto is not None:
        parts += _protocol(proto)
    title = f"{member.label or member.name} {member.address[:8]} pid {member.pid}"
    if member.left:
        title += " [magenta](left: last answer)[/]"
    elif member.silent:
        title += " [magenta](silent: last answer)[/]"
    return Panel(Group(*parts), title=title, title_align="left")


def _protocol(proto: ProtocolState) -> list[RenderableType]:
    parts: list[RenderableType] = [Text(f"queued in the host: {proto.queue}", style="dim")]
    for warning in proto.warnings:
        parts.append(Text(f"! {warning}", style="bold yellow"))
    width = max((len(c.name) for c in proto.counters), default=0)
    parts.append(
        Columns(
            [_counter(c.name, c.value, c.rate, width) for c in proto.counters],
            column_first=True,
            padding=(0, 3),
        )
    )
    bars = [*proto.windows, *proto.credits]
    if bars:
        label = max(len(b.label) for b in bars)
        parts.append(Columns([_bar(b, label) for b in bars], column_first=True, padding=(0, 3)))
    return parts


def _counter(name: str, value: float, rate: float | None, width: int) -> Text:
    """One counter in a cell of fixed width: name, value, and its rate or blanks."""
    shown = f"{value:,}" if isinstance(value, int) else f"{value:,.3f}"
    text = Text(f"{name:<{width}} {_fit(shown, _VALUE_WIDTH):>{_VALUE_WIDTH}}")
    rate_text = "" if rate is None else _fit(f"{rate:,.1f}/s", _RATE_WIDTH - 1)
    text.append(f" {rate_text:>{_RATE_WIDTH - 1}}", style="cyan" if rate else "dim")
    return text


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _bar(b: Bar, width: int) -> Text:
    low_credit = b.label.startswith("credits") and b.fill < 0.25
    full_window = not b.label.startswith("credits") and b.fill > 0.75
    text = Text(f"{b.label:<{width}} ")
    text.append(bar(b.fill), style="red" if low_credit or full_window else "green")
    text.append(f" {b.text}")
    return text
