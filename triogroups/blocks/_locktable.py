"""The lock service's rules: the coordinator's lock table, its backups and its rebuild.

A sans-IO state object (no Trio, no channel, no clock): requests, releases and views
go in, grants come back and every change is put in ``outbox`` for the backups. The
service (`_locks`) owns one and does the talking. Nothing here ever awaits.

Decisions where JGroups' CENTRAL_LOCK leaves a choice:

- A lock is owned by an `Owner` (member address, task number); it is not reentrant:
  the service refuses a second acquire by the same task.
- Waiters are granted in arrival order. The queue is not backed up: after a new
  coordinator takes over, waiters ask again (JGroups' clients resend their pending
  requests the same way).
- A new coordinator rebuilds the table from what the owners say they hold, the
  backups standing in for members that do not answer (`rebuild_locks`).
- Every grant carries a fencing token, one more than the last the table issued, and
  never less than the view's id times 2**32: a table rebuilt in view N starts there
  (above the largest token any member reports, plus ``token_gap``: `rebuild_locks`), and
  a table that goes on into view N + 1 jumps there (`LockTable.install_view`). So a
  token says in which view it was made, and tokens grow along every line of views:
  across a coordinator's crash even when the last grants reached only members that
  crashed with it, and across a coordinator that goes on from its view into one that
  holds members of another coordinator's view with the same id (the two sides of a
  split number views alike; campaign udp-total-blocks seed 72034).
- Backups get each changed entry with a version; an entry with a higher version
  replaces a lower one, so backups need no ordering and a resent entry is harmless.
- An owner judges a grant when it arrives (`refuse_grant`): the coordinator's answer
  can reach it after a view change the grant predates, and the owner holds it only if
  no view since took it away (issue 42, campaign udp-total-blocks seed 143), and only
  if it was made in the owner's view (its token's view id is the owner's).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from triogroups.address import Address

__all__ = [
    "TOKEN_GAP",
    "Entry",
    "Grant",
    "LockCopy",
    "LockReport",
    "LockTable",
    "Owner",
    "newest_entries",
    "rebuild_locks",
    "refuse_grant",
    "token_view",
]

#: Added to the largest token the members report when a table is rebuilt.
TOKEN_GAP = 1000

#: A token's view id is the token shifted right by this many bits (`token_view`).
VIEW_SHIFT = 32


class Owner(NamedTuple):
    """Who holds a lock: a member incarnation and a task in it."""

    member: Address
    task: int

    def encode(self) -> list[Any]:
        return [self.member.to_bytes(), self.member.name, self.task]

    @classmethod
    def decode(cls, raw: Sequence[Any]) -> Owner:
        return cls(Address.from_bytes(raw[0], raw[1]), int(raw[2]))


class Grant(NamedTuple):
    """A lock held: its owner and the fencing token of this grant."""

    owner: Owner
    token: int


class Entry(NamedTuple):
    """One lock's state as the backups keep it: held by ``grant``, or free (None)."""

    name: str
    grant: Grant | None
    version: int

    def encode(self) -> list[Any]:
        g = self.grant
        return [self.name, None if g is None else [g.owner.encode(), g.token], self.version]

    @classmethod
    def decode(cls, raw: Sequence[Any]) -> Entry:
        g = raw[1]
        grant = None if g is None else Grant(Owner.decode(g[0]), int(g[1]))
        return cls(str(raw[0]), grant, int(raw[2]))


@dataclass
class LockReport:
    """What one member tells a new coordinator: its backup copy, the largest token it
    saw, and the locks its tasks hold (by lock name)."""

    member: Address
    copy: list[Entry] = field(default_factory=list)
    max_token: int = 0
    held: dict[str, Grant] = field(default_factory=dict)

    def encode(self) -> list[Any]:
        return [
            [e.encode() for e in self.copy],
            self.max_token,
            [[n, g.owner.encode(), g.token] for n, g in self.held.items()],
        ]

    @classmethod
    def decode(cls, member: Address, raw: Sequence[Any]) -> LockReport:
        return cls(
            member,
            [Entry.decode(e) for e in raw[0]],
            int(raw[1]),
            {str(n): Grant(Owner.decode(o), int(t)) for n, o, t in raw[2]},
        )


