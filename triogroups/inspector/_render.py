"""The inspector's screen as rich renderables, from a `Display` and a `Selection`.

Pure presentation: nothing here reads the network or the keyboard, so a frame
renders the same on a recording console (the tests) as in the live terminal.
Per cluster: its views side by side (a split's border and title in red, the
members holding a minority view marked), then one row per member (silent ones
dimmed, warnings in yellow, a throughput sparkline); below, the selected
member's selected protocol: counters with rates per second, window fill and
flow-control credits as bars.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.columns import Columns
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from triogroups.inspector._model import Bar, ClusterState, Display, MemberState, ProtocolState
from triogroups.inspector._select import Selection

__all__ = ["bar", "render", "sparkline"]

KEYS_HELP = "up/down member  left/right protocol  q quit"
_SPARKS = "▁▂▃▄▅▆▇█"
_BAR_WIDTH = 20


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
        return Group(header, Text(KEYS_HELP, style="dim"))
    live = sum(not m.silent for m in display.members.values())
    header.append(
        f"  {len(display.clusters)} cluster(s), {live} member(s) answering  {status}", style="dim"
    )
    parts: list[RenderableType] = [header]
    member, protocol = selection.resolve(display)
    parts += [_cluster(c, display, member) for c in display.clusters]
    if member is not None:
        parts.append(_detail(member, protocol))
    elif not display.clusters:
        parts.append(Text("no member answered", style="yellow"))
    parts.append(Text(KEYS_HELP, style="dim"))
    return Group(*parts)


def _names(display: Display, addresses: Sequence[str]) -> str:
    members = display.members
    return " ".join(members[a].name if a in members else a[:8] for a in addresses)


def _cluster(cluster: ClusterState, display: Display, selected: MemberState | None) -> Panel:
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
        Group(Columns(views), _members(cluster, display, selected)),
        title=title,
        title_align="left",
        border_style="red" if cluster.split else "blue",
    )


def _members(cluster: ClusterState, display: Display, selected: MemberState | None) -> Table:
    table = Table(expand=True, box=None, pad_edge=False)
    for column in ("member", "address", "pid", "view", "msgs/s", "throughput", "warnings"):
        table.add_column(column, no_wrap=column != "warnings")
    for address in cluster.members:
        m = display.members[address]
        rate = m.throughput[-1] if m.throughput and not m.silent else None
        view = Text(m.view.label if m.view else "-")
        if address in cluster.disagreeing:
            view.stylize("bold red")
            view.append(" disagrees")
        warnings = Text("silent", style="bold magenta") if m.silent else Text()
        if m.warnings and not m.silent:
            warnings = Text("; ".join(m.warnings), style="yellow")
        marker = "> " if selected is not None and selected.address == address else "  "
        table.add_row(
            marker + m.name,
            address[:8],
            str(m.pid),
            view,
            "-" if rate is None else f"{rate:,.0f}",
            sparkline(m.throughput),
            warnings,
            style="dim" if m.silent else ("reverse" if marker.strip() else None),
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
    title = f"{member.name} {member.address[:8]} pid {member.pid}"
    if member.silent:
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
    shown = f"{value:,}" if isinstance(value, int) else f"{value:,.3f}"
    text = Text(f"{name:<{width}} {shown:>13}")
    text.append("" if rate is None else f" {rate:>10,.1f}/s", style="cyan" if rate else "dim")
    return text


def _bar(b: Bar, width: int) -> Text:
    low_credit = b.label.startswith("credits") and b.fill < 0.25
    full_window = not b.label.startswith("credits") and b.fill > 0.75
    text = Text(f"{b.label:<{width}} ")
    text.append(bar(b.fill), style="red" if low_credit or full_window else "green")
    text.append(f" {b.text}")
    return text
