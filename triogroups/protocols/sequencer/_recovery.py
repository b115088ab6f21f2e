"""A new coordinator's recovery: the tails it waits for, and which one reaches furthest.

Pure state and a choice; the protocol feeds it TAIL and TAIL_END messages and multicasts
what it chooses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from triogroups.address import Address
from triogroups.message import Message
from triogroups.view import MergeView, View

__all__ = ["ENDS_IN_ORDER", "OTHER_ORDER", "Recovery", "Stamp", "Tail", "old_orders"]

#: A TAIL_END's ``view``: the member's coordinator changed at the view, so its log is of
#: another order than the new coordinator's (0: it stays, the log is of that order) ...
OTHER_ORDER = 1
#: ... or changed, but the last entry of its log is the new coordinator's all the same:
#: it delivered nothing from the coordinators it had since (campaign udp-total-blocks 72230)
ENDS_IN_ORDER = 2

#: Where an order placed a message: (the view counter its coordinator stamped the BCAST
#: with, its NAKACK2 seqno there); (0, 0) unknown. Both grow along one order.
Stamp = tuple[int, int]
#: A tail: (forwarder, its seqno, the message, its stamp), in delivery order.
Tail = list[tuple[Address, int, Message, Stamp]]
Trimmed = tuple[Address | None, int]


class Recovery:
    """The tails of the members of one or more old orders that are in the new view.

    One *group* per old order: after a coordinator change, the members of the previous
    view that stay; at a merge view, the members of each subgroup another coordinator
    ordered. The tails of one group are prefixes of one order; those of two groups are
    not comparable, so the furthest tail is chosen per group.
    """

    def __init__(self) -> None:
        self.awaiting: set[Address] = set()
        self.groups: list[frozenset[Address]] = []
        self.tails: dict[Address, Tail] = {}
        self.trimmed: dict[Address, Trimmed] = {}
        #: members whose coordinator stays (their TAIL_END says so): their logs are of
        #: the new coordinator's own order, which goes on, not of the order awaited
        self.ours: set[Address] = set()
        #: a merge view under us, who ordered a subgroup: our own log goes out again too
        self.resend_ours = False
        #: how many of ``groups`` the view that began the recovery gave: our own log goes
        #: out after them, before those of a later merge view (`choose`)
        self.first = 0
        #: members whose log, though their coordinator changed, ends with our order
        self.ends_ours: set[Address] = set()
        #: a second tail coming from a member whose first is in, at a later view (`end`)
        self.again: dict[Address, Tail] = {}

    def expect(self, groups: Iterable[Iterable[Address]], me: Address) -> None:
        """Wait for the tails of ``groups`` (the old orders one view takes over), ours
        excepted."""
        for group in groups:
            members = frozenset(group)
            self.groups.append(members)
            self.awaiting |= members - {me}
        self.first = self.first or len(self.groups)

    def add(self, member: Address, sender: Address, seqno: int, msg: Message, stamp: Stamp) -> None:
        """One TAIL of ``member``'s, in its order."""
        tails = self.again if member in self.trimmed else self.tails
        tails.setdefault(member, []).append((sender, seqno, msg, stamp))

    def end(self, member: Address, trimmed: Trimmed, order: int) -> None:
        """``member``'s TAIL_END: its tail is complete; ``order`` (the TAIL_END's
        ``view``): 0 if its coordinator stays, else `OTHER_ORDER` or `ENDS_IN_ORDER`.

        A member whose tail is in sends another at a later view of this recovery (a merge
        view awaits it again). If its coordinator stayed, that is us: we ordered nothing
        while we waited, so its log is the one it sent, and the first tail stands, with the
        order it named (campaign udp-total 72366: A took over I's order at view 7 and got
        H's and G's logs, which alone held I's last BCASTs, B1-31 before A1-14; the merge
        view 8 came before the last log, awaited them again, and their second TAIL_END, of
        a coordinator that stayed, counted their logs as ours: A multicast its own log, and
        ordered A1-14 first). Else the new tail follows the first."""
        self.awaiting.discard(member)
        again = self.again.pop(member, [])
        if member in self.trimmed and not order:
            return
        self.tails.setdefault(member, []).extend(again)
        self.trimmed[member] = trimmed
        if not order:
            self.ours.add(member)
        elif order == ENDS_IN_ORDER:
            self.ends_ours.add(member)

    def done(self) -> bool:
        """Every tail is in. A member failure detection suspects is still awaited until a
        view leaves it out (`Sequencer.view_changed` narrows ``awaiting``): a suspicion may
        be false, and a member cut off one way delivered the old order's last messages
        that no one else has (campaign udp-total-blocks 72218: A, taking over from D, ended
        its recovery when it suspected E, which could hear D but not be heard; E's log
        held D's last order, C1-1 before A1-1, and A ordered A1-1 first, while E stayed in
        A's views). A crashed member's tail never comes: the wait ends at the view without
        it (campaign udp-total 26 and 121, for which a suspicion once ended the wait, pass
        without it now that GMS's new coordinator excludes every member suspected so far)."""
        return not self.awaiting

    def choose(self, me: Address, own: Tail, own_trimmed: Trimmed) -> tuple[Tail, bool]:
        """What to multicast again: per group, the tail that reaches furthest (ours
        counts in the group we belong to; one of our own order's does not), each message
        once; and whether every group's tails agreed."""
        out: Tail = []
        seen: set[tuple[Address, int]] = set()
        agreed = True
        # At a merge view under us, who kept our order, a subgroup's members whose logs
        # end with our order delivered nothing of the order they went on in (campaign
        # udp-total-blocks 72230: E, in I's order, had missed all of it; E's own merge view,
        # which took in both sides, ended before E ordered anything). Their logs are of our
        # order, the others' of theirs, and the two fork: merged by stamp they interleaved,
        # and E got our C1-10 before I's I1-10, which I had delivered first. They come
        # after the other orders, with our own log: a member behind in the other order
        # delivers its rest first, as the members ahead of it did.
        late = self.ends_ours if self.resend_ours and me in self.ours else set()
        late_group = frozenset(late)
        steps: list[frozenset[Address] | None] = [*self.groups[: self.first]]
        if late:
            steps.append(late_group)
        if self.resend_ours and me in self.ours:
            # What we ordered in our subgroup and the others lack: they drop our BCASTs
            # stamped before the merge view, and the forwarders' FLUSHes would bring
            # those messages to them in a new order (campaign tcp-total seed 71018: A,
            # resumed, ordered H1-1 before F1-9 in its old view; D delivered that, the
            # other subgroup got F's FLUSH first). Again, in our order, they keep it.
            # It goes before the subgroups of a later merge view that came while we
            # waited: the first merge's members went through the views since with ours,
            # which may have delivered the rest of our order in them (campaign
            # udp-total-blocks 72545: I, holding E's BCASTs behind D's, delivered E's
            # I1-22 before G1-4 at E's merge view 6; A, whose tail came only after the
            # merge view 10, got F's log, G1-4 without I1-22, first).
            steps.append(None)  # our own log
        steps.extend(self.groups[self.first :])
        # A group with a member behind (its log ends inside another's of its group) goes
        # first, before the other groups and our own log: that member gets the rest of its
        # order before any other order's messages, as its group's members ahead of it did
        # (campaign udp-total 72756: H's recovery took in E's subgroup before D's, and C
        # and G, behind D in D's order, got E's E1-9, which only E's log held, before
        # D's C1-60, which D had delivered first). If two groups have one, only the
        # first's is served: one sequence of multicasts cannot give both their rest first.
        chosen: list[tuple[bool, Tail]] = []
        for group in steps:
            if group is None:
                chosen.append((False, own))
                continue
            last = late and group is late_group
            done = [
                m
                for m in group
                if m in self.trimmed and m not in self.ours and (last or m not in late)
            ]
            tails = {m: self.tails[m] for m in done}
            trimmed = {m: self.trimmed[m] for m in done}
            if me in group and me not in self.ours:
                tails[me], trimmed[me] = own, own_trimmed
            best, ok = furthest(tails, trimmed)
            agreed = agreed and ok
            # (the late group keeps its place: its members are behind in our order, which
            # comes last by design, not in the order they went on in)
            chosen.append((not last and has_member_behind(tails), best))
        for _, best in sorted(chosen, key=lambda step: not step[0]):  # stable
            for entry in best:
                if entry[:2] not in seen:
                    seen.add(entry[:2])
                    out.append(entry)
        return out, agreed


