"""What the inspector shows, computed from successive rounds of probe answers.

`step` is a pure function: the previous `Display`, this round's answers (one
dict per member, as ``build_report`` makes them) and the time of the round
in, the next `Display` out. It never touches the network, the terminal or a
clock, so every rule below is tested on answers built in-process.

The rules:
- A member is known by its address (an incarnation). The incarnations of one
  name in one cluster are numbered in the order they were first seen, and
  shown as ``B``, ``B#2``, ...: a restarted member is a new row, and its old
  incarnation is dropped as soon as the new one answers while the old one does
  not (two live processes of one name both stay, told apart by the number).
- A member missing from the answers for ``silent_after`` seconds is shown
  silent (with its last answer); after ``forget_after`` seconds it is removed.
- A member has *left* when its GMS says so (``left``), or when the main view of
  its cluster lacks it and it is leaving (GMS ``leaving``) or no longer answers:
  a graceful leave is shown as such, never as a split. A left member holds no
  view and is removed ``forget_after`` seconds after its last answer.
- Rates per second are the change of a counter between a member's last two
  answers divided by the change of the answer's own ``time``, and only for
  counters: a key that has grown and never went down to another value than 0
  (a probe's reset zeroes the counters), and whose name does not say it is an
  average or a bound (``avg``, ``mean``, ``max``, ``min``, ``capacity``,
  ``timeout``, ...). Averages, bounds and gauges are values; a counter that
  went down (reset) has no rate for that round.
- A cluster is split when the members that answered this round, and have not
  left, hold more than one view; the view held by most (on a tie, the highest
  id) is the main one, and every member holding another is disagreeing. A
  member of the main view that holds another view is *changing* views (a view
  change on its way: one round may catch some members before and some after
  they installed it), not disagreeing, for ``silent_after`` seconds; after that
  it disagrees.
- Window fill is a window's span (low end to highest received) over the
  protocol's capacity property, from the shared ``peer_windows`` where a
  protocol reports them; flow-control credits are what a sender has left
  over ``max_credits``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "Bar",
    "ClusterState",
    "Counter",
    "Display",
    "MemberState",
    "ProtocolState",
    "ViewGroup",
    "ViewInfo",
    "step",
]

SPARK_LENGTH = 30
"""Throughput samples kept per member for its sparkline."""

RETRANSMIT_COUNTERS = (
    "xmit_reqs_sent",
    "xmit_reqs_received",
    "xmit_rsps_sent",
    "retransmissions",
    "retransmitted",
)
"""Counters whose growth means a member is repairing loss; the warning is their summed rate."""

SHARED_RETRANSMIT_COUNTERS = ("xmit_reqs_sent", "xmit_reqs_received", "retransmitted")
"""The reliable protocols' shared keys (`reliable_stats`): where ``retransmitted`` is
reported, only these are summed, as it already counts the protocol's own
``xmit_rsps_sent`` and ``retransmissions`` (summing all showed every resend twice)."""

NOT_RATES = re.compile(
    r"(?:^|_)(?:avg|average|mean|ratio|percent|rate|max|min|limit|capacity|threshold|"
    r"timeout|interval)(?:_|$)"
)
"""Stats keys that name an average or a bound: always shown as values, never with a rate."""

GMS_LEAVING, GMS_LEFT = "leaving", "left"
"""GMS's ``state`` of a member on its way out, and out."""

SUSPECT_LISTS = ("suspected", "suspected_members", "verifying")
"""Stats entries listing the members a protocol suspects (GMS, FD_ALL3, VERIFY_SUSPECT)."""

THROUGHPUT_COUNTERS = ("msgs_sent", "msgs_received")
"""The transport's counters whose summed rate is a member's throughput."""

_SPANS = (
    ("low", "high"),
    ("low", "highest_received"),
    ("hd", "hr"),
    ("highest_delivered", "highest_received"),
    ("highest_acked", "highest_sent"),
)
"""(low, high) key pairs of the window snapshots protocols report, the first that fits wins:
what a window holds runs from its low end (or highest delivered) to the highest received."""

PEER_WINDOWS = "peer_windows"
"""The reliable protocols' shared per-peer windows; when present, the only window bars."""

_CAPACITIES = ("capacity", "max_receive_window")
"""Properties that bound a protocol's windows (MCAST; NAKACK2 and UNICAST3)."""


@dataclass(frozen=True)
class Counter:
    """A numeric stats entry: its value and its rate per second (None: no earlier value)."""

    name: str
    value: float
    rate: float | None


@dataclass(frozen=True)
class Bar:
    """One bar: ``fill`` in [0, 1] and what it measures (``label``, ``text``)."""

    label: str
    fill: float
    text: str


