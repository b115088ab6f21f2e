"""The history checker's **total_order** rule: members that went through views together
delivered the totally ordered multicasts they share in one order.

The rule is stated in `triogroups.testing._history`; `check_total_order` is run by
`check_histories` (`_history_check`) beside the other rules.
"""

from __future__ import annotations

from bisect import bisect_left

from triogroups.testing._history_index import HistoryViolation, Member, view_id
from triogroups.testing._history_records import Line
from triogroups.testing._outages import Outages

__all__ = ["check_total_order"]


def _total_deliveries(members: dict[str, Member], r: Member) -> list[tuple[int, Line]]:
    """R's deliveries of totally ordered multicasts, in order, each with the index of the
    view R had then (deliveries before its first view are left out)."""
    out = []
    i = -1
    for line in r.history.lines:
        kind = line.record["k"]
        if kind == "view":
            i += 1
        elif kind == "deliver" and i >= 0:
            s = members.get(line.record["from"])
            send = s.sends.get(line.record["id"]) if s is not None else None
            if send is not None and send.record.get("total"):
                out.append((i, line))
    return out


def _stretches(a: Member, b: Member) -> list[tuple[range, range]]:
    """The stretches of views A and B went through together (see **total_order**): per
    stretch, the range of A's view indices and the range of B's."""
    at_b = {view_id(line): j for j, line in enumerate(b.views)}

    def both_in(line: Line) -> bool:
        return a.uuid in line.record["members"] and b.uuid in line.record["members"]

    out = []
    i = 0
    while i < len(a.views):
        j = at_b.get(view_id(a.views[i]))
        if j is None or not both_in(a.views[i]):
            i += 1
            continue
        i0, j0 = i, j
        while (
            i + 1 < len(a.views)
            and j + 1 < len(b.views)
            and view_id(a.views[i + 1]) == view_id(b.views[j + 1])
            and both_in(a.views[i + 1])
        ):
            i, j = i + 1, j + 1
        out.append((range(i0, i + 1), range(j0, j + 1)))
        i += 1
    return out


def check_total_order(members: dict[str, Member], outages: Outages) -> list[HistoryViolation]:
    out = []
    ordered = {m.uuid: _total_deliveries(members, m) for m in members.values()}
    installed = {m.uuid: {view_id(line) for line in m.views} for m in members.values()}
    nexts: dict[tuple[int, str], list[tuple[str, Line]]] = {}  # view id -> (member, its next)
    for m in members.values():
        for line, after in zip(m.views, m.views[1:], strict=False):
            nexts.setdefault(view_id(line), []).append((m.uuid, after))

    def sent_in(key: tuple[str, str]) -> tuple[int, str] | None:
        s = members[key[0]]
        i = s.view_at_send.get(key[1], -1)
        return view_id(s.views[i]) if i >= 0 else None

    some = [m for m in members.values() if ordered[m.uuid]]
    for x, a in enumerate(some):
        for b in some[x + 1 :]:
            both = installed[a.uuid] & installed[b.uuid]
            for views_a, views_b in _stretches(a, b):
                until_a = _split_off(b, views_b, a, nexts, outages)
                until_b = _split_off(a, views_a, b, nexts, outages)
                first_a = _first_deliveries(ordered[a.uuid], views_a, until_a)
                first_b = _first_deliveries(ordered[b.uuid], views_b, until_b)
                common = {k for k in first_a.keys() & first_b.keys() if sent_in(k) in both}
                seq_a = [key for key in first_a if key in common]
                seq_b = [key for key in first_b if key in common]
                if seq_a == seq_b:
                    continue
                k = next(n for n, (p, q) in enumerate(zip(seq_a, seq_b, strict=True)) if p != q)
                early, late = seq_a[k], seq_b[k]  # A: early before late; B: late before early
                text = (
                    f"{a.history.name} delivered {early[1]!r} before {late[1]!r}, "
                    f"{b.history.name} {late[1]!r} before {early[1]!r}, though both went "
                    f"through views {list(view_id(a.views[views_a[0]]))} to "
                    f"{list(view_id(a.views[views_a[-1]]))} together"
                )
                excerpt = (
                    a.views[views_a[0]],
                    first_a[early],
                    first_a[late],
                    first_b[late],
                    first_b[early],
                )
                out.append(HistoryViolation("total_order", text, excerpt))
    return out


def _split_off(
    other: Member,
    views: range,
    member: Member,
    nexts: dict[tuple[int, str], list[tuple[str, Line]]],
    outages: Outages,
) -> float:
    """When ``member`` split off from ``other``'s side, else infinity: if the view after the
    stretch ``views`` (``other``'s view indices) left ``member`` out, ``member``'s
    deliveries after that view were made split off, in a view the rest had left (campaign
    tcp-total-blocks seed 70046: D, paused through the coordinator's change and then
    removed, delivered at its resume the order of B, the old coordinator, itself paused
    and excluded, in the view the others had left 1.1 s before), and a merge does not
    reconcile two sides' orders. If the two could not reach each other from some time
    until that view, the split began then: the view only noticed it (campaign
    udp-total-blocks seed 507: D, the coordinator of its subgroup, ordered and delivered
    F1-16 in its old view as a one-way split began that kept everyone from hearing it,
    until the view that removed it 3.4 s later; its log never reached the merge view's
    coordinator, which ordered F1-16 after A1-6). The view after the stretch is
    ``other``'s next; if ``other``'s history has none (it left or crashed in the
    stretch's last view), the next view of the others that went on from that view, if
    every one of them left ``member`` out (507: I left just before that view)."""
    nxt = views.stop
    if nxt < len(other.views):
        line = other.views[nxt]
        if member.uuid in line.record["members"]:
            return float("inf")
        t = float(line.record["t"])
    else:
        after = [v for m, v in nexts.get(view_id(other.views[nxt - 1]), []) if m != member.uuid]
        if not after or any(member.uuid in v.record["members"] for v in after):
            return float("inf")
        t = min(float(v.record["t"]) for v in after)
    return min(t, outages.apart_since(member.history.name, other.history.name, t))


def _first_deliveries(
    deliveries: list[tuple[int, Line]], views: range, until: float
) -> dict[tuple[str, str], Line]:
    """(sender, id) -> the first delivery made in one of ``views`` by ``until``, in
    delivery order (``deliveries`` are in order, so their view indices never fall: a
    slice)."""
    lo = bisect_left(deliveries, views.start, key=lambda d: d[0])
    hi = bisect_left(deliveries, views.stop, key=lambda d: d[0])
    first: dict[tuple[str, str], Line] = {}
    for _, line in deliveries[lo:hi]:
        if float(line.record["t"]) > until:
            break
        first.setdefault((line.record["from"], line.record["id"]), line)
    return first
