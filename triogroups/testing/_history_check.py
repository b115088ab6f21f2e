"""The history checker: every violation of the delivery contract in a finished run's files.

`check_histories` returns each broken rule with the smallest excerpt that shows
it; `assert_histories` raises on the first. The rules and the record format
are in `triogroups.testing._history`. Each rule reads the histories indexed by
`_history_index`; a rule with a module of its own (**total_order**, in
`_history_total_order`) is gathered here with the rest.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from triogroups.testing._history_blocks import check_blocks
from triogroups.testing._history_index import Member, heir, index_member, view_id
from triogroups.testing._history_missing import check_missing
from triogroups.testing._history_records import History, HistoryViolation, Line
from triogroups.testing._history_total_order import check_total_order
from triogroups.testing._outages import Outages, cuts_off

__all__ = ["HistoryError", "HistoryViolation", "assert_histories", "check_histories"]


class HistoryError(AssertionError):
    """Raised by `assert_histories`: the run broke the contract."""


def check_histories(
    histories: Iterable[History],
    *,
    settle: float = 10.0,
    resume_within: float = 30.0,
    max_rss: int | None = None,
    max_window: int | None = None,
) -> list[HistoryViolation]:
    """Every violation of the rules in the module docstring, each with its excerpt."""
    histories = list(histories)
    members = {h.member: index_member(h) for h in histories if h.member is not None}
    faults = [line for h in histories if h.member is None for line in h.of("fault")]
    out: list[HistoryViolation] = []
    heals = [float(f.record["t"]) for f in faults if f.record["kind"] == "heal"]
    outages = Outages(faults)
    out += _check_views(members, settle, heals, outages)
    out += _check_deliveries(members)
    out += check_total_order(members, outages)
    out += check_missing(members, settle, outages)
    out += _check_flushed_leaves(members, settle)
    out += _check_memory(members, max_rss, max_window)
    out += _check_heals(members, faults, resume_within)
    out += check_blocks(histories)
    return out


def assert_histories(histories: Iterable[History], **limits: Any) -> None:
    """Raise `HistoryError` with the first violations (and how many there were)."""
    found = check_histories(histories, **limits)
    if found:
        shown = "\n".join(str(v) for v in found[:3])
        raise HistoryError(f"{len(found)} violation(s) of the delivery contract:\n{shown}")


def _check_views(
    members: dict[str, Member], settle: float, heals: list[float], outages: Outages
) -> list[HistoryViolation]:
    out = []
    names: dict[tuple[int, str], Line] = {}
    for m in members.values():
        for before, after in zip(m.views, m.views[1:], strict=False):
            if view_id(after)[0] <= view_id(before)[0]:
                out.append(HistoryViolation("view_id", "view ids must grow", (before, after)))
        for line in m.views:
            first = names.setdefault(view_id(line), line)
            if first.record["members"] != line.record["members"]:
                text = f"view {list(view_id(line))} has two memberships"
                out.append(HistoryViolation("view_members", text, (first, line)))
    # successor agreement, pairwise over views both installed
    where: dict[tuple[int, str], list[tuple[Member, int]]] = defaultdict(list)
    for m in members.values():
        for i, line in enumerate(m.views):
            where[view_id(line)].append((m, i))
    for installs in where.values():
        for x, (a, i) in enumerate(installs):
            for b, j in installs[x + 1 :]:
                if i + 1 >= len(a.views) or j + 1 >= len(b.views):
                    continue
                na, nb = a.views[i + 1], b.views[j + 1]
                stayed = b.uuid in na.record["members"] and a.uuid in nb.record["members"]
                if not stayed or view_id(na) == view_id(nb):
                    continue
                if _missed_excused(members, na, a, b, settle, heals, outages) and _missed_excused(
                    members, nb, b, a, settle, heals, outages
                ):
                    continue
                text = (
                    f"{a.history.name} and {b.history.name} stayed together after "
                    f"view {list(view_id(a.views[i]))} but installed different next views"
                )
                excerpt = (a.views[i], na, b.views[j], nb)
                out.append(HistoryViolation("view_order", text, excerpt))
    return out


def _missed_excused(
    members: dict[str, Member],
    view: Line,
    peer: Member,
    skipper: Member,
    settle: float,
    heals: list[float],
    outages: Outages,
) -> bool:
    """Whether ``skipper``, which installed another view where ``peer`` installed ``view``, may
    lack ``view``: it installed it after all, or it caught up within ``settle`` seconds of
    the view (`_caught_up`; of the end of the view's coordinator, if that came within
    ``settle`` seconds of the view), or it was excluded meanwhile and merged back: a view
    the peer or another member that installed ``view`` installed after it
    (`_later_views`), within ``settle`` seconds of it, lacks the skipper,
    and the skipper caught up with that one within ``settle`` seconds of it or of a ``heal``
    fault after it (campaign udp seed 2281: pauses and partitions kept B apart from 5.4 s to
    19.7 s, and the merge view took it back 0.1 s after the last heal). A member left out of
    the next view was unreachable (suspected and removed: a partition, a pause), so it was
    in no position to get ``view`` either, and rejoining is then MERGE3's business (chaos
    run udp-mcast seed 1015048817: a one-way partition, 9% loss and a pause kept view 81
    from A, view 82 removed A 5 s later, and the merge view 83 took it back 7 s after that)."""
    vid = view_id(view)
    if any(view_id(line) == vid for line in skipper.views):
        return True
    t = _installed_at(members, view)
    coord = members.get(vid[1])
    if coord is not None and t < coord.history.end < t + settle:
        # Its coordinator went (crashed or left) before it could retransmit the view:
        # the skipper learns that only from failure detection, so it has ``settle``
        # seconds from then (chaos run udp-mcast seed 1633779744: loss kept view 51 from
        # C, its coordinator D left 2.4 s later, and C, D's heir, installed a newer view
        # 9.8 s after that, when its takeover had raced a merge).
        t = coord.history.end
    if _caught_up(skipper, vid[0], t, settle):
        return True
    caught = _caught_up_at(skipper, vid[0])
    # The faults kept the pair apart for all but a few of those seconds (a one-way split,
    # then a pause of the heir coordinator until the quiet heal), so no view could reach
    # the skipper sooner: count only the seconds they could talk, as **missing** does
    # (campaign udp-mcast seed 10357); and those in which the coordinator of the peer's
    # view could talk with the skipper (`_coordinators_connected`, seed 61399).
    if outages.connected(skipper.history.name, peer.history.name, t, caught) < settle:
        return True
    if _coordinators_connected(members, peer, skipper, t, caught, outages) < settle:
        return True
    for t_out, line in _later_views(members, view, peer):
        if skipper.uuid in line.record["members"]:
            continue
        if t_out > t + settle:
            return False
        # Merged back within ``settle`` seconds of its removal, or of a heal after it:
        # while the network keeps it apart, no merge can take it back.
        since = [t_out] + [h for h in heals if h >= t_out]
        return any(_caught_up(skipper, view_id(line)[0], s, settle) for s in since)
    return False


def _coordinators_connected(
    members: dict[str, Member],
    peer: Member,
    skipper: Member,
    start: float,
    end: float,
    outages: Outages,
) -> float:
    """Seconds within [start, end] in which ``skipper`` could talk both ways with the
    coordinator of the view ``peer`` had then.

    A view, and a merge, comes from a coordinator: the skipper catches up with the peer
    only when the coordinator of the peer's view takes it into its next view or leads
    (or answers) the merge that brings it back; MERGE3 picks a coordinator to lead. While
    that coordinator cannot hear the skipper or is paused, no view reaches it however
    well the skipper and the peer talk (campaign udp-mcast seed 61399: C missed B's
    view 5 across a partition and B was killed; F's merge view 6, which C's old view
    was no subgroup of, kept C as a member, and F, its coordinator, heard nobody, then
    not C, then was paused: 2.4 s of the 11.3 s until the merge that took C back).
    Only those outages are taken off. Once the coordinator's history ended (it crashed
    or left), failure detection hands its part to its heir (`heir`), and the seconds in
    which the heir could not talk with the skipper are taken off too (campaign udp-total
    seed 70033: loss kept B's view 8 from D, B was killed 0.24 s later, and E, B's heir,
    was paused for 5.2 of the 10.8 s until its own view took D on). After the heir's
    history ended, after the peer's, or for a coordinator with no history, every second
    counts."""
    lost = 0.0
    views = peer.views
    for k, line in enumerate(views):
        since = float(line.record["t"])
        until = float(views[k + 1].record["t"]) if k + 1 < len(views) else peer.history.end
        coord = members.get(view_id(line)[1])
        if coord is None or coord is skipper:
            continue
        lo, hi = max(since, start), min(until, end)
        gone = coord.history.end
        lost += _apart(skipper, coord, lo, min(hi, gone), outages)
        successor = heir(members, line, coord, gone)
        if successor is not None and successor is not skipper:
            until_gone = min(hi, successor.history.end)
            lost += _apart(skipper, successor, max(lo, gone), until_gone, outages)
    return max(0.0, end - start - lost)


def _apart(skipper: Member, other: Member, lo: float, hi: float, outages: Outages) -> float:
    """Seconds within [lo, hi] in which ``skipper`` and ``other`` could not talk."""
    if hi <= lo:
        return 0.0
    return (hi - lo) - outages.connected(skipper.history.name, other.history.name, lo, hi)


def _later_views(members: dict[str, Member], view: Line, peer: Member) -> list[tuple[float, Line]]:
    """The views newer than ``view`` that ``peer`` or any other member that installed
    ``view`` installed afterwards, by when their coordinators installed them: who removed
    a member from ``view``'s line of views shows only in the histories that go on (campaign
    udp-mcast seed 2200: A, the peer, left before B's view 4 removed D, which it never
    installed)."""
    vid = view_id(view)
    found: dict[tuple[int, str], tuple[float, Line]] = {}
    for m in [peer, *members.values()]:
        if m is not peer and not any(view_id(line) == vid for line in m.views):
            continue
        for line in m.views:
            if view_id(line)[0] > vid[0] and view_id(line) not in found:
                found[view_id(line)] = (_installed_at(members, line), line)
    return sorted(found.values(), key=lambda pair: pair[0])


def _installed_at(members: dict[str, Member], view: Line) -> float:
    """When ``view``'s coordinator installed it (else when this line's member did)."""
    vid = view_id(view)
    coord = members.get(vid[1])
    at = [line for line in coord.views if view_id(line) == vid] if coord is not None else []
    return float(at[0].record["t"]) if at else float(view.record["t"])


def _caught_up(skipper: Member, counter: int, t: float, settle: float) -> bool:
    """Whether ``skipper``'s history ended within ``settle`` seconds of ``t``, or within
    that time it installed a view with a counter of at least ``counter`` (the next view
    supersedes one that could not reach it: its coordinator crashed, was paused or
    partitioned from it, or a merge view was overtaken; or two coordinators installed the
    same counter at once, as a merge and a view change in one subgroup can: MERGE3 heals
    that)."""
    if skipper.history.end < t + settle:
        return True
    return any(
        view_id(line)[0] >= counter and float(line.record["t"]) <= t + settle
        for line in skipper.views
    )


def _caught_up_at(skipper: Member, counter: int) -> float:
    """When ``skipper`` first installed a view with a counter of at least ``counter``, else
    when its history ended."""
    at = [float(line.record["t"]) for line in skipper.views if view_id(line)[0] >= counter]
    return min(at) if at else skipper.history.end


def _check_deliveries(members: dict[str, Member]) -> list[HistoryViolation]:
    out = []
    for r in members.values():
        seen: dict[tuple[str, str], Line] = {}
        last: dict[tuple[str, bool], tuple[int, Line]] = {}
        for line in r.history.of("deliver"):
            src, msg_id = line.record["from"], line.record["id"]
            s = members.get(src)
            send = s.sends.get(msg_id) if s is not None else None
            if send is None or send.record["to"] not in (None, r.uuid):
                text = f"{r.history.name} delivered {msg_id!r} that {src[:8]} never sent to it"
                out.append(HistoryViolation("unknown", text, (line,)))
                continue
            assert s is not None
            first = seen.get((src, msg_id))
            if first is not None:
                text = f"{r.history.name} delivered {msg_id!r} from {s.history.name} twice"
                out.append(HistoryViolation("duplicate", text, (send, first, line)))
                continue
            seen[(src, msg_id)] = line
            if send.record["oob"]:
                continue
            stream = (src, send.record["to"] is None)
            position = s.send_order[msg_id]
            previous = last.get(stream)
            if previous is not None and previous[0] > position:
                prev_line = previous[1]
                prev_send = s.sends[prev_line.record["id"]]
                text = (
                    f"{r.history.name} delivered {msg_id!r} from {s.history.name} after "
                    f"{prev_line.record['id']!r}, which was sent later"
                )
                excerpt = (send, prev_send, prev_line, line)
                out.append(HistoryViolation("fifo", text, excerpt))
            last[stream] = (position, line)
    return out


def _views_with(r: Member, sender: str) -> list[tuple[tuple[int, str], bool]]:
    """R's views in order, each with whether it held ``sender``."""
    return [(view_id(v), sender in v.record["members"]) for v in r.views]