@dataclass(frozen=True)
class ProtocolState:
    """One layer of one member: counters with rates, window and credit bars, warnings."""

    name: str
    counters: tuple[Counter, ...]
    windows: tuple[Bar, ...]
    credits: tuple[Bar, ...]
    warnings: tuple[str, ...]
    properties: Mapping[str, Any]
    queue: int
    """Items waiting in the host's channels into this layer."""


@dataclass(frozen=True)
class ViewInfo:
    """A view as a member reports it."""

    id: int
    coord: str
    members: tuple[str, ...]
    member_ids: tuple[str, ...]

    @property
    def label(self) -> str:
        """JGroups' notation, ``coord|id``."""
        return f"{self.coord}|{self.id}"


@dataclass(frozen=True)
class MemberState:
    """One member incarnation as last heard."""

    address: str
    name: str
    cluster: str
    pid: int
    view: ViewInfo | None
    protocols: tuple[ProtocolState, ...]
    throughput: tuple[float, ...]
    """Transport messages in and out per second, oldest first."""
    last_seen: float
    """The round time of its last answer."""
    silent: bool
    answer: Mapping[str, Any] = field(repr=False)
    label: str = ""
    """What the screen calls it: its name, ``#k`` added for the k-th incarnation seen."""
    answered: bool = True
    """It answered in this round."""
    left: bool = False
    """It left its cluster (see the module's rules)."""
    changing_since: float | None = None
    """Since when it holds another view than the main one, which has it (None: it does not)."""
    grown: frozenset[str] = frozenset()
    """``LAYER.key`` of the stats that have grown since it was first seen."""
    fallen: frozenset[str] = frozenset()
    """``LAYER.key`` of the stats that went down (outside a reset): gauges, no rate."""

    @property
    def gms_state(self) -> str | None:
        """GMS's ``state`` in its last answer (None without GMS)."""
        gms = (self.answer.get("stats") or {}).get("GMS") or {}
        state = gms.get("state") if isinstance(gms, Mapping) else None
        return state if isinstance(state, str) else None

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every layer's warnings, ``"LAYER: what"``, bottom first."""
        return tuple(f"{p.name}: {w}" for p in self.protocols for w in p.warnings)

    def protocol(self, name: str) -> ProtocolState | None:
        """The layer named ``name``, if the member has it."""
        return next((p for p in self.protocols if p.name == name), None)


@dataclass(frozen=True)
class ViewGroup:
    """A distinct view and the members (addresses) that hold it."""

    view: ViewInfo
    holders: tuple[str, ...]


@dataclass(frozen=True)
class ClusterState:
    """The members of one cluster name, and the views its answering members hold."""

    name: str
    members: tuple[str, ...]
    """Addresses, silent ones included, ordered by name."""
    views: tuple[ViewGroup, ...]
    """Main view first."""
    disagreeing: frozenset[str]

    @property
    def split(self) -> bool:
        """More than one view among the answering members."""
        return len(self.views) > 1


@dataclass(frozen=True)
class Display:
    """Everything the screen shows at one round."""

    time: float
    members: Mapping[str, MemberState]
    """Address -> member, ordered by cluster then name."""
    clusters: tuple[ClusterState, ...]
    incarnations: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """(cluster, name) -> the addresses seen under that name, in the order first seen."""

    def ordered(self) -> list[MemberState]:
        """Members in display order."""
        return list(self.members.values())


def step(
    previous: Display | None,
    answers: Sequence[Mapping[str, Any]],
    now: float,
    *,
    silent_after: float = 2.5,
    forget_after: float = 10.0,
) -> Display:
    """The display after a round of ``answers`` received at ``now``."""
    before = {} if previous is None else previous.members
    incarnations = {} if previous is None else dict(previous.incarnations)
    members: dict[str, MemberState] = {}
    for answer in answers:
        if "address" not in answer:
            continue  # not a member's report: nothing to show it under
        address = str(answer["address"])
        member = _member(answer, before.get(address), now)
        members[address] = member
        key = (member.cluster, member.name)
        seen = incarnations.get(key, ())
        if address not in seen:
            incarnations[key] = (*seen, address)
    for address, old in before.items():
        if address in members or now - old.last_seen >= forget_after:
            continue
        if _replaced(old, members, incarnations):
            continue
        members[address] = replace(old, silent=now - old.last_seen >= silent_after, answered=False)
    for address, member in members.items():
        index = incarnations[member.cluster, member.name].index(address) + 1
        label = member.name if index == 1 else f"{member.name}#{index}"
        members[address] = replace(member, label=label)
    ordered = sorted(members.values(), key=lambda m: (m.cluster, m.name, m.label, m.address))
    names = sorted({m.cluster for m in ordered})
    clusters = []
    for name in names:
        cluster, left, changing = _cluster(
            name, [m for m in ordered if m.cluster == name], before, now, silent_after
        )
        clusters.append(cluster)
        for address in left:
            members[address] = replace(members[address], left=True, silent=False)
        for address, since in changing.items():
            members[address] = replace(members[address], changing_since=since)
    by_address = {m.address: members[m.address] for m in ordered}
    return Display(now, by_address, tuple(clusters), incarnations)


