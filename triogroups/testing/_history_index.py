"""A finished run's histories indexed for the checks.

`index_member` reads one incarnation's history once into a `Member` (its views,
its sends in order, the view each was sent in); every rule of the checker
(`_history_check`, `_history_total_order`, and checkers added beside them) works
on these and reports a `HistoryViolation` (defined beside the records in
`_history_records`, which the lock and counter rules use without this index;
re-exported here). Kept apart so a new rule's module imports this and not the
checker that gathers the rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from triogroups.testing._history_records import History, HistoryViolation, Line

__all__ = ["HistoryViolation", "Member", "heir", "index_member", "view_id"]


@dataclass
class Member:
    """One incarnation, indexed for the checks (`index_member`)."""

    history: History
    views: list[Line]  # view records, in order
    sends: dict[str, Line]  # id -> send record
    send_order: dict[str, int]
    view_at_send: dict[str, int]  # id -> index into views (-1: before any view)
    taken_at: dict[str, float]  # id -> when the stack took a send that waited (`taken`)
    # id -> when the sender delivered its own regular multicast (not one in the total
    # order), where that came after the send (and its ``taken``): see `sent_at`
    own_at: dict[str, float]

    def sent_at(self, msg_id: str) -> float:
        """When the send ``msg_id`` entered the group, as far as the history tells: the
        stack took it (``taken``, else the send), or, later, its sender delivered it
        itself. A sender delivers its own multicast when the reliability layer numbers
        and sends it (NAKACK2 at once, MCAST when its window has room): a multicast that
        waited in MCAST's full window (the first sends after the window filled do; the
        rest wait at the top of the stack, ``taken``) was no more on its way to anyone
        than one waiting above (campaign udp-mcast 60185: I1-32 waited 19 s in I's
        window behind a member deaf to I and then in a singleton view, while the
        coordinator was paused; D, killed 10.9 s after the send, was held to it)."""
        at = self.taken_at.get(msg_id, float(self.sends[msg_id].record["t"]))
        return max(at, self.own_at.get(msg_id, at))

    @property
    def uuid(self) -> str:
        assert self.history.member is not None
        return self.history.member


def index_member(history: History) -> Member:
    """``history``'s views, sends and waiting sends, read once."""
    views: list[Line] = []
    sends: dict[str, Line] = {}
    order: dict[str, int] = {}
    at: dict[str, int] = {}
    taken: dict[str, float] = {}
    own: dict[str, float] = {}
    me = history.member
    for line in history.lines:
        kind = line.record["k"]
        if kind == "deliver":
            record = line.record
            msg_id = record["id"]
            if record["from"] == me and msg_id in sends:
                send = sends[msg_id].record
                if send["to"] is None and not send["oob"] and not send.get("total"):
                    own[msg_id] = float(record["t"])
            continue
        if kind == "view":
            views.append(line)
        elif kind == "send":
            msg_id = line.record["id"]
            sends[msg_id] = line
            order[msg_id] = len(order)
            at[msg_id] = len(views) - 1
        elif kind == "unsent":
            msg_id = line.record["id"]
            sends.pop(msg_id, None)
            order.pop(msg_id, None)
            at.pop(msg_id, None)
        elif kind == "taken":
            taken[line.record["id"]] = float(line.record["t"])
    return Member(history, views, sends, order, at, taken, own)


def view_id(line: Line) -> tuple[int, str]:
    """A view record's id: (counter, coordinator)."""
    counter, coord = line.record["id"]
    return int(counter), str(coord)


def heir(members: dict[str, Member], view: Line, coord: Member, at: float) -> Member | None:
    """The member of ``view`` that takes over from ``coord`` once it is gone at ``at``: the
    first after it in the view's order whose history goes on past ``at`` (None if the next
    one has no history)."""
    for uuid in view.record["members"]:
        member = members.get(uuid)
        if member is coord:
            continue
        if member is None:
            return None
        if member.history.end > at:
            return member
    return None