def _stayed_with(views: list[tuple[tuple[int, str], bool]], span: list[tuple[int, str]]) -> bool:
    """R installed every view of ``span`` (the sender's, from a send to its leave), and
    no view between the first and the last of them left the sender out."""
    ids = [vid for vid, _ in views]
    if not set(span).issubset(ids):
        return False
    first, last = ids.index(span[0]), ids.index(span[-1])
    return all(held for _, held in views[first : last + 1])


def _gone_view(later: list[Line], sender: str, left_at: float) -> tuple[Line, float] | None:
    """Of R's views after the sender's last one (``later``): the view without the sender
    that R went on in, and since when R was with the sender again (-inf if all along).

    None if R's next view held the sender (R installed a view the sender never did) or R
    never installed a view without it. A view without the sender that R left for one
    holding it again, before the sender left, was a split, not the leave: R was merged
    back, its window for the sender started afresh at the merge digest, and only what
    the sender sent from then on is owed (campaign udp-mcast seed 50545: E installed a
    singleton view, was merged back with F in a view F never installed, and F left
    flushed from the view it still had with E)."""
    if not later or sender in later[0].record["members"]:
        return None
    since, i = float("-inf"), 0
    while True:
        again = next(
            (
                k
                for k in range(i + 1, len(later))
                if sender in later[k].record["members"] and float(later[k].record["t"]) <= left_at
            ),
            None,
        )
        if again is None:
            return later[i], since
        since = float(later[again].record["t"])
        i = next(
            (k for k in range(again + 1, len(later)) if sender not in later[k].record["members"]),
            -1,
        )
        if i < 0:
            return None