def _replaced(
    old: MemberState,
    members: Mapping[str, MemberState],
    incarnations: Mapping[tuple[str, str], tuple[str, ...]],
) -> bool:
    """True if a later incarnation of ``old``'s name answered this round (``old`` did not)."""
    seen = incarnations.get((old.cluster, old.name), ())
    later = seen[seen.index(old.address) + 1 :] if old.address in seen else ()
    return any(address in members for address in later)


def _member(answer: Mapping[str, Any], old: MemberState | None, now: float) -> MemberState:
    stats: Mapping[str, Mapping[str, Any]] = answer.get("stats") or {}
    layers = answer.get("stack") or [{"protocol": name} for name in stats]
    properties = {layer["protocol"]: layer.get("properties") or {} for layer in layers}
    queues: Mapping[str, int] = (answer.get("host") or {}).get("queues") or {}
    before: Mapping[str, Mapping[str, Any]] = {} if old is None else old.answer.get("stats", {})
    dt = 0.0 if old is None else float(answer.get("time", now)) - _time(old)
    grown = set() if old is None else set(old.grown)
    fallen = set() if old is None else set(old.fallen)
    for name in properties:
        _trend(name, stats.get(name, {}), before.get(name), grown, fallen)
    counting = grown - fallen
    protocols = tuple(
        _protocol(
            name, stats.get(name, {}), before.get(name), dt, props, queues.get(name, 0), counting
        )
        for name, props in properties.items()
    )
    history = () if old is None else old.throughput
    throughput = _throughput(stats, before, dt, next(iter(properties), None))
    if throughput is not None:
        history = (*history, throughput)[-SPARK_LENGTH:]
    return MemberState(
        address=str(answer["address"]),
        name=str(answer.get("name", "")),
        cluster=str(answer.get("cluster", "")),
        pid=int(answer.get("pid", 0)),
        view=_view(answer.get("view")),
        protocols=protocols,
        throughput=history,
        last_seen=now,
        silent=False,
        answer=answer,
        grown=frozenset(grown),
        fallen=frozenset(fallen),
    )


def _trend(
    layer: str,
    stats: Mapping[str, Any],
    before: Mapping[str, Any] | None,
    grown: set[str],
    fallen: set[str],
) -> None:
    """Note which of ``layer``'s numeric stats grew and which went down since ``before``.

    A key that went down to 0 may be a counter that was reset (a probe's
    reset zeroes them): only one that went down to another value is a gauge.
    """
    if before is None:
        return
    for key, value in stats.items():
        old = before.get(key)
        if not isinstance(value, int | float) or not isinstance(old, int | float):
            continue
        if value > old:
            grown.add(f"{layer}.{key}")
        elif 0 < value < old:
            fallen.add(f"{layer}.{key}")


def _time(member: MemberState) -> float:
    return float(member.answer.get("time", member.last_seen))


