"""The discovery state machine shared by PING and TCPPING (sans-IO).

`FindMembers(timeout)` coming down starts a *find*: a discovery request goes
out (PING multicasts it, TCPPING sends it to its hosts), every member that
receives it answers the requester with a unicast response naming itself, its
physical address and whether it is coordinator, and `MembersFound` goes up
with the answers (this member not included) when the find ends:

- at ``now + timeout``;
- earlier, with ``break_on_coord_rsp`` (default, as in JGroups), as soon as a
  coordinator has answered;
- earlier, when every *expected* endpoint other than our own has answered:
  every endpoint TCPPING probes from ``initial_hosts`` (``port_range`` extras
  included, as JGroups expands them) plus the endpoints handed in with
  `SetPhysicalAddresses`. Matching is on the (ip, port) a member reports, so
  list IP addresses for this rule to apply (host names still get probed).

With ``num_discovery_runs`` > 1 the request is repeated at even intervals
within the timeout (for lossy networks). A request from another member
during a find counts as its answer (two members starting together find each
other). Each request and response also tells the transport where its sender
is (`AddPhysicalAddress`) and refreshes the member table that `stats` and
`members` show; entries not confirmed within ``discovery_rsp_expiry_time``
are forgotten unless they are in the current view.

A member is coordinator when the installed view says so (``view.coord``);
without a view it is not. Members starting together all answer "not
coordinator" until one of them installs the first view; a member that asked
again a moment too early would then wait out its whole find. So a member
whose first view makes it coordinator answers once more, now as
coordinator, everyone outside that view whose request it answered before it
had a view. A member that left the group (`Disconnect` from GMS) has no view
and answers as a non-coordinator: joiners must not pick it.

A member whose joining find (no view yet) ends with no answer, although it
had reason to expect peers, says so with one WARNING naming the cluster and
what it found, before GMS makes it a group of its own: endpoints where the
transport met no member of this cluster (`ForeignEndpoint`: another cluster
or program answered there) and ports of its own range that were taken when
its transport bound (`passed_over`). Silence there once let two members of a
second cluster each form a group of one without a word.

Requests and responses carry the physical address the transport announced
(`LocalPhysicalAddress`); before that, or on the simulated network which has
none, they carry ``("", 0)`` and receivers learn nothing physical from them
(answers still reach the requester by its address). Never awaits, never
touches a socket or a clock: ``now`` comes in from the host.
"""

from __future__ import annotations

import logging
import math
from typing import Any, NamedTuple

from triogroups.address import Address
from triogroups.events import (
    AddPhysicalAddress,
    Disconnect,
    Event,
    FindMembers,
    ForeignEndpoint,
    LocalPhysicalAddress,
    MembersFound,
    PingData,
    SetPhysicalAddresses,
)
from triogroups.message import Flag, Message
from triogroups.properties import Bool, Duration, Int, at_least, positive
from triogroups.protocol import Passes, Protocol
from triogroups.protocols._batch import carries
from triogroups.transports._addresses import Physical, SendToHosts, format_physical, label
from triogroups.view import View

__all__ = ["REQUEST", "RESPONSE", "Discovery", "DiscoveryHeader"]

_log = logging.getLogger(__name__)

REQUEST = 1
RESPONSE = 2
_FLAGS = int(Flag.OOB | Flag.INTERNAL)


class DiscoveryHeader(NamedTuple):
    """A discovery request or response: the sender's physical address and role.

    ``is_server``: the sender is in a view (JGroups' PingData.isServer), so a group exists
    even when no coordinator answered.
    """

    type: int
    ip: str
    port: int
    is_coord: bool
    is_server: bool = False


class _Find:
    """One running find: when it ends, when to repeat, the answers so far."""

    __slots__ = ("deadline", "foreign", "interval", "next_run", "responses", "runs_left")

    def __init__(self, now: float, timeout: float, runs: int) -> None:
        self.deadline = now + timeout
        self.interval = timeout / runs
        self.next_run = now  # the first request goes out as soon as we can
        self.runs_left = runs
        self.responses: dict[Address, PingData] = {}
        self.foreign: dict[Physical, str] = {}  # endpoints that are not of this cluster


