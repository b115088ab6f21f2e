"""The history checker's rule **missing** (see `triogroups.testing._history`): every
message a member that stayed with its sender never delivered, though they could talk
for ``settle`` seconds after it entered the group. A totally ordered multicast needs
more than the pair: it goes through the coordinator of the receiver's view (`heir`
says who takes over when that one is gone).
"""

from __future__ import annotations

from triogroups.testing._history_index import Member, heir, view_id
from triogroups.testing._history_records import HistoryViolation
from triogroups.testing._outages import Outages

__all__ = ["check_missing"]


def _together_until(s: Member, r: Member, i: int, j: int) -> float | None:
    """From views s.views[i] == r.views[j]: when S and R stopped being together, or None
    if their next views differ (no guarantee for messages sent in that view)."""
    if s is r:
        return s.history.end
    end = min(s.history.end, r.history.end)
    first = True
    while True:
        i, j = i + 1, j + 1
        ns = s.views[i] if i < len(s.views) else None
        nr = r.views[j] if j < len(r.views) else None
        if ns is None and nr is None:
            return end
        together = (
            ns is not None
            and nr is not None
            and view_id(ns) == view_id(nr)
            and r.uuid in ns.record["members"]
            and s.uuid in ns.record["members"]
        )
        if together and ns is not None and ns.record.get("merge"):
            return min(end, float(ns.record["t"]))
        if not together:
            if first:
                return None
            stops = [float(x.record["t"]) for x in (ns, nr) if x is not None]
            return min([end, *stops])
        first = False


def _owed(
    s: Member,
    r: Member,
    i: int,
    sent_at: float,
    cache: dict[tuple[str, int], tuple[int, float | None]],
    settle: float,
    outages: Outages,
    members: dict[str, Member],
    total: bool,
) -> tuple[int, float, float] | None:
    """Whether R is owed a message S sent in its view ``i`` at ``sent_at`` (rule
    **missing**): R's index of that view, until when they stayed together and how long
    they could talk; None if it is not owed."""
    key = (r.uuid, i)
    if key not in cache:
        vid = view_id(s.views[i])
        js = [j for j, line in enumerate(r.views) if view_id(line) == vid]
        cache[key] = (js[0], _together_until(s, r, i, js[0])) if js else (-1, None)
    j, until = cache[key]
    if until is None or until - sent_at < settle:
        return None
    # the faults kept them apart: no retransmission could get through
    talked = outages.connected(s.history.name, r.history.name, sent_at, until)
    if total and talked >= settle:
        talked = _through_coordinators(members, s, r, j, sent_at, until, outages)
    return None if talked < settle else (j, until, talked)


def _through_coordinators(
    members: dict[str, Member],
    s: Member,
    r: Member,
    j: int,
    start: float,
    end: float,
    outages: Outages,
) -> float:
    """Seconds within [start, end] in which S and R could both talk with the coordinator
    of the view R had then (after that one crashed or left, with its heir): a totally
    ordered multicast reaches R only through it, forwarded by S and ordered by it
    (campaign udp-total-blocks seed 70074: C, the coordinator, could not be heard, and
    A, which took over, could not hear F, then was paused, so F1-13 waited for the
    merge though F and G talked for 11.1 s)."""
    talked = 0.0
    for k in range(j, len(r.views)):
        line = r.views[k]
        lo = max(start, float(line.record["t"]))
        hi = min(end, float(r.views[k + 1].record["t"]) if k + 1 < len(r.views) else end)
        if hi <= lo:
            continue
        coord = members.get(view_id(line)[1])
        if coord is None:
            talked += hi - lo
            continue
        gone = coord.history.end
        successor = heir(members, line, coord, gone)
        for relay, a, b in ((coord, lo, min(hi, gone)), (successor, max(lo, gone), hi)):
            if relay is None or relay in (s, r):
                talked += outages.connected(s.history.name, r.history.name, a, b)
            else:
                names = (s.history.name, relay.history.name, r.history.name)
                talked += outages.connected_via(*names, a, min(b, relay.history.end))
    return talked


def check_missing(
    members: dict[str, Member], settle: float, outages: Outages
) -> list[HistoryViolation]:
    out = []
    delivered: dict[str, set[tuple[str, str]]] = {
        m.uuid: {(d.record["from"], d.record["id"]) for d in m.history.of("deliver")}
        for m in members.values()
    }
    for s in members.values():
        cache: dict[tuple[str, int], tuple[int, float | None]] = {}  # R's view index, until
        for msg_id, send in s.sends.items():
            i = s.view_at_send[msg_id]
            if send.record["oob"] or i < 0:
                continue
            view = s.views[i]
            to = send.record["to"]
            receivers = view.record["members"] if to is None else [to]
            # settle runs from when the send entered the group: while flow control
            # held it back, no layer had it to deliver or retransmit
            sent_at = s.sent_at(msg_id)
            for uuid in receivers:
                r = members.get(uuid)
                if r is None or (s.uuid, msg_id) in delivered[uuid]:
                    continue
                if r is s and send.record.get("loopback") is False:
                    continue
                if r is s and send.record.get("total"):
                    # a totally ordered multicast comes back to its sender through the
                    # coordinator's order, as to everyone: owed to it only when owed to
                    # another member (campaign udp-total 92 and 178: the coordinator's
                    # view left the sender out while its own view kept them all); alone
                    # in its view, it is its own coordinator
                    others = [members[u] for u in receivers if u != s.uuid and u in members]
                    if others and all(
                        _owed(s, o, i, sent_at, cache, settle, outages, members, True) is None
                        for o in others
                    ):
                        continue
                total = bool(send.record.get("total"))
                found = _owed(s, r, i, sent_at, cache, settle, outages, members, total)
                if found is None:
                    continue
                j, until, talked = found
                text = (
                    f"{r.history.name} never delivered {msg_id!r} from {s.history.name}, sent in "
                    f"view {list(view_id(view))}, though they stayed together for "
                    f"{until - sent_at:.1f} s after it ({talked:.1f} s able to talk)"
                )
                excerpt = [view, send, r.views[j]]
                if j + 1 < len(r.views):
                    excerpt.append(r.views[j + 1])
                excerpt.append(r.history.lines[-1])
                out.append(HistoryViolation("missing", text, tuple(excerpt)))
    return out