def _view(raw: Mapping[str, Any] | None) -> ViewInfo | None:
    if not raw:
        return None
    return ViewInfo(
        int(raw["id"]),
        str(raw["coord"]),
        tuple(map(str, raw.get("members", ()))),
        tuple(map(str, raw.get("member_ids", ()))),
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _protocol(
    name: str,
    stats: Mapping[str, Any],
    before: Mapping[str, Any] | None,
    dt: float,
    properties: Mapping[str, Any],
    queue: int,
    counting: set[str],
) -> ProtocolState:
    counters = []
    for key, value in stats.items():
        if not _is_number(value):
            continue
        rate = None
        old = None if before is None else before.get(key)
        counter = f"{name}.{key}" in counting and not NOT_RATES.search(key)
        if counter and dt > 0 and _is_number(old) and value >= old:
            rate = (value - old) / dt
        counters.append(Counter(key, value, rate))
    return ProtocolState(
        name,
        tuple(counters),
        _windows(stats, properties),
        _credits(stats, properties),
        _warnings(stats, counters),
        properties,
        queue,
    )


def _span(snapshot: Mapping[str, Any]) -> tuple[int, int] | None:
    for low, high in _SPANS:
        if _is_number(snapshot.get(low)) and _is_number(snapshot.get(high)):
            return int(snapshot[low]), int(snapshot[high])
    return None


def _windows(stats: Mapping[str, Any], properties: Mapping[str, Any]) -> tuple[Bar, ...]:
    capacity = next((properties[p] for p in _CAPACITIES if _is_number(properties.get(p))), None)
    if not capacity:
        return ()
    bars = []
    shared = stats.get(PEER_WINDOWS)
    for key, value in {PEER_WINDOWS: shared}.items() if shared else stats.items():
        if not isinstance(value, Mapping):
            continue
        entries = [(key, value)] if _span(value) else [(f"{key} {k}", v) for k, v in value.items()]
        for label, snapshot in entries:
            span = _span(snapshot) if isinstance(snapshot, Mapping) else None
            if span is None:
                continue
            low, high = span
            used = high - low
            bars.append(Bar(label, min(1.0, used / capacity), f"{used}/{capacity}"))
    return tuple(bars)


def _credits(stats: Mapping[str, Any], properties: Mapping[str, Any]) -> tuple[Bar, ...]:
    credits, most = stats.get("sender_credits"), properties.get("max_credits")
    if not isinstance(credits, Mapping) or not _is_number(most) or not most:
        return ()
    return tuple(
        Bar(f"credits {peer}", max(0.0, min(1.0, left / most)), f"{left}/{most}")
        for peer, left in credits.items()
        if _is_number(left)
    )


def _warnings(stats: Mapping[str, Any], counters: Sequence[Counter]) -> tuple[str, ...]:
    found = []
    names = {c.name for c in counters}
    summed = SHARED_RETRANSMIT_COUNTERS if "retransmitted" in names else RETRANSMIT_COUNTERS
    xmits = [c.rate for c in counters if c.name in summed and c.rate]
    if xmits:
        found.append(f"xmit {sum(xmits):.1f}/s")
    for key in SUSPECT_LISTS:
        suspects = stats.get(key)
        if isinstance(suspects, list | tuple) and suspects:
            found.append(f"{key} {', '.join(map(str, suspects))}")
    if stats.get("blocked") is True:
        found.append("senders blocked")
    return tuple(found)


def _throughput(
    stats: Mapping[str, Mapping[str, Any]],
    before: Mapping[str, Mapping[str, Any]],
    dt: float,
    transport: str | None,
) -> float | None:
    """Messages in and out per second at the transport (the bottom layer); None without an
    earlier answer."""
    if transport is None or dt <= 0:
        return None
    now, old = stats.get(transport) or {}, before.get(transport) or {}
    rates = []
    for key in THROUGHPUT_COUNTERS:
        value, was = now.get(key), old.get(key)
        if isinstance(value, int | float) and isinstance(was, int | float) and value >= was:
            rates.append((value - was) / dt)
    return sum(rates) if rates else None


def _cluster(
    name: str,
    members: Sequence[MemberState],
    before: Mapping[str, MemberState],
    now: float,
    grace: float,
) -> tuple[ClusterState, set[str], dict[str, float]]:
    """The cluster's views and who disagrees; the addresses of the members that left, and
    of those changing views (with since when)."""
    left = {m.address for m in members if m.gms_state == GMS_LEFT}
    holders = [m for m in members if m.answered and m.view is not None and m.address not in left]
    views = _rank(holders)
    changing: dict[str, float] = {}
    if views:
        main = views[0].view
        ids = set(main.member_ids)
        for m in members:
            if m.address not in ids and (m.gms_state == GMS_LEAVING or not m.answered):
                left.add(m.address)
        for group in views[1:]:
            for address in group.holders:
                old = before.get(address)
                since = now if old is None or old.changing_since is None else old.changing_since
                if address in ids and now - since < grace:
                    changing[address] = since
        views = _rank([m for m in holders if m.address not in left and m.address not in changing])
    disagreeing = frozenset(a for group in views[1:] for a in group.holders)
    cluster = ClusterState(name, tuple(m.address for m in members), views, disagreeing)
    return cluster, left, changing


def _rank(members: Sequence[MemberState]) -> tuple[ViewGroup, ...]:
    """The distinct views of ``members``, held by most first (on a tie, the highest id)."""
    groups: dict[ViewInfo, list[str]] = {}
    for member in members:
        assert member.view is not None
        groups.setdefault(member.view, []).append(member.address)
    ranked = sorted(groups.items(), key=lambda item: (-len(item[1]), -item[0].id, item[0].coord))
    return tuple(ViewGroup(view, tuple(holders)) for view, holders in ranked)