class LockTable:
    """The coordinator's locks: holders, waiters, the last token, and what changed.

    ``granting`` is False while the service may not grant (majority mode in a view
    without a majority): requests queue, nothing is granted, until it is True again.
    """

    def __init__(self, *, max_token: int = 0, version: int = 0, granting: bool = True) -> None:
        self.holders: dict[str, Grant] = {}
        self.waiting: dict[str, deque[Owner]] = {}
        self.max_token = max_token
        self.version = version
        self.granting = granting
        #: entries changed since the service last took them, for the backups
        self.outbox: list[Entry] = []

    # --- the rules ------------------------------------------------------------

    def request(self, name: str, owner: Owner) -> Grant | None:
        """``owner`` asks for ``name``: its grant (a new one, or the one it holds
        already: a resent request), or None when it has to wait (it is queued once)."""
        held = self.holders.get(name)
        if held is not None and held.owner == owner:
            return held
        if held is None and self.granting and not self.waiting.get(name):
            return self._grant(name, owner)
        queue = self.waiting.setdefault(name, deque())
        if owner not in queue:
            queue.append(owner)
        return self._grant_next(name) if held is None else None

    def release(self, name: str, owner: Owner) -> Grant | None:
        """``owner`` lets go of ``name`` (held or only asked for); returns the grant
        this makes for the next waiter, if any. Releasing what it does not hold is a
        no-op (a resent release)."""
        queue = self.waiting.get(name)
        if queue is not None and owner in queue:
            queue.remove(owner)
            if not queue:
                del self.waiting[name]
        held = self.holders.get(name)
        if held is None or held.owner != owner:
            return None
        del self.holders[name]
        self._changed(name, None)
        return self._grant_next(name)

    def install_view(
        self, members: Iterable[Address], *, granting: bool, view_counter: int = 0
    ) -> list[Grant]:
        """A new view (its id ``view_counter``): the locks and requests of members not in
        it go (their owners left or crashed); returns the grants this makes for the next
        waiters. A view in which the table may not grant (majority mode, a minority)
        frees every lock: its owners count them as lost, and a request resent in it
        must not find its old grant.

        Tokens go on from the view id times 2**32 at least: a member of this view may
        come from another coordinator's view with the same id as this table's last one
        (the two sides of a split count views alike), whose tokens this table never
        heard of (campaign udp-total-blocks seed 72034)."""
        live = frozenset(members)
        self.granting = granting
        self.max_token = max(self.max_token, view_counter << VIEW_SHIFT)
        for name, queue in list(self.waiting.items()):
            kept = deque(o for o in queue if o.member in live)
            if kept:
                self.waiting[name] = kept
            else:
                del self.waiting[name]
        for name, grant in list(self.holders.items()):
            if grant.owner.member not in live or not granting:
                del self.holders[name]
                self._changed(name, None)
        return self.grant_waiting()

    def grant_waiting(self) -> list[Grant]:
        """Grant every free lock that has waiters (when granting resumes)."""
        grants = []
        for name in list(self.waiting):
            if name not in self.holders:
                grant = self._grant_next(name)
                if grant is not None:
                    grants.append(grant)
        return grants

    def holder(self, name: str) -> Grant | None:
        """Who holds ``name`` now, if anyone."""
        return self.holders.get(name)

    def entries(self) -> list[Entry]:
        """The whole table as backup entries (for a new backup): one per held lock."""
        return [Entry(n, g, self.version) for n, g in self.holders.items()]

    def take_outbox(self) -> list[Entry]:
        """The entries changed since the last call, for the backups."""
        out, self.outbox = self.outbox, []
        return out

    # --- inside ---------------------------------------------------------------

    def _grant_next(self, name: str) -> Grant | None:
        queue = self.waiting.get(name)
        if not self.granting or not queue or name in self.holders:
            return None
        owner = queue.popleft()
        if not queue:
            del self.waiting[name]
        return self._grant(name, owner)

    def _grant(self, name: str, owner: Owner) -> Grant:
        self.max_token += 1
        grant = Grant(owner, self.max_token)
        self.holders[name] = grant
        self._changed(name, grant)
        return grant

    def _changed(self, name: str, grant: Grant | None) -> None:
        self.version += 1
        self.outbox.append(Entry(name, grant, self.version))


class LockCopy:
    """A backup's copy of the coordinator's table: the newest entry per lock."""

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self.max_token = 0

    def apply(self, entries: Iterable[Entry], max_token: int) -> None:
        """Take entries from the coordinator; an older version never replaces a newer."""
        for entry in entries:
            have = self.entries.get(entry.name)
            if have is None or entry.version > have.version:
                self.entries[entry.name] = entry
        self.max_token = max(self.max_token, max_token)

    def replace(self, entries: Iterable[Entry], max_token: int, version: int) -> None:
        """Take the coordinator's whole table as of ``version`` (a new backup): entries
        it does not hold are free now, except newer ones that arrived first."""
        self.entries = {n: e for n, e in self.entries.items() if e.version > version}
        self.apply(entries, max_token)