def has_member_behind(tails: dict[Address, Tail]) -> bool:
    """Whether a member's tail ends inside another's, which goes on after that end and
    holds, from where the two meet on, everything of the member's (as `forks` counts a
    member behind: its end alone may be a message two forks ordered, campaign
    udp-total-blocks 72739)."""
    keys = {m: {(s, n) for s, n, *_ in tail} for m, tail in tails.items()}
    ends = {m: (tail[-1][0], tail[-1][1]) for m, tail in tails.items() if tail}
    for member, end in ends.items():
        for other, other_end in ends.items():
            if other_end == end or end not in keys[other]:
                continue
            if rest_held(tails[member], keys[other]):
                return True
    return False


def rest_held(tail: Tail, other: set[tuple[Address, int]]) -> bool:
    """Whether ``other`` (another log's messages) holds all of ``tail`` from the first
    message the two share on: ``tail``'s member is behind in that log's order."""
    keys = [entry[:2] for entry in tail]
    met = next((i for i, key in enumerate(keys) if key in other), len(keys))
    return all(key in other for key in keys[met:])


def furthest(tails: dict[Address, Tail], trimmed: dict[Address, Trimmed]) -> tuple[Tail, bool]:
    """The tail that reaches furthest, and whether the tails agreed.

    Every member's delivered sequence is a prefix of one order, so one tail holds the
    last message of every other (or trimmed it last, as delivered everywhere). If none
    does, the tails are slices of the order that start at different places: a member's
    log starts late (campaign udp-total-blocks seed 140: J joined, its log began at its
    first view and alone held a message; G's, longer, began earlier and stopped before
    it), so no tail holds every message. Then the tails are merged by stamp (`merged`),
    unless they fork: then they are two orders, which go out one after the other (`forks`).
    """
    if not tails:
        return [], True
    keys = {m: {(s, n) for s, n, *_ in tail} for m, tail in tails.items()}
    ends = {m: (tail[-1][0], tail[-1][1]) for m, tail in tails.items() if tail}

    def holds(member: Address, end: tuple[Address, int]) -> bool:
        return end in keys[member] or end == trimmed.get(member)

    for member, tail in tails.items():
        if all(holds(member, end) for other, end in ends.items() if other != member):
            return tail, True
    return forks(tails, keys, ends, holds) or merged(list(tails.values())), False