def _check_flushed_leaves(members: dict[str, Member], settle: float) -> list[HistoryViolation]:
    out = []
    for s in members.values():
        leave = next((line for line in s.history.of("leave") if line.record["flushed"]), None)
        if leave is None:
            continue
        before = [v for v in s.views if v.record["t"] <= leave.record["t"]]
        if not before:
            continue
        final = before[-1]
        stayed: list[tuple[Member, Line]] = []  # R and the view without S it went on in
        back: dict[str, float] = {}  # R: when it was merged back with S after a split
        for uuid in final.record["members"]:
            r = members.get(uuid)
            if r is None or r is s:
                continue
            js = [j for j, line in enumerate(r.views) if view_id(line) == view_id(final)]
            if not js:
                continue
            gone = _gone_view(r.views[js[0] + 1 :], s.uuid, float(leave.record["t"]))
            if gone is None:
                continue
            after, since = gone
            if r.history.end - float(after.record["t"]) >= settle:
                stayed.append((r, after))
                back[r.uuid] = since
        got = {
            r.uuid: {d.record["id"] for d in r.history.of("deliver") if d.record["from"] == s.uuid}
            for r, _ in stayed
        }
        together = {r.uuid: _views_with(r, s.uuid) for r, _ in stayed}
        for msg_id, send in s.sends.items():
            i = s.view_at_send[msg_id]
            if send.record["oob"] or send.record["to"] is not None or i < 0:
                continue
            if send.record["t"] > leave.record["t"]:
                continue
            # owed only to a member that was with S in every view S installed from the
            # send to its leave: one merged back in between was owed nothing sent apart
            span = [view_id(v) for v in s.views[i : s.views.index(final) + 1]]
            for r, after in stayed:
                if not _stayed_with(together[r.uuid], span):
                    continue
                if float(send.record["t"]) < back[r.uuid]:
                    continue  # sent before R split off and was merged back
                if msg_id in got[r.uuid]:
                    continue
                text = (
                    f"{r.history.name} never delivered {msg_id!r} from {s.history.name}, "
                    f"which left with flushed true"
                )
                excerpt = (send, leave, final, after, r.history.lines[-1])
                out.append(HistoryViolation("flushed_leave", text, excerpt))
    return out