class Discovery(Protocol):
    """Base of PING and TCPPING; subclasses say where requests go and what is expected."""

    COUNTERS = (
        "finds",
        "requests_sent",
        "requests_received",
        "responses_sent",
        "responses_received",
        "malformed",
    )

    break_on_coord_rsp = Bool(True, doc="end a find as soon as a coordinator answers")
    num_discovery_runs = Int(
        1,
        doc="requests sent per find, spread over its timeout",
        check=at_least(1),
    )
    discovery_rsp_expiry_time = Duration(
        60.0,
        doc="forget members not heard of for this long",
        check=positive,
    )
    max_members = Int(
        2000,
        doc="members kept in the member table",
        check=at_least(1),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.local_physical: Physical | None = None
        self.hosts: list[Physical] = []
        self._members: dict[Address, tuple[PingData, float]] = {}
        self._find: _Find | None = None
        self._asked_before_view: dict[Address, None] = {}

    # --- what subclasses decide -----------------------------------------------------

    def request_hosts(self) -> list[Physical]:
        """Endpoints a request is sent to directly (besides any multicast)."""
        return list(self.hosts)

    def multicast_requests(self) -> bool:
        """Whether a request is also multicast to the group."""
        return False

    def expected_hosts(self) -> set[Physical]:
        """Endpoints whose answers end a find early (our own is removed)."""
        return set(self.hosts)

    def passed_over(self) -> list[Physical]:
        """Probed endpoints that were taken when this member's transport bound its port."""
        return []

    # --- events -----------------------------------------------------------------------

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, FindMembers):
            self._start_find(event.timeout, now)
            return
        if isinstance(event, SetPhysicalAddresses):
            for host in event.addresses:
                if host not in self.hosts:
                    self.hosts.append(host)
            del self.hosts[: max(0, len(self.hosts) - self.max_members)]
        elif isinstance(event, Disconnect):
            self.view = None
        super().down_event(event, now)

    def up_event(self, event: Event, now: float) -> None:
        if isinstance(event, LocalPhysicalAddress):
            self.local_physical = event.physical
        elif isinstance(event, ForeignEndpoint) and self._find is not None:
            self._find.foreign[event.physical] = event.detail
        super().up_event(event, now)

    def _start_find(self, timeout: float, now: float) -> None:
        if timeout < 0 or math.isnan(timeout):
            raise ValueError(f"find timeout must be >= 0, got {timeout}")
        self.counters["finds"] += 1
        self._expire(now)
        if self._find is None:
            self._find = _Find(now, timeout, self.num_discovery_runs)
        else:  # a find is running: answer both at the later deadline
            self._find.deadline = max(self._find.deadline, now + timeout)
        self._run(now)

    # --- messages ------------------------------------------------------------------------

    @property
    def passes_up(self) -> Passes | None:
        """While no discovery runs, what carries no discovery header goes on untouched."""
        return "all" if self._find is None else None

    def up(self, batch: list[Message], now: float) -> None:
        pid = self.id
        if not carries(batch, pid):  # discovery only runs while members join or merge
            self.send_up(batch)
            self._run(now)
            return
        rest: list[Message] = []
        for msg in batch:
            hdr = msg.headers.get(pid)
            if hdr is None:
                rest.append(msg)
            elif msg.src is not None and msg.src != self.local_address:
                self._handle(msg.src, hdr, now)
        if rest:
            self.send_up(rest)
        self._run(now)

    def _handle(self, sender: Address, hdr: DiscoveryHeader, now: float) -> None:
        if hdr.type == REQUEST:
            self.counters["requests_received"] += 1
        elif hdr.type == RESPONSE:
            self.counters["responses_received"] += 1
        else:
            self.counters["malformed"] += 1
            return
        physical = (hdr.ip, hdr.port)
        data = PingData(sender, physical, hdr.is_coord, hdr.is_server)
        self._learn(data, now)
        if self._find is not None:
            self._find.responses[sender] = data
        if hdr.type == REQUEST:
            self.counters["responses_sent"] += 1
            self.send_down_one(self._message(sender, RESPONSE))
            if self.view is None and len(self._asked_before_view) < self.max_members:
                self._asked_before_view[sender] = None

    def view_changed(self, view: View, now: float) -> None:
        """On becoming coordinator with a first view, answer earlier askers again (see above)."""
        super().view_changed(view, now)
        asked, self._asked_before_view = self._asked_before_view, {}
        if view.coord != self.local_address:
            return
        for sender in asked:
            if sender not in view:
                self.counters["responses_sent"] += 1
                self.send_down_one(self._message(sender, RESPONSE))

    def _message(self, dest: Address | None, kind: int) -> Message:
        ip, port = self.local_physical or ("", 0)
        hdr = DiscoveryHeader(kind, ip, port, self._is_coord(), self.view is not None)
        return Message(dest, flags=_FLAGS, headers={self.id: hdr})

    def _is_coord(self) -> bool:
        view = self.view
        return view is not None and view.coord == self.local_address

    def _learn(self, data: PingData, now: float) -> None:
        known = self._members.pop(data.address, None)
        self._members[data.address] = (data, now)  # re-inserted: the table stays oldest-first
        if data.physical[1] and (known is None or known[0].physical != data.physical):
            self.pass_down(AddPhysicalAddress(data.address, data.physical))
        if len(self._members) > self.max_members:
            self._expire(now)
            while len(self._members) > self.max_members:
                del self._members[next(iter(self._members))]

    def _expire(self, now: float) -> None:
        horizon = now - self.discovery_rsp_expiry_time
        view = self.view
        stale = [
            a
            for a, (_, seen) in self._members.items()
            if seen < horizon and (view is None or a not in view)
        ]
        for address in stale:
            del self._members[address]

    # --- the find's clock -------------------------------------------------------------------

    def _run(self, now: float) -> None:
        """Send a due request, or end the find; called after every input."""
        find = self._find
        if find is None:
            return
        if now >= find.deadline or self._answered(find):
            self._find = None
            if not find.responses and self.view is None:
                self._warn_alone(find)
            self.pass_up(MembersFound(tuple(find.responses.values())))
            return
        if find.runs_left > 0 and now >= find.next_run:
            find.runs_left -= 1
            find.next_run = now + find.interval
            self._send_request()

    def _warn_alone(self, find: _Find) -> None:
        """A joining find heard no member: warn if peers were to be expected (see above)."""
        foreign = {h: d for h, d in find.foreign.items() if h != self.local_physical}
        taken = [h for h in self.passed_over() if h not in foreign]
        if not foreign and not taken:
            return
        found = []
        if foreign:
            details = sorted(set(foreign.values()))
            found.append(f"{_spans(list(foreign))} answered but not for it ({'; '.join(details)})")
        if taken:
            found.append(f"{_spans(taken)} were taken when it bound its port")
        me = format_physical(self.local_physical) if self.local_physical else "?"
        _log.warning(
            "%s: found no member of cluster %r: %s; %s at %s starts a group of its own "
            "(another cluster on the same ports? give each cluster its own port range)",
            self.name,
            self.cluster,
            ", ".join(found),
            self.local_address,
            me,
        )

    def _answered(self, find: _Find) -> bool:
        if self.break_on_coord_rsp and any(d.is_coord for d in find.responses.values()):
            return True
        expected = self.expected_hosts() - {self.local_physical}
        if not expected:
            return False
        return expected <= {d.physical for d in find.responses.values()}

    def _send_request(self) -> None:
        self.counters["requests_sent"] += 1
        if self.multicast_requests():
            self.send_down_one(self._message(None, REQUEST))
        hosts = [h for h in self.request_hosts() if h != self.local_physical]
        if hosts:
            self.pass_down(SendToHosts(tuple(hosts), (self._message(None, REQUEST),)))

    def tick(self, now: float) -> None:
        self._run(now)

    def next_deadline(self) -> float:
        find = self._find
        if find is None:
            return math.inf
        if find.runs_left > 0:
            return min(find.deadline, find.next_run)
        return find.deadline

    # --- what the application sees ------------------------------------------------------------

    def members(self) -> list[PingData]:
        """Members discovered so far (from requests and responses), oldest first."""
        return [data for data, _ in self._members.values()]

    def gauges(self) -> dict[str, Any]:
        return {
            "finding": self._find is not None,
            "local_physical": None
            if self.local_physical is None
            else format_physical(self.local_physical),
            "hosts": [format_physical(h) for h in self.hosts],
            "members": {
                label(d.address): {"physical": format_physical(d.physical), "is_coord": d.is_coord}
                for d, _ in self._members.values()
            },
        }


def _spans(hosts: list[Physical]) -> str:
    """``127.0.0.1:7800..7804, 10.0.0.2:7800``: runs of consecutive ports on one address."""
    runs: list[list[Any]] = []
    for ip, port in sorted(hosts):
        if runs and runs[-1][0] == ip and runs[-1][2] == port - 1:
            runs[-1][2] = port
        else:
            runs.append([ip, port, port])
    return ", ".join(f"{ip}:{lo}" if lo == hi else f"{ip}:{lo}..{hi}" for ip, lo, hi in runs)