def forks(
    tails: dict[Address, Tail],
    keys: dict[Address, set[tuple[Address, int]]],
    ends: dict[Address, tuple[Address, int]],
    holds: Callable[[Address, tuple[Address, int]], bool],
) -> Tail:
    """The tails of a group that forked, one fork after the other; empty if none did.

    A *tip* is a tail whose last message no tail with another last message holds. Two tips
    of one order cannot share a message (of two slices that overlap, the one that ends first
    ends inside the other), so tips that do are of two orders: a merge view whose coordinator
    took over the group's orders changed again before its recovery ended, and the group holds
    each side's order still (campaign udp-total-blocks 72629: E's merge view 7 of E's side and
    F's awaited A, which never installed it; A's merge view 8 got one group of both sides'
    logs, merged them by stamp, whose view counters the two orders share, and C, behind F in
    F's order, got E's side's D1-2 before F1-26, which F had delivered first). Stamps do not
    place one order's messages among another's: each fork goes out whole, the forks with a
    member behind first, so that member gets its order's rest before the other order, as the
    fork's other members did (if two forks have a member behind, only the first's is served:
    one sequence of multicasts cannot give both their rest first)."""
    tips: dict[tuple[Address, int], Address] = {}
    for member, end in ends.items():
        if any(holds(other, end) for other, e in ends.items() if e != end):
            continue
        if end not in tips or len(tails[member]) > len(tails[tips[end]]):
            tips[end] = member
    firsts = list(tips.values())
    if not any(keys[a] & keys[b] for i, a in enumerate(firsts) for b in firsts[i + 1 :]):
        return []

    def behind(tip: Address) -> bool:
        """A member's log that ends inside ``tip``'s and holds, from where the two meet on,
        nothing ``tip``'s lacks: its end alone may be in another fork as well, as a message
        both forks ordered (campaign udp-total-blocks 72739: H's log of B's order ended with
        F2-0, which F's fork ordered again too; counted behind in F's fork, F's went first,
        and H got F2-2 before I1-19, which B and C had delivered first)."""
        for member, end in ends.items():
            if end == ends[tip] or not holds(tip, end):
                continue
            if rest_held(tails[member], keys[tip]):
                return True
        return False

    out: Tail = []
    seen: set[tuple[Address, int]] = set()
    for tip in sorted(firsts, key=lambda t: (not behind(t), tails[t][-1][3])):
        for entry in tails[tip]:
            if entry[:2] not in seen:
                seen.add(entry[:2])
                out.append(entry)
    return out