def rebuild_locks(
    reports: Mapping[Address, LockReport],
    members: Sequence[Address],
    *,
    granting: bool = True,
    token_gap: int = TOKEN_GAP,
    view_counter: int = 0,
) -> tuple[LockTable, list[tuple[str, Grant]]]:
    """A new coordinator's table, from the reports of the members of its view.

    As JGroups' CENTRAL_LOCK2 reconciles, the owners are asked: a lock is held by the
    owner that says it holds it. The backup copies stand in for the members in the
    view that did not answer in time (their newest entry per lock). A grant that no
    owner claims is dropped: its owner left, released it, or never heard of it (the
    old coordinator crashed before its answer left; the owner asks again and gets a
    new grant with a larger token). Two owners claim one lock only after a split in
    which both sides granted it: the grant with the larger token keeps it (a resource
    fenced by tokens takes only that one anyway), and the others are returned as
    refused, to be told they lost it.

    Tokens go on from the largest reported plus ``token_gap``, and from no less than
    ``view_counter`` (the id of the view being rebuilt) times 2**32: the members left may
    know no token at all (the old coordinator and its backups crashed, or in majority
    mode sat in the minority), but view ids only grow along a line of views, so every
    coordinator's tokens start above those of the coordinators before it (as long as
    one coordinator grants fewer than 2**32 locks).
    """
    live = frozenset(members)
    claims: dict[str, set[Grant]] = {}
    for report in reports.values():
        for name, grant in report.held.items():
            if grant.owner.member in live:
                claims.setdefault(name, set()).add(grant)
    for name, entry in newest_entries(reports).items():
        backed = entry.grant
        if (
            backed is not None
            and backed.owner.member in live
            and backed.owner.member not in reports
        ):
            claims.setdefault(name, set()).add(backed)
    top_token = max(
        [0]
        + [r.max_token for r in reports.values()]
        + [g.token for grants in claims.values() for g in grants]
    )
    top_version = max([0] + [e.version for r in reports.values() for e in r.copy]) + 1
    first = max(top_token + token_gap, view_counter << VIEW_SHIFT)
    table = LockTable(max_token=first, version=top_version, granting=granting)
    refused: list[tuple[str, Grant]] = []
    for name, grants in claims.items():
        ranked = sorted(grants, key=lambda g: g.token, reverse=True)
        if not granting:  # as `LockTable.install_view`: a view that may not grant frees all
            refused.extend((name, g) for g in ranked)
            continue
        table.holders[name] = ranked[0]
        refused.extend((name, g) for g in ranked[1:] if g.owner != ranked[0].owner)
    return table, refused


def token_view(token: int) -> int:
    """The id of the view in which the grant with fencing ``token`` was made."""
    return token >> VIEW_SHIFT


def refuse_grant(
    token: int, *, view_counter: int, may_hold: bool, reported_since: bool, newest_seen: int
) -> str | None:
    """Why an owner must not hold a grant with fencing token ``token`` that reaches it
    now, or None when the grant stands.

    The coordinator's answer travels after the grant was made, and the owner may have
    installed views in between; the grant stands only if none of them took it away:

    - ``may_hold`` False: the owner's view may not hold locks now (majority mode, no
      majority of the last full view); the coordinator that granted is in the other
      view or freed the lock with its own minority view (campaign udp-total-blocks
      seed 143, where the grant reached B just after its minority view).
    - ``reported_since``: the owner told a new coordinator what it holds (a rebuild)
      after it sent the request; its report did not name this grant, so the rebuilt
      table does not know it and may give the lock to another.
    - ``newest_seen``, the largest token the owner saw for this lock before (its own
      grants, its backup copy), is larger: the lock was granted again after this grant,
      which is stale (fencing tokens only grow along a line of grants).
    - the grant was made in another view than the owner's now, ``view_counter`` (its
      token's `token_view`): tokens grow along a line of views because each grant is
      held from the view it was made in, whose id times 2**32 its token starts from. A
      grant made in an earlier view may come from a table that the coordinator of the
      owner's view never heard of; one made in a view with a larger id than the
      owner's may be matched by a token of another coordinator's view with that id,
      which the owner may install next.

    A refused grant is released, and the owner asks again or gives up.
    """
    if not may_hold:
        return "no majority"
    if reported_since:
        return "table rebuilt since asked"
    if newest_seen > token:
        return f"token {token} below {newest_seen} seen"
    if token_view(token) != view_counter:
        return f"token {token} of view {token_view(token)}, not {view_counter}"
    return None


def newest_entries(reports: Mapping[Address, LockReport]) -> dict[str, Entry]:
    """Per lock the backup entry with the highest version among the reported copies."""
    newest: dict[str, Entry] = {}
    for report in reports.values():
        for entry in report.copy:
            have = newest.get(entry.name)
            if have is None or entry.version > have.version:
                newest[entry.name] = entry
    return newest