def _check_memory(
    members: dict[str, Member], max_rss: int | None, max_window: int | None
) -> list[HistoryViolation]:
    out = []
    for m in members.values():
        for line in m.history.of("sample"):
            rss, windows = line.record.get("rss", 0), line.record.get("windows", {})
            if max_rss is not None and rss > max_rss:
                text = f"{m.history.name} used {rss} bytes, above max_rss {max_rss}"
                out.append(HistoryViolation("memory", text, (line,)))
                break
            big = {k: v for k, v in windows.items() if max_window is not None and v > max_window}
            if big:
                text = f"{m.history.name} held {big}, above max_window {max_window}"
                out.append(HistoryViolation("memory", text, (line,)))
                break
    return out


def _check_heals(
    members: dict[str, Member], faults: list[Line], resume_within: float
) -> list[HistoryViolation]:
    """**no_traffic_after_heal**. A heal asks nothing of a member that a later fault cuts
    off, pauses or kills within ``resume_within`` (the real chaos runner records every
    split's end as a heal, and its schedule may cut the member off again seconds later), nor
    when no other member sent anything in that time (nothing could be delivered). A member
    that never resumes is still caught at the quiet period's heal, which no fault follows."""
    out = []
    send_time = {
        (m.uuid, msg_id): float(line.record["t"])
        for m in members.values()
        for msg_id, line in m.sends.items()
    }
    sends = sorted((when, src) for (src, _), when in send_time.items())
    for heal in (f for f in faults if f.record["kind"] == "heal"):
        t = float(heal.record["t"])
        window = sends[bisect_left(sends, (t, "")) : bisect_right(sends, (t + resume_within, "~"))]
        senders = {src for _, src in window}
        later = [
            f.record
            for f in faults
            if t < float(f.record["t"]) <= t + resume_within and f.record["kind"] != "heal"
        ]
        for r in members.values():
            start = float(r.history.lines[0].record["t"])
            if not r.history.traffic or start > t or r.history.end < t + resume_within:
                continue
            if any(cuts_off(f["kind"], str(f.get("detail", "")), r.history.name) for f in later):
                continue
            if not senders - {r.uuid}:
                continue
            resumed = any(
                t <= float(d.record["t"]) <= t + resume_within
                and d.record["from"] != r.uuid
                and send_time.get((d.record["from"], d.record["id"]), -1.0) >= t
                for d in r.history.of("deliver")
            )
            if not resumed:
                text = (
                    f"{r.history.name} delivered nothing another member sent after the heal "
                    f"within {resume_within} s"
                )
                views = [v for v in r.views if float(v.record["t"]) <= t + resume_within]
                excerpt = (heal, *views[-1:], r.history.lines[-1])
                out.append(HistoryViolation("no_traffic_after_heal", text, excerpt))
    return out