def merged(tails: list[Tail]) -> Tail:
    """Every message of ``tails`` once, in the order by their stamps: the tails are
    slices of one order, and its coordinators' stamps grow along it. A message an earlier
    recovery multicast again carries that recovery's stamp in some tails; its first
    stamp places it, and the later copy is dropped (both come before anything newer).
    If some stamp is unknown, the longest tail is taken."""
    entries = [entry for tail in tails for entry in tail]
    if any(entry[3][1] < 1 for entry in entries):
        return max(tails, key=len)
    out: Tail = []
    seen: set[tuple[Address, int]] = set()
    for entry in sorted(entries, key=lambda e: e[3]):  # stable: a tail's own order kept
        if entry[:2] not in seen:
            seen.add(entry[:2])
            out.append(entry)
    return out


def old_orders(view: View, old_view: View | None, changed: bool, me: Address) -> list[set[Address]]:
    """As ``me``, the coordinator of ``view``: the members of each order other than ours
    that ``view`` takes over, whose tails it must wait for. After a coordinator
    change, the previous view's members that stay; at a merge view, each subgroup
    another coordinator ordered (campaign udp-total seed 24: a merge view under the
    coordinator of a singleton subgroup ran no recovery, so the members of the
    other subgroup that had missed some of their old order's last messages got them
    only at a later recovery, after newer ones: two orders). A member also in a
    subgroup of ours is awaited too: the subgroups are what their coordinators
    reported, and ours may claim a member that went on under the other (campaign
    udp-total seed 171); its TAIL_END says whether its coordinator stays (`end`).

    A subgroup's order is that of the coordinator that installed its view (its view id's),
    not of the first member it lists: a merge representative reports its view less the
    members it suspects (campaign udp-total-blocks 71088: A and G, whose coordinator E
    had been killed, reported E's view without E, which listed D, the merge view's
    coordinator, first; D awaited no tail, and G, which had missed E's last BCASTs,
    got them only at a later recovery, after a newer one). A subgroup whose view is our
    own previous view is ours though another installed it: we took its order over when
    that coordinator left (campaign udp-total-blocks 72168: B took over A's view 6 as A
    left and got D's tail; B's merge view 7 reported view 6 as B's and D's subgroup, and
    awaiting D's tail again stalled every later multicast: D, whose coordinator stayed,
    sent none)."""
    members = set(view.members)
    if isinstance(view, MergeView) and old_view is not None:
        return [
            set(sub.members) & members
            for sub in view.subgroups
            if sub.coord != me or (sub.view_id.coord != me and sub.view_id != old_view.view_id)
        ]
    if changed:
        assert old_view is not None
        return [set(old_view.members) & members]
    return []
