"""NAKACK2 unit tests: sans-IO objects joined by hand, explicit ``now``, every rule.

The little `_Net` below plays transport: it stamps the source, runs every
message through the real wire codec, loops own multicasts back (unless
DONT_LOOPBACK) and can drop chosen messages. Tests then assert what each
member emitted and delivered.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import msgpack
import pytest

from triogroups import Address, Digest, Flag, Message, PropertyError, StackConfig, View, ViewId
from triogroups.events import (
    DigestReply,
    Disconnect,
    Event,
    GetDigest,
    MergeDigest,
    StableDigest,
    TmpView,
)
from triogroups.extend import BecomeServer, SetDigest, ViewChange
from triogroups.protocols import ids
from triogroups.protocols.nakack2 import Nakack2
from triogroups.protocols.nakack2._header import (
    HIGHEST_SEQNO,
    MSG,
    VIEW_SEQNO,
    XMIT_REQ,
    XMIT_RSP,
    NakAckHeader2,
    as_header,
    expand_ranges,
    fit_ranges,
    to_ranges,
)
from triogroups.testing import (
    SansIONetwork,
    addresses,
    down_messages,
    split,
    started,
    up_messages,
    view_of,
)
from triogroups.transports.sim import SimTransport

ID = ids.NAKACK2
Drop = Callable[[Address, Address, Message], bool]


class _Net(SansIONetwork):
    """Members A, B, C, ... running one NAKACK2 each on the test kit's codec-faithful link.

    ``net[i]`` is member i's NAKACK2; tests drive it directly and `pump` carries
    what it emitted. With ``max_bundle_size`` each NAKACK2 sits on a real
    (unstarted) `SimTransport` of that bundle size, and the link drops a
    message that does not encode within it, as a transport does (kept in
    ``oversized``).
    """

    def __init__(self, n: int = 3, *, max_bundle_size: int | None = None, **props: Any) -> None:
        super().__init__(cluster="c", max_bundle_size=max_bundle_size)
        self.record = True
        self.addrs = addresses("ABCDE"[:n])
        for a in self.addrs:
            proto = Nakack2(**props)
            if max_bundle_size is not None:
                proto.check_stack([SimTransport(max_bundle_size=max_bundle_size)], [])
            self.add(a, proto)

    def __getitem__(self, i: int) -> Nakack2:  # type: ignore[override]
        proto = self.members[self.addrs[i]].top
        assert isinstance(proto, Nakack2)
        return proto

    @property
    def delivered(self) -> dict[Address, list[bytes]]:
        return {a: m.payloads for a, m in self.members.items()}

    @property
    def events(self) -> dict[Address, list[Event]]:
        return {a: m.events for a, m in self.members.items()}

    def view(self, members: list[int] | None = None, vid: int = 1, now: float = 0.0) -> View:
        chosen = [self.addrs[i] for i in (members or range(len(self.addrs)))]
        view = View.create(chosen[0], vid, chosen)
        for a in chosen:
            self.event(a, ViewChange(view), now)
        return view

    def event(self, member: Address, event: Event, now: float = 0.0) -> None:
        """Pass ``event`` down at ``member``; events it passes on are dropped, messages wait
        in its outbox for `pump`, what goes up is captured at once."""
        host = self.members[member]
        proto = host.top
        proto.down_event(event, now)
        for item in proto.take_down():
            if isinstance(item, list):
                proto.send_down(item)
        msgs, events = split(proto.take_up())
        host.delivered.extend(msgs)
        host.events.extend(events)

    def send(self, i: int, *payloads: bytes, flags: int = 0, now: float = 0.0) -> None:
        """Member i multicasts: its outbox waits for `pump` (tests may take it first)."""
        self[i].down([Message(None, p, flags=flags) for p in payloads], now)

    def pump(self, now: float = 0.0, drop: Drop | None = None) -> int:
        """Carry everything emitted until quiet; returns how many datagrams were delivered."""
        self.now = now
        moved = 0
        while True:
            for member in self.members.values():
                member.drain()
            if not self.in_flight():
                return moved
            moved += self.deliver_all(drop=drop)

    def sent(self, kind: int) -> list[tuple[Address, Message]]:
        return [
            (s, m)
            for s, m in self.wire
            if (as_header(m.headers.get(ID)) or NakAckHeader2(0)).type == kind
        ]


def _payloads(n: int, start: int = 1) -> list[bytes]:
    return [f"m{i}".encode() for i in range(start, start + n)]


def _seqno_is(seqnos: set[int], src: Address | None = None) -> Drop:
    def drop(s: Address, d: Address, msg: Message) -> bool:
        hdr = as_header(msg.headers.get(ID))
        mine = src is None or s == src
        return mine and hdr is not None and hdr.type == MSG and hdr.seqno in seqnos

    return drop


def _to(member: Address, inner: Drop) -> Drop:
    return lambda s, d, m: d == member and inner(s, d, m)


# --- seqnos, ordering, loopback ---------------------------------------------------------------


def test_nakack2_multicasts_get_consecutive_seqnos_unicasts_pass_through() -> None:
    """A seqno per sender on multicasts only; unicasts and NO_RELIABILITY pass untouched."""
    net = _Net(2)
    net.view()
    a = net[0]
    uni = Message(net.addrs[1], b"u")
    best = Message(None, b"nr", flags=Flag.NO_RELIABILITY)
    a.down([Message(None, b"x"), uni, best, Message(None, b"y")], 0.0)
    (batch,) = a.take_down()
    assert isinstance(batch, list)
    assert [m.headers.get(ID) for m in batch] == [1, None, None, 2]  # MSG: a bare seqno
    assert a.stats()["seqno"] == 2 and a.stats()["sent_retained"] == 2
    joiner = _joiner()  # not a server yet: still passes what is not NAKACK2's
    plain = [
        Message(net.addrs[1], b"u", src=net.addrs[0]),
        Message(None, b"nr", flags=Flag.NO_RELIABILITY),
    ]
    joiner.up(plain, 0.0)
    assert joiner.take_up() == [plain] and joiner.stats()["become_server_queue"] == 0


def test_nakack2_delivers_per_sender_in_seqno_order_despite_reordering() -> None:
    """Gap detection: a later seqno waits until the gap before it is filled."""
    net = _Net(2)
    net.view()
    net.send(0, *_payloads(3))
    (batch,) = net[0].take_down()
    assert isinstance(batch, list)
    b = net[1]
    wire = [net.codec.decode(net.codec.encode(None, net.addrs[0], [m])).messages[0] for m in batch]
    b.up([wire[2]], 0.0)
    assert b.take_up() == [] and b.stats()["windows"][str(net.addrs[0])]["missing"] == 2
    b.up([wire[0]], 0.0)
    assert [m.payload for m in b.take_up()[0]] == [b"m1"]  # type: ignore[union-attr]
    b.up([wire[1]], 0.0)
    assert [m.payload for m in b.take_up()[0]] == [b"m2", b"m3"]  # type: ignore[union-attr]


def test_nakack2_duplicates_are_delivered_once() -> None:
    net = _Net(2)
    net.view()
    net.send(0, b"m1")
    (batch,) = net[0].take_down()
    assert isinstance(batch, list)
    msg = net.codec.decode(net.codec.encode(None, net.addrs[0], batch)).messages[0]
    b = net[1]
    b.up([msg, msg.copy()], 0.0)
    b.up([msg.copy()], 0.0)
    delivered = [m.payload for item in b.take_up() if isinstance(item, list) for m in item]
    assert delivered == [b"m1"] and b.stats()["duplicates"] == 2


def test_nakack2_own_multicasts_are_delivered_locally_once() -> None:
    net = _Net(2)
    net.view()
    net.send(0, *_payloads(5))
    net.pump()
    assert net.delivered[net.addrs[0]] == _payloads(5)
    assert net.delivered[net.addrs[1]] == _payloads(5)


def test_nakack2_dont_loopback_is_honoured_and_its_seqno_skipped_locally() -> None:
    """DONT_LOOPBACK: the sender does not deliver it, yet its later multicasts still flow."""
    net = _Net(2)
    net.view()
    net.send(0, b"m1")
    net.send(0, b"quiet", flags=Flag.DONT_LOOPBACK)
    net.send(0, b"m3")
    net.pump()
    assert net.delivered[net.addrs[0]] == [b"m1", b"m3"]
    assert net.delivered[net.addrs[1]] == [b"m1", b"quiet", b"m3"]
    assert net[0].digest()[net.addrs[0]] == (3, 3)


def test_nakack2_own_multicast_is_delivered_when_sent_and_its_echo_is_a_duplicate() -> None:
    """Local delivery never waits for the transport: the copy going down says DONT_LOOPBACK."""
    a = Nakack2()
    me = Address(1, "A")
    a.start(me, "c", 0.0)
    a.down_event(ViewChange(View.create(me, 1, [me])), 0.0)
    a.take_down()
    a.down([Message(None, b"m1"), Message(None, b"m2", flags=Flag.OOB)], 0.0)
    (batch,) = a.take_down()
    assert isinstance(batch, list) and all(m.flags & Flag.DONT_LOOPBACK for m in batch)
    (local,) = a.take_up()
    assert isinstance(local, list) and [(m.payload, m.src) for m in local] == [
        (b"m1", me),
        (b"m2", me),
    ]
    assert not local[0].flags & Flag.DONT_LOOPBACK
    echo = batch[0].copy()
    echo.src = me
    a.up([echo], 0.0)
    assert a.take_up() == [] and a.stats()["duplicates"] == 1


def test_nakack2_keeps_multicasts_from_non_members_until_a_view_has_them() -> None:
    """A view reaches members at different times: C multicasts to B before B installs the
    view with C. B keeps it (not delivered to a member whose view lacks C) and delivers it
    once the view gives C a window; over TCP nothing would ever send it again."""
    net = _Net(3)
    net.view([0, 1])
    net.send(2, b"early")
    net.pump()
    assert net.delivered[net.addrs[1]] == []
    assert net[1].stats()["non_member_kept"] == 1
    net.view([0, 1, 2], vid=2)
    assert net.delivered[net.addrs[1]] == [b"early"]
    stats = net[1].stats()
    assert stats["non_member_replayed"] == 1 and stats["non_member_dropped"] == 0


def test_nakack2_non_member_queue_keeps_the_newest_and_counts_what_it_drops() -> None:
    net = _Net(3, non_member_queue_size=2)
    net.view([0, 1])
    for payload in (b"c1", b"c2", b"c3"):
        net.send(2, payload)
    net.pump()
    assert net[1].stats()["non_member_dropped"] == 1
    net.view([0, 1, 2], vid=2)
    assert net.delivered[net.addrs[1]] == []  # c1 is gone: c2 and c3 wait behind the gap


def test_nakack2_non_member_queue_size_0_drops_them_at_once() -> None:
    net = _Net(3, non_member_queue_size=0)
    net.view([0, 1])
    net.send(2, b"intruder")
    net.pump()
    assert net.delivered[net.addrs[1]] == [] and net[1].stats()["non_member_dropped"] == 1
    net.view([0, 1, 2], vid=2)
    assert net.delivered[net.addrs[1]] == []


def test_nakack2_oob_is_delivered_at_once_while_a_regular_gap_is_open() -> None:
    """OOB overtakes: a regular message held by a gap does not hold up a later OOB one."""
    net = _Net(2)
    net.view()
    net.send(0, b"r1")
    net.send(0, b"r2")
    net.send(0, b"oob3", flags=Flag.OOB)
    net.send(0, b"r4")
    net.pump(drop=_to(net.addrs[1], _seqno_is({1})))
    assert net.delivered[net.addrs[1]] == [b"oob3"]
    net.pump(now=0.5)
    net[1].tick(0.5)
    net[1].tick(1.0)
    net.pump(now=1.0)
    assert net.delivered[net.addrs[1]] == [b"oob3", b"r1", b"r2", b"r4"]


# --- retransmission ---------------------------------------------------------------------------


def test_nakack2_xmit_req_only_for_gaps_known_at_the_previous_run() -> None:
    """A gap seen first at run N is asked for at run N+1, not at once (JGRP-1539)."""
    net = _Net(2)
    net.view()
    b = net[1]
    net.send(0, *_payloads(3))
    net.pump(drop=_to(net.addrs[1], _seqno_is({2})))
    assert b.next_deadline() == 0.5
    b.tick(0.5)
    assert b.take_down() == [] and b.next_deadline() == 1.0
    net.send(0, *_payloads(2, 4), now=0.7)
    net.pump(now=0.7, drop=_to(net.addrs[1], _seqno_is({4})))
    b.tick(1.0)
    (req,) = b.take_down()[0]  # type: ignore[misc]
    assert req.dest == net.addrs[0] and req.flags & Flag.OOB
    assert req.headers[ID] == NakAckHeader2(XMIT_REQ, 0, net.addrs[0], (2, 2))
    b.tick(1.5)
    (req,) = b.take_down()[0]  # type: ignore[misc]
    assert req.headers[ID].ranges == (2, 2, 4, 4)
    assert b.stats()["xmit_reqs_sent"] == 2


def test_nakack2_xmit_req_is_capped_by_max_xmit_req_size() -> None:
    net = _Net(2, max_xmit_req_size=3)
    net.view()
    net.send(0, *_payloads(11))
    net.pump(drop=_to(net.addrs[1], _seqno_is(set(range(1, 11)))))
    b = net[1]
    b.tick(0.5)
    b.tick(1.0)
    (req,) = b.take_down()[0]  # type: ignore[misc]
    assert req.headers[ID].ranges == (1, 3) and b.stats()["xmit_seqnos_requested"] == 3


def test_nakack2_xmit_req_fits_one_bundle_and_the_rest_is_asked_at_the_next_runs() -> None:
    """Issue 12 item 2 (JGRP-1868): 10 KB bundles, max_xmit_req_size 5000, 20,000
    multicasts of which every other one is lost on the way to B.

    5000 scattered seqnos take 30 KB as ranges: the transport would drop such a
    request at every run and B would deliver #1 and nothing more. Each request
    is cut to what encodes within one bundle, lowest gaps first, and each run
    asks for the next ones: B delivers all 20,000 and nothing is oversized.
    """
    net = _Net(2, max_bundle_size=10_000, max_xmit_req_size=5000)
    net.view()
    b = net.addrs[1]
    net.send(0, *_payloads(20_000))
    net.pump(drop=_to(b, lambda s, d, m: as_header(m.headers[ID]).seqno % 2 == 0))
    assert net.delivered[b] == [b"m1"]
    now = 0.0
    while len(net.delivered[b]) < 20_000 and now < 10:
        now += 0.5
        net[0].tick(now)  # HIGHEST_SEQNO reveals the lost last one, #20,000
        net[1].tick(now)
        net.pump(now=now)
    assert net.delivered[b] == _payloads(20_000)
    assert net.oversized == []
    requests = [m for _, m in net.sent(XMIT_REQ)]
    sizes = [len(net.codec.encode(m.dest, b, [m])) for m in requests]
    stats = net[1].stats()
    assert max(sizes) <= 10_000 and stats["xmit_reqs_capped"] >= 5
    assert sum(size > 9_900 for size in sizes) == stats["xmit_reqs_capped"]  # capped ones are full
    assert stats["xmit_seqnos_requested"] == 10_000  # each gap asked once: every answer arrived


@pytest.mark.parametrize("budget", [0, 1, 5, 6, 7, 30, 47, 48, 49, 10_000])
@pytest.mark.parametrize(
    "seqnos",
    [
        [1, 2, 3, 7],
        list(range(2, 400, 2)),
        list(range(120, 140)),
        [250, 251, 70_000, 70_001, 2**32 + 5],
    ],
)
def test_nakack2_fit_ranges_packs_the_longest_prefix_within_the_budget(
    seqnos: list[int], budget: int
) -> None:
    """The size `fit_ranges` counts is the size the wire codec's msgpack emits."""
    ranges, count = fit_ranges(seqnos, budget)
    assert ranges == to_ranges(seqnos[:count])
    assert count == 0 or len(msgpack.packb(ranges)) <= budget
    if count < len(seqnos):
        assert len(msgpack.packb(to_ranges(seqnos[: count + 1]))) > budget


def test_nakack2_xmit_req_is_answered_by_multicasting_the_message_again() -> None:
    net = _Net(3)
    net.view()
    net.send(0, *_payloads(3))
    net.pump(drop=_to(net.addrs[1], _seqno_is({2})))
    net[1].tick(0.5)
    net[1].tick(1.0)
    net.pump(now=1.0)
    (xmit,) = [m for s, m in net.sent(MSG) if m.payload == b"m2"][1:]
    assert xmit.dest is None and xmit.flags & Flag.DONT_LOOPBACK
    assert net.delivered[net.addrs[1]] == _payloads(3)
    assert net.delivered[net.addrs[2]] == _payloads(3)  # C saw a duplicate, delivered once
    assert net[0].stats()["xmit_rsps_sent"] == 1 and net[2].stats()["duplicates"] == 1


def test_nakack2_xmit_rsp_is_a_unicast_when_use_mcast_xmit_is_off() -> None:
    """use_mcast_xmit=False: the original message goes back to the requester only."""
    net = _Net(3, use_mcast_xmit=False)
    net.view()
    net.send(0, *_payloads(3))
    net.pump(drop=_to(net.addrs[1], _seqno_is({2})))
    net[1].tick(0.5)
    net[1].tick(1.0)
    net.pump(now=1.0)
    (rsp,) = [m for _, m in net.sent(XMIT_RSP)]
    assert rsp.dest == net.addrs[1]
    assert rsp.headers[ID] == NakAckHeader2(XMIT_RSP, 2, net.addrs[0])
    assert net.delivered[net.addrs[1]] == _payloads(3)
    assert net[1].stats()["xmit_rsps_received"] == 1 and net[2].stats()["duplicates"] == 0


def test_nakack2_hostile_or_foreign_xmit_reqs_are_ignored() -> None:
    net = _Net(2)
    net.view()
    net.send(0, *_payloads(3))
    net.pump()
    a, b_addr = net[0], net.addrs[1]

    def req(sender: Address, ranges: tuple[int, ...]) -> Message:
        hdr = NakAckHeader2(XMIT_REQ, 0, sender, ranges)
        return Message(net.addrs[0], src=b_addr, headers={ID: hdr})

    a.up([req(b_addr, (1, 1)), req(net.addrs[0], (3, 1)), req(net.addrs[0], (1,))], 0.0)
    a.up([req(net.addrs[0], (1, 10**12))], 0.0)  # a huge range costs at most what we keep
    out = [m for item in a.take_down() if isinstance(item, list) for m in item]
    assert [m.payload for m in out] == _payloads(3)
    stats = a.stats()
    assert stats["xmit_reqs_not_mine"] == 1 and stats["malformed"] == 2


def test_nakack2_highest_seqno_is_sent_when_idle_and_skipped_after_traffic() -> None:
    """resend_last_seqno: once per seqno (resend_last_seqno_max_times=1), not after a send."""
    net = _Net(2, resend_last_seqno_max_times=1)
    net.view()
    a = net[0]
    a.tick(0.5)
    assert a.take_down() == []  # nothing sent yet
    net.send(0, b"m1", now=0.6)
    net.pump(now=0.6)
    a.tick(1.0)
    assert a.take_down() == []  # traffic since the last run
    a.tick(1.5)
    (hs,) = a.take_down()[0]  # type: ignore[misc]
    assert hs.dest is None and hs.headers[ID] == NakAckHeader2(HIGHEST_SEQNO, 1)
    assert hs.flags & Flag.DONT_LOOPBACK
    a.tick(2.0)
    assert a.take_down() == [] and a.stats()["highest_seqno_sent"] == 1


def test_nakack2_highest_seqno_resent_up_to_max_times() -> None:
    net = _Net(2, resend_last_seqno_max_times=3)
    net.view()
    a = net[0]
    net.send(0, b"m1")
    net.pump()
    for t in (0.5, 1.0, 1.5, 2.0, 2.5):
        a.tick(t)
    assert a.stats()["highest_seqno_sent"] == 3


def _highest_seqnos(proto: Nakack2) -> list[int]:
    """The seqnos of the HIGHEST_SEQNO announcements ``proto`` emitted since the last call."""
    out = [m for item in proto.take_down() if isinstance(item, list) for m in item]
    return [
        as_header(m.headers[ID]).seqno
        for m in out
        if as_header(m.headers[ID]).type == HIGHEST_SEQNO
    ]


def test_nakack2_highest_seqno_repeated_while_not_stable_and_stops_once_stable() -> None:
    """Issue 12 item 5: the announcement repeats at every idle run until STABLE shows that
    every member delivered the last message; a new message starts it again."""
    net = _Net(3)
    net.view()
    a = net[0]
    net.send(0, *_payloads(2))
    net.pump()
    a.tick(0.5)
    assert _highest_seqnos(a) == []  # traffic since the last run
    announced = []
    for t in (1.0, 1.5, 2.0, 2.5):
        a.tick(t)
        announced += _highest_seqnos(a)
    assert announced == [2, 2, 2, 2]
    a_addr, b_addr, c_addr = net.addrs
    partly = Digest({a_addr: (1, 2), b_addr: (0, 0), c_addr: (0, 0)})  # someone lacks #2
    net.event(a_addr, StableDigest(partly))
    a.tick(3.0)
    assert _highest_seqnos(a) == [2]
    stable = Digest({a_addr: (2, 2), b_addr: (0, 0), c_addr: (0, 0)})
    net.event(a_addr, StableDigest(stable))
    for t in (3.5, 4.0, 4.5):
        a.tick(t)
        assert _highest_seqnos(a) == []
    net.send(0, b"m3", now=4.6)
    net.pump(now=4.6)
    for t in (5.0, 5.5, 6.0):
        a.tick(t)
        announced = _highest_seqnos(a)
    assert announced == [3] and a.stats()["highest_seqno_sent"] == 7


def test_nakack2_highest_seqno_capped_by_max_times_stops_at_stability_too() -> None:
    """resend_last_seqno_max_times > 0 caps the repeats (JGroups); stability ends them sooner."""
    net = _Net(2, resend_last_seqno_max_times=3)
    net.view()
    a = net[0]
    net.send(0, b"m1")
    net.pump()
    a.tick(0.5)
    a.tick(1.0)
    net.event(net.addrs[0], StableDigest(Digest({net.addrs[0]: (1, 1), net.addrs[1]: (0, 0)})))
    for t in (1.5, 2.0, 2.5):
        a.tick(t)
    assert a.stats()["highest_seqno_sent"] == 1


def test_nakack2_last_message_and_first_announcement_lost_are_healed_by_the_next() -> None:
    """Issue 12 item 5: B loses A's last message and A's first HIGHEST_SEQNO; the second
    announcement makes B ask, and B delivers everything."""
    net = _Net(2)
    net.view()
    b = net.addrs[1]
    net.send(0, *_payloads(3))
    net.pump(drop=_to(b, _seqno_is({3})))
    lost_announcement = [False]

    def first_announcement(src: Address, dst: Address, msg: Message) -> bool:
        hdr = as_header(msg.headers.get(ID))
        if hdr is None or hdr.type != HIGHEST_SEQNO or lost_announcement[0]:
            return False
        lost_announcement[0] = True
        return True

    for t in (0.5, 1.0, 1.5, 2.0):
        net[0].tick(t)
        net.pump(now=t, drop=first_announcement)
    assert lost_announcement[0]
    assert net.delivered[b] == _payloads(3)
    assert net[1].stats()["highest_seqno_received"] >= 1


def test_nakack2_last_message_lost_is_asked_for_after_highest_seqno() -> None:
    """Loss of the last message heals without STABLE: HIGHEST_SEQNO reveals it."""
    net = _Net(2)
    net.view()
    net.send(0, *_payloads(3))
    net.pump(drop=_to(net.addrs[1], _seqno_is({3})))
    assert net.delivered[net.addrs[1]] == _payloads(2)
    for t in (0.5, 1.0):
        net[0].tick(t)
        net.pump(now=t)
    assert net.delivered[net.addrs[1]] == _payloads(3)
    assert net[1].stats()["highest_seqno_received"] == 1


# --- joining --------------------------------------------------------------------------------


def test_nakack2_group_first_view_makes_a_server_with_windows_at_zero() -> None:
    net = _Net(2)
    assert not net[0].stats()["is_server"]
    net.view(vid=1)
    assert net[0].stats()["is_server"]
    assert set(net[0].stats()["windows"]) == {str(net.addrs[1])}


def test_nakack2_joiner_queues_until_digest_and_become_server_then_replays_in_order() -> None:
    """The joiner's windows start at the digest; queued messages above it are delivered."""
    net = _Net(3)
    net.view([0, 1], vid=1)
    net.send(1, *_payloads(5))
    net.pump()
    (reply,) = [e for e in _events(net[0], GetDigest("TEST")) if isinstance(e, DigestReply)]
    assert reply.requester == "TEST" and reply.digest[net.addrs[1]] == (5, 5)
    view = net.view([0, 1, 2], vid=2)
    net.send(1, *_payloads(3, 6))
    net.pump()
    c = net[2]
    assert net.delivered[net.addrs[2]] == [] and c.stats()["become_server_queue"] == 8
    c.down_event(SetDigest(reply.digest), 0.0)
    c.down_event(BecomeServer(), 0.0)
    net.pump()
    assert net.delivered[net.addrs[2]] == _payloads(3, 6)
    assert c.stats()["become_server_queue_replayed"] == 8 and c.stats()["duplicates"] == 5
    assert view.members[2] == net.addrs[2]
    net.send(1, b"after")
    net.pump()
    assert net.delivered[net.addrs[2]][-1] == b"after"


def _events(proto: Nakack2, event: Event) -> list[Event]:
    proto.down_event(event, 0.0)
    return [e for e in proto.take_up() if not isinstance(e, list)]


def test_nakack2_digest_at_the_view_starts_a_rejoiner_before_what_was_multicast_in_it() -> None:
    """GetDigest naming the installed view answers with the digest of its installation.

    C is in view 2 but its JOIN_RSP was lost; B multicasts 6-8 in view 2 (C queues
    them), then C asks again. The digest as it is now would start C's window for B at 8
    and C would never deliver them; the one of view 2's installation starts it at 5.
    A view id that is not the installed view's gets the digest as it is now.
    """
    net = _Net(3)
    net.view([0, 1], vid=1)
    net.send(1, *_payloads(5))
    net.pump()
    view = net.view([0, 1, 2], vid=2)
    net.send(1, *_payloads(3, 6))
    net.pump()
    a, b, c = net.addrs

    def digest(**kw: Any) -> Digest:
        (reply,) = [
            e for e in _events(net[0], GetDigest("GMS", **kw)) if isinstance(e, DigestReply)
        ]
        return reply.digest

    assert digest()[b] == (8, 8)
    assert digest(view_id=view.view_id)[b] == (5, 5)
    assert digest(view_id=View.create(a, 1, [a, b]).view_id)[b] == (8, 8)
    net[2].down_event(SetDigest(digest(view_id=view.view_id)), 0.0)
    net[2].down_event(BecomeServer(), 0.0)
    net.pump()
    assert net.delivered[c] == _payloads(3, 6)


@pytest.mark.parametrize("later_batch", [False, True], ids=["same-batch", "later-batch"])
def test_nakack2_view_digest_stops_at_the_view_s_view_multicast(later_batch: bool) -> None:
    """As MCAST's in campaign udp-mcast 40480: the digest a rejoiner gets for a view
    (GetDigest naming it) holds what was delivered up to the view's VIEW multicast, not
    what NAKACK2 had received when the view reached it: C's multicasts of the new view,
    delivered after A's VIEW (in the same batch, or in a batch before GMS installed the
    view), are owed to the rejoiner D. Counted as delivered before the view, D would never
    get them."""
    a, b, c, d = addresses("ABCD")
    proto = started(Nakack2(), b, view=view_of(a, b, c))
    view = view_of(a, b, c, d, counter=2)
    the_view = Message(None, b"VIEW", src=a, flags=Flag.INTERNAL, headers={ID: 1})
    sent_in_view = [_msg_from(c, s) for s in (1, 2, 3)]
    if later_batch:
        proto.up([the_view], 0.0)
        proto.up(sent_in_view, 0.05)
    else:
        proto.up([the_view, *sent_in_view], 0.0)
    assert _delivered(proto) == [b"VIEW", b"1", b"2", b"3"]
    proto.down_event(ViewChange(view), 0.1)
    proto.take_down()
    (reply,) = [
        e for e in _events(proto, GetDigest("GMS", view.view_id)) if isinstance(e, DigestReply)
    ]
    assert reply.digest[a][0] == 1  # the VIEW itself came before the view
    assert reply.digest[c][0] == 0
    (now,) = [e for e in _events(proto, GetDigest("GMS")) if isinstance(e, DigestReply)]
    assert now.digest[c] == (3, 3)  # the digest now (a new joiner's) counts them


def test_nakack2_view_digest_passes_over_a_view_s_own_view_multicast_delivered_after_it() -> None:
    """A joiner installs its first view from the JOIN_RSP and delivers that view's VIEW from
    its become_server_queue afterwards: that VIEW is not the next view's. Taken for it, J's
    digest for the next view (created by the same A, which then leaves, so J answers a
    rejoiner R) would start R's window for C before C's multicasts of the view between,
    which were never owed to R."""
    a, c, j, r = addresses("ACJR")
    proto = started(Nakack2(), j)
    proto.up([_msg_from(a, 6, int(Flag.INTERNAL))], 0.0)  # A's VIEW of view 2: J queues it
    proto.down_event(SetDigest(Digest({a: (5, 5), c: (3, 3)})), 0.0)
    proto.down_event(ViewChange(View.create(a, 2, [a, c, j])), 0.0)
    proto.down_event(BecomeServer(), 0.0)
    assert _delivered(proto) == [b"6"]
    proto.up([_msg_from(c, s) for s in (4, 5, 6)], 0.1)  # multicast in view 2
    proto.up([_msg_from(a, 7, int(Flag.INTERNAL))], 0.2)  # A's VIEW of view 3
    view = View(ViewId(3, a), [j, c, r])  # A left, R joined
    proto.down_event(ViewChange(view), 0.3)
    proto.take_down()
    (reply,) = [
        e for e in _events(proto, GetDigest("GMS", view.view_id)) if isinstance(e, DigestReply)
    ]
    assert reply.digest[c] == (6, 6)


def test_nakack2_leaving_forgets_the_digest_at_the_view() -> None:
    net = _Net(2)
    view = net.view(vid=1)
    net.send(1, *_payloads(2))
    net.pump()
    net[0].down_event(Disconnect(), 0.0)
    net[0].take_down()
    (reply,) = [
        e for e in _events(net[0], GetDigest("GMS", view.view_id)) if isinstance(e, DigestReply)
    ]
    assert net.addrs[1] not in reply.digest


def test_nakack2_become_server_queue_is_bounded_and_drops_the_oldest() -> None:
    """With retransmission the queue keeps the newest become_server_queue_size (50)."""
    c = _joiner(xmit_interval=0.5)
    for s in range(1, 71):
        c.up([_msg_from(Address(2, "B"), s)], 0.0)
    stats = c.stats()
    assert stats["become_server_queue"] == 50 and stats["become_server_queue_dropped"] == 20
    assert stats["become_server_queue_bound"] == 50
    c.down_event(SetDigest(Digest({Address(2, "B"): (0, 0)})), 0.0)
    c.down_event(BecomeServer(), 0.0)
    assert _delivered(c) == []  # 1..20 are gone: retransmission has to bring them
    assert c.stats()["windows"][str(Address(2, "B"))] == {
        "hd": 0,
        "hr": 70,
        "size": 50,
        "missing": 20,
    }


def test_nakack2_become_server_queue_is_unbounded_without_retransmission() -> None:
    """Seed 003: xmit_interval <= 0 must keep every queued message (nothing heals a drop)."""
    c = _joiner(xmit_interval=0)
    for s in range(1, 71):
        c.up([_msg_from(Address(2, "B"), s)], 0.0)
    assert c.stats()["become_server_queue"] == 70 and c.stats()["become_server_queue_bound"] is None
    c.down_event(SetDigest(Digest({Address(2, "B"): (0, 0)})), 0.0)
    c.down_event(BecomeServer(), 0.0)
    assert _delivered(c) == [f"{s}".encode() for s in range(1, 71)]


def test_nakack2_become_server_queue_holds_only_data_messages() -> None:
    """HIGHEST_SEQNO is useless later and XMIT_REQ is answered at once: neither is queued."""
    c = _joiner()
    b = Address(2, "B")
    hs = Message(None, src=b, headers={ID: NakAckHeader2(HIGHEST_SEQNO, 5)})
    req = Message(c.local_address, src=b, headers={ID: NakAckHeader2(XMIT_REQ, 0, b, (1, 1))})
    rsp = Message(c.local_address, b"1", src=b, headers={ID: NakAckHeader2(XMIT_RSP, 1, b)})
    c.up([hs, req, rsp, _msg_from(b, 2)], 0.0)
    stats = c.stats()
    assert stats["become_server_queue"] == 2 and stats["xmit_reqs_received"] == 1
    c.down_event(SetDigest(Digest({b: (0, 0)})), 0.0)
    c.down_event(BecomeServer(), 0.0)
    assert _delivered(c) == [b"1", b"2"] and c.stats()["xmit_rsps_received"] == 1


def _joiner(**props: Any) -> Nakack2:
    c = Nakack2(**props)
    me, b = Address(3, "C"), Address(2, "B")
    c.start(me, "c", 0.0)
    c.down_event(ViewChange(View.create(b, 2, [b, me])), 0.0)
    return c


def _msg_from(src: Address, seqno: int, flags: int = 0) -> Message:
    return Message(None, f"{seqno}".encode(), src=src, flags=flags,
                   headers={ID: NakAckHeader2(MSG, seqno)})  # fmt: skip


def _delivered(proto: Nakack2) -> list[bytes]:
    return [m.payload for item in proto.take_up() if isinstance(item, list) for m in item]


# --- VIEW_SEQNO: what a member sent before it installed the view a joiner is new in ------------


def _view_seqno(src: Address, dest: Address | None, seqno: int) -> Message:
    return Message(dest, src=src, flags=Flag.OOB | Flag.INTERNAL,
                   headers={ID: NakAckHeader2(VIEW_SEQNO, seqno)})  # fmt: skip


def _messages(proto: Nakack2, event: Event) -> list[Message]:
    proto.down_event(event, 0.0)
    return [m for item in proto.take_down() if isinstance(item, list) for m in item]


def test_view_seqno_sent_to_members_new_in_the_view() -> None:
    """B installs {A,B,C} after sending 4 in {A,B}: C (new) gets VIEW_SEQNO(4), A nothing.

    Sent only without retransmission (seed 003; with it C asks for what it lacks, as
    in JGroups). C's first view is its join: it had no view to send in, so it sends
    none. The control message is not numbered and goes down like XMIT_REQ (OOB,
    INTERNAL), so nothing below NAKACK2 makes it reliable or orders it.
    """
    with_xmit = _Net(3)
    with_xmit.view([0, 1], vid=1)
    assert (
        _messages(with_xmit[1], ViewChange(View.create(with_xmit.addrs[0], 2, with_xmit.addrs)))
        == []
    )
    net = _Net(3, xmit_interval=0)
    net.view([0, 1], vid=1)
    net.send(1, *_payloads(4))
    net.pump()
    view = View.create(net.addrs[0], 2, net.addrs)
    (msg,) = _messages(net[1], ViewChange(view))
    assert msg.dest == net.addrs[2] and msg.headers[ID] == NakAckHeader2(VIEW_SEQNO, 4)
    assert msg.flags == Flag.OOB | Flag.INTERNAL
    assert net[1].stats()["view_seqnos_sent"] == 1 and net[1].stats()["seqno"] == 4
    assert _messages(net[2], ViewChange(view)) == []
    assert net[2].stats()["view_seqnos_sent"] == 0
    bigger = View.create(net.addrs[0], 3, [*net.addrs, Address(9, "D")])
    (to_d,) = _messages(net[1], ViewChange(bigger))
    assert to_d.dest == Address(9, "D") and to_d.headers[ID].seqno == 4


def test_view_seqno_not_sent_to_joiners_the_coordinators_tmp_view_fanned_out_to() -> None:
    """The coordinator's transport fans multicasts out to the TmpView's joiners from the
    digest on: they get every message after it, so a VIEW_SEQNO would only make them skip
    messages they have. A member new in the view but not in the TmpView still gets one."""
    net = _Net(3, xmit_interval=0)
    net.view([0, 1], vid=1)
    a = net[0]
    tmp = View.create(net.addrs[0], 2, net.addrs)
    assert _messages(a, TmpView(tmp)) == []
    net.send(0, *_payloads(3))  # after the digest: fanned out to C as well
    a.take_down()
    assert [m.dest for m in _messages(a, ViewChange(tmp))] == []
    assert a.stats()["view_seqnos_sent"] == 0
    later = View.create(net.addrs[0], 3, [*net.addrs, Address(9, "D")])
    assert [m.dest for m in _messages(a, ViewChange(later))] == [Address(9, "D")]


def test_view_seqno_moves_a_joiners_window_past_what_was_sent_before_it_joined() -> None:
    """Seed 003 over TCP: C's digest says B is at 5, but B sent 6 and 7 to {A,B} only,
    before it installed {A,B,C}; VIEW_SEQNO(7) lets C's window start at 7.

    Before SetDigest C keeps 7 as B's floor; after it, the window moves and a
    server delivers the run it already holds above the floor.
    """
    b = Address(2, "B")
    before = _joiner(xmit_interval=0)
    before.up([_msg_from(b, 8), _view_seqno(b, before.local_address, 7), _msg_from(b, 9)], 0.0)
    before.down_event(SetDigest(Digest({b: (5, 5)})), 0.0)
    before.down_event(BecomeServer(), 0.0)
    assert _delivered(before) == [b"8", b"9"]
    before.up([_msg_from(b, 10)], 0.0)
    assert _delivered(before) == [b"10"]
    assert before.stats()["windows"][str(b)] == {"hd": 10, "hr": 10, "size": 0, "missing": 0}
    assert before.stats()["view_seqnos_received"] == 1

    after = _joiner(xmit_interval=0)
    after.down_event(SetDigest(Digest({b: (5, 5)})), 0.0)
    after.down_event(BecomeServer(), 0.0)
    after.up([_msg_from(b, 8), _msg_from(b, 9)], 0.0)  # overtook the VIEW_SEQNO
    assert _delivered(after) == []
    after.up([_view_seqno(b, after.local_address, 7)], 0.0)
    assert _delivered(after) == [b"8", b"9"]
    assert after.stats()["windows_moved_by_view_seqno"] == 1

    between = _joiner(xmit_interval=0)  # a window from SetDigest, not a server yet
    between.down_event(SetDigest(Digest({b: (5, 5)})), 0.0)
    between.up([_msg_from(b, 8), _view_seqno(b, between.local_address, 7)], 0.0)
    between.down_event(BecomeServer(), 0.0)
    assert _delivered(between) == [b"8"]


def test_view_seqno_never_moves_a_window_back_and_ignores_bad_ones() -> None:
    """A floor or VIEW_SEQNO below the window (or the digest) changes nothing; one with a
    negative seqno, or from ourselves, is counted and ignored."""
    net = _Net(2)
    net.view()
    a = net[0]
    b = net.addrs[1]
    a.up([_msg_from(b, s) for s in (1, 2, 3)], 0.0)
    a.take_up()
    a.up([_view_seqno(b, a.local_address, 2), _view_seqno(b, a.local_address, -1)], 0.0)
    a.up([_view_seqno(a.local_address, a.local_address, 7)], 0.0)
    stats = a.stats()
    assert stats["windows"][str(b)]["hd"] == 3
    assert stats["view_seqnos_received"] == 3 and stats["view_seqnos_ignored"] == 2
    assert stats["windows_moved_by_view_seqno"] == 0

    c = _joiner(xmit_interval=0)  # view {B, C}
    c.up([_view_seqno(b, c.local_address, 3)], 0.0)
    c.down_event(SetDigest(Digest({b: (5, 5)})), 0.0)
    c.down_event(BecomeServer(), 0.0)
    assert c.stats()["windows"][str(b)]["hd"] == 5  # the digest is above B's floor


def test_view_seqno_from_a_merge_partner_before_the_merge_view_starts_its_window() -> None:
    """Over TCP, D (the other subgroup) installs the merge view first and sends VIEW_SEQNO(9)
    while A's view is still {A, B}: D's 8 and 9 went to its old subgroup only. A keeps 9 as
    D's floor, so the window the merge view and MergeDigest (D at 7) give D starts at 9, and
    D's next multicasts deliver instead of waiting for 8 and 9 for ever."""
    net = _Net(2, xmit_interval=0)
    net.view()
    a = net[0]
    b, d = net.addrs[1], Address(9, "D")
    a.up([_view_seqno(d, a.local_address, 9)], 0.0)
    assert a.stats()["view_seqnos_ignored"] == 0 and str(d) not in a.stats()["windows"]
    a.down_event(ViewChange(View.create(net.addrs[0], 2, [net.addrs[0], b, d])), 0.0)
    a.down_event(MergeDigest(Digest({d: (7, 7)})), 0.0)
    a.take_down()
    a.up([_msg_from(d, 10), _msg_from(d, 11)], 0.0)
    assert _delivered(a) == [b"10", b"11"]
    assert a.stats()["windows"][str(d)]["missing"] == 0


def test_view_seqno_floors_are_bounded() -> None:
    """Floors from members we have no window for are capped (hostile input): past the cap a
    VIEW_SEQNO from yet another member is counted and ignored."""
    net = _Net(2, xmit_interval=0)
    net.view()
    a = net[0]
    strangers = [Address(100 + i, f"S{i}") for i in range(1025)]
    a.up([_view_seqno(s, a.local_address, 5) for s in strangers], 0.0)
    assert a.stats()["view_seqnos_ignored"] == 1
    a.up([_view_seqno(strangers[0], a.local_address, 6)], 0.0)  # a known one still moves up
    assert a.stats()["view_seqnos_ignored"] == 1


def test_nakack2_set_digest_moves_windows_forward_only_and_never_our_own() -> None:
    net = _Net(3)
    net.view()
    a = net[0]
    b, c = net.addrs[1], net.addrs[2]
    a.up([_msg_from(b, s) for s in (1, 2)], 0.0)
    a.up([_msg_from(c, 3)], 0.0)
    a.take_up()
    a.down_event(SetDigest(Digest({b: (1, 1), c: (2, 2), net.addrs[0]: (9, 9)})), 0.0)
    assert _delivered(a) == [b"3"]  # C's window moved to 2: its held #3 is ready
    windows = a.stats()["windows"]
    assert windows[str(b)]["hd"] == 2 and windows[str(c)]["hd"] == 3
    assert str(net.addrs[0]) not in windows and a.digest()[net.addrs[0]] == (0, 0)


def test_nakack2_merge_digest_adds_missing_windows_and_a_stale_one_moves_when_purged() -> None:
    """B went on in a view without A and purged what it sent there, yet A's view still
    lists B (B is in A's subgroup and in another). The merge digest adds D's window at 4
    but leaves B's alone (B may still hold #1-#7: see the merge rule's own test); B, asked
    for what it purged, answers VIEW_SEQNO 7, which moves A's window to 7 and delivers
    what A holds above: A does not ask for #1-#7 forever."""
    net = _Net(2)
    net.view()
    a = net[0]
    b, d = net.addrs[1], Address(9, "D")
    a.up([_msg_from(b, 8)], 0.0)
    a.take_up()
    a.down_event(MergeDigest(Digest({b: (7, 7), d: (4, 4), net.addrs[0]: (9, 9)})), 0.0)
    assert _delivered(a) == [] and a.stats()["merge_windows_kept"] == 1
    a.up([_view_seqno(b, net.addrs[0], 7)], 0.0)
    assert _delivered(a) == [b"8"]
    a.down_event(ViewChange(View.create(net.addrs[0], 5, [*net.addrs, d])), 0.0)
    windows = a.stats()["windows"]
    assert windows[str(b)]["hd"] == 8 and windows[str(d)]["hd"] == 4
    assert a.digest()[net.addrs[0]] == (0, 0)  # never our own


def test_nakack2_member_that_left_asks_for_nothing_and_delivers_nothing() -> None:
    """After Disconnect (GMS left) a gap in a window kept from the last view must not
    make it ask the sender for ever: the requests look alive to the sender's failure
    detector, which would then never exclude a member whose leave did not get through."""
    net = _Net(2)
    net.view()
    a = net[0]
    b = net.addrs[1]
    a.up([_msg_from(b, 3)], 0.0)  # #1 and #2 missing
    a.down_event(Disconnect(), 0.1)
    assert a.take_down() == [Disconnect()]
    assert a.next_deadline() == math.inf and a.stats()["windows"] == {}
    a.up([_msg_from(b, 1)], 0.2)
    assert _delivered(a) == [] and a.stats()["non_member_dropped"] == 1


def test_nakack2_merge_digest_never_moves_a_window_back() -> None:
    net = _Net(2)
    net.view()
    a = net[0]
    b = net.addrs[1]
    a.up([_msg_from(b, s) for s in (1, 2, 3)], 0.0)
    a.down_event(MergeDigest(Digest({b: (1, 1)})), 0.0)
    assert a.stats()["windows"][str(b)]["hd"] == 3


def _xmit_reqs(proto: Nakack2) -> list[NakAckHeader2]:
    out = [m for item in proto.take_down() if isinstance(item, list) for m in item]
    hdrs = [m.headers.get(ID) for m in out]
    return [h for h in hdrs if isinstance(h, NakAckHeader2) and h.type == XMIT_REQ]


def test_nakack2_merge_digest_never_skips_a_gap_our_subgroup_member_retransmits() -> None:
    """Issue 37 bug 6b (chaos run, udp, 22% loss between A and C): C was in A's subgroup
    and, through a coordinator that moved on, in another one, whose digest said C
    delivered up to 9. A's window for C stood at 1, #2-#3 being retransmitted, #4-#5 held
    behind them. The merge digest moved it to 9: #2-#3 skipped (``skipped_by_window_move``)
    though C, still in A's view, held them. Now the window of a member of our own view is
    left alone, A asks C for #6-#9 at once, and retransmission fills everything."""
    me, b, c = addresses("ABC")
    a = started(Nakack2(xmit_interval=0.5), me, view=View.create(me, 1, [me, b, c]))
    a.up([_msg_from(c, 1), _msg_from(c, 4), _msg_from(c, 5)], 0.0)
    assert _delivered(a) == [b"1"]
    a.down_event(MergeDigest(Digest({b: (0, 0), c: (9, 9)})), 0.1)
    assert _delivered(a) == []
    stats = a.stats()
    assert stats["skipped_by_window_move"] == 0 and stats["merge_windows_kept"] == 1
    assert stats["windows"][str(c)]["hd"] == 1
    assert [(h.sender, h.ranges) for h in _xmit_reqs(a)] == [(c, (6, 9))]
    a.tick(0.5)
    a.tick(1.0)  # the gap, seen at two runs, is asked for
    assert [(h.sender, h.ranges) for h in _xmit_reqs(a)] == [(c, (2, 3))]
    a.up([_msg_from(c, s) for s in (2, 3, 6, 7, 8, 9)], 1.1)  # the retransmissions
    assert _delivered(a) == [b"%d" % s for s in range(2, 10)]
    assert a.stats()["skipped_by_window_move"] == 0


def test_nakack2_merge_digest_delivers_what_was_kept_from_a_member_back_below_its_seqno() -> None:
    """Rule: a digest that reopens a window (its member was in an earlier view) delivers, in
    seqno order, what a server kept from that sender while it had no window, above what it
    had delivered of it, instead of dropping it as a duplicate. Campaign udp seed 72298: B,
    split off in [B|7] = {B, C}, kept E's #13-#19 (#19 multicast in E's view [D|12], which
    holds B); B's merge took E's seqno 19 from C, a stale representative of [D|10], and the
    merge digest opened B's window for E at 19 (from 12, where it stood when E left B's
    view): the replay at the merge view dropped #13-#19, and B, which then installed [D|12],
    never delivered #19. What a member never in our view sent below the digest is still
    dropped (another subgroup's stream: campaign udp-total 257)."""
    me, c, e = addresses("BCE")
    d = Address(9, "D")
    b = started(Nakack2(xmit_interval=0.5), me, view=View.create(me, 1, [me, c, e]))
    b.up([_msg_from(e, 1)], 0.0)
    assert _delivered(b) == [b"1"]
    b.down_event(ViewChange(View.create(me, 2, [me, c])), 0.1)  # E's window retired at 1
    b.take_down()
    b.up([_msg_from(e, s) for s in (4, 1, 2, 3, 5)], 0.2)  # #1: a late retransmission
    b.up([_msg_from(d, 2)], 0.2)
    assert _delivered(b) == [] and b.stats()["non_member_kept"] == 6
    b.down_event(MergeDigest(Digest({c: (0, 0), e: (4, 4), d: (2, 2)})), 0.3)
    assert _delivered(b) == [b"2", b"3", b"4"]  # #1 was delivered before, #5 waits
    b.down_event(ViewChange(View.create(me, 3, [me, c, e, d])), 0.3)
    assert _delivered(b) == [b"5"]
    stats = b.stats()
    assert stats["windows"][str(e)]["hd"] == 5 and stats["duplicates"] == 2
    assert stats["skipped_by_window_move"] == 0


def test_nakack2_xmit_req_for_purged_seqnos_is_answered_with_view_seqno() -> None:
    """The other half of the merge rule: a window left alone after a merge may ask for
    what its sender purged (the sender went on in a view without us, whose members all
    delivered it). The sender answers such an XMIT_REQ with VIEW_SEQNO at its purge point,
    so the requester moves past what truly cannot be filled (counted and warned about
    there) instead of asking for ever."""
    net = _Net(2)
    net.view()
    net.send(0, *_payloads(5))
    net.pump()
    a, me, b = net[0], net.addrs[0], net.addrs[1]
    a.down_event(StableDigest(Digest({me: (4, 5), b: (0, 0)})), 0.0)
    a.take_down()
    req = Message(me, src=b, headers={ID: NakAckHeader2(XMIT_REQ, 0, me, (2, 5))})
    a.up([req], 0.1)
    out = [m for item in a.take_down() if isinstance(item, list) for m in item]
    answers = [(m.dest, m.headers[ID]) for m in out if m.headers.get(ID) is not None]
    assert (b, NakAckHeader2(VIEW_SEQNO, 4)) in answers
    assert [m.payload for m in out if m.payload] == [b"m5"]  # what is kept still comes
    assert a.stats()["xmit_reqs_for_purged"] == 1


def test_nakack2_view_change_drops_left_members_and_adds_new_ones_at_zero() -> None:
    net = _Net(3)
    net.view([0, 1])
    a = net[0]
    a.up([_msg_from(net.addrs[1], 2)], 0.0)
    net.view([0, 2], vid=2)
    assert set(a.stats()["windows"]) == {str(net.addrs[2])}
    assert a.stats()["windows"][str(net.addrs[2])]["hd"] == 0 and a.retained() == 0


# --- digests and stability ------------------------------------------------------------------


def test_nakack2_answers_get_digest_and_consumes_it() -> None:
    net = _Net(2)
    net.view()
    net.send(0, *_payloads(2))
    net.pump()
    a = net[0]
    a.down_event(GetDigest("STABLE"), 0.0)
    assert a.take_down() == []
    (reply,) = a.take_up()
    assert reply == DigestReply("STABLE", Digest({net.addrs[0]: (2, 2), net.addrs[1]: (0, 0)}))


def test_nakack2_stable_digest_purges_what_everyone_delivered() -> None:
    net = _Net(2)
    net.view()
    net.send(0, *_payloads(5))
    net.pump()
    a = net[0]
    a.down_event(StableDigest(Digest({net.addrs[0]: (3, 5)})), 0.0)
    assert a.take_down() == []  # consumed
    stats = a.stats()
    assert stats["sent_retained"] == 2 and stats["purged"] == 3 and stats["sent_low"] == 3
    a.down_event(StableDigest(Digest({net.addrs[0]: (5, 5)})), 0.0)
    assert a.retained() == 0


def test_nakack2_stability_showing_more_than_we_received_triggers_retransmission() -> None:
    """A seqno above ours in two stability rounds in a row is asked for (JGRP-2678)."""
    net = _Net(2, resend_last_seqno=False)
    net.view()
    net.send(0, *_payloads(3))
    net.pump(drop=_to(net.addrs[1], _seqno_is({3})))
    b = net[1]
    stable = StableDigest(Digest({net.addrs[0]: (2, 3)}))
    b.down_event(stable, 0.0)
    assert b.take_down() == []  # maybe in flight: not yet
    b.down_event(stable, 0.0)
    (req,) = b.take_down()[0]  # type: ignore[misc]
    assert req.headers[ID] == NakAckHeader2(XMIT_REQ, 0, net.addrs[0], (3, 3))


# --- no retransmission (seed 003) -----------------------------------------------------------


def _after_a_gap_then_quiet(xmit_interval: float) -> tuple[Nakack2, Nakack2, dict[str, list[int]]]:
    """A sends m1..m3, B loses m2; then everything that could make NAKACK2 send on its own.

    B gets two stability digests and a HIGHEST_SEQNO showing seqnos it lacks;
    then both run their timers five times, a second apart, with no new
    traffic: with retransmission the second run sends HIGHEST_SEQNO (the first
    skips it after new traffic) and asks for the gap seen at the first.
    Returns A, B and the NAKACK2 header types each sent after the multicasts.
    """
    net = _Net(2, xmit_interval=xmit_interval)
    net.view()
    a, b = net[0], net[1]
    net.send(0, *_payloads(3))
    net.pump(drop=_to(net.addrs[1], _seqno_is({2})))
    assert net.delivered[net.addrs[1]] == [b"m1"]  # ordered: #3 waits for #2
    sent: dict[str, list[int]] = {"A": [], "B": []}

    def collect() -> None:
        for name, proto in (("A", a), ("B", b)):
            for item in proto.take_down():
                assert isinstance(item, list)
                sent[name] += [as_header(m.headers[ID]).type for m in item]

    stable = StableDigest(Digest({net.addrs[0]: (1, 9)}))
    b.down_event(stable, 0.0)
    b.down_event(stable, 0.0)
    b.up([Message(None, src=net.addrs[0], headers={ID: NakAckHeader2(HIGHEST_SEQNO, 9)})], 0.0)
    collect()
    for now in (1.0, 2.0, 3.0, 4.0, 5.0):
        a.tick(now)
        b.tick(now)
        collect()
    return a, b, sent


@pytest.mark.parametrize("xmit_interval", [0, -1])
def test_seed003_no_retransmit_task_no_last_seqno_task_no_stability_xmit(
    xmit_interval: float,
) -> None:
    """xmit_interval <= 0: seqnos only order; nothing ever asks for retransmission.

    No retransmit task (no deadline, a tick asks for no gap), no last-seqno
    task (no HIGHEST_SEQNO on any of several quiet runs), and neither
    stability nor a HIGHEST_SEQNO received triggers an XMIT_REQ.
    """
    a, b, sent = _after_a_gap_then_quiet(xmit_interval)
    assert a.next_deadline() == b.next_deadline() == math.inf
    assert not a.stats()["xmit_task_running"] and not b.stats()["xmit_task_running"]
    assert sent == {"A": [], "B": []}
    assert a.stats()["highest_seqno_sent"] == 0 and b.stats()["xmit_reqs_sent"] == 0


def test_seed003_same_quiet_runs_with_xmit_interval_above_0_send_highest_seqno_and_xmit_reqs() -> (
    None
):
    """The contrast to the test above: the same scenario with retransmission on sends both."""
    a, b, sent = _after_a_gap_then_quiet(0.5)
    # From the second run on (the first came after new traffic); no stability reaches A.
    assert sent["A"] == [HIGHEST_SEQNO] * 4
    assert sent["B"] and set(sent["B"]) == {XMIT_REQ}
    assert a.stats()["highest_seqno_sent"] == 4 and b.stats()["xmit_reqs_sent"] == len(sent["B"])


def test_seed003_xmit_interval_changed_at_run_time() -> None:
    """Starts/stops the retransmit task and makes the queue bounded/unbounded."""
    c = _joiner(xmit_interval=0)
    for s in range(1, 61):
        c.up([_msg_from(Address(2, "B"), s)], 0.0)
    c.set_property("xmit_interval", "200ms", 1.0)
    assert c.next_deadline() == pytest.approx(1.2)
    stats = c.stats()
    assert stats["become_server_queue"] == 50 and stats["become_server_queue_dropped"] == 10
    c.set_property("xmit_interval", 0, 2.0)
    assert c.next_deadline() == math.inf and c.stats()["become_server_queue_bound"] is None
    for s in range(61, 131):
        c.up([_msg_from(Address(2, "B"), s)], 2.0)
    assert c.stats()["become_server_queue"] == 120
    c.set_property("become_server_queue_size", 10, 3.0)
    assert c.stats()["become_server_queue"] == 120  # unbounded stays unbounded
    c.set_property("xmit_interval", 1.0, 3.0)
    assert c.stats()["become_server_queue"] == 10 and c.next_deadline() == 4.0


@pytest.mark.parametrize(
    ("layers", "reason"),
    [
        (["SIM"], "the transport SIM can lose messages"),
        (["UDP"], "the transport UDP can lose messages"),
        (["TCP", "DISCARD"], "DISCARD sits below NAKACK2"),
    ],
)
def test_seed003_no_retransmission_refused_where_messages_can_be_lost(
    layers: list[str], reason: str
) -> None:
    config = StackConfig.of(*layers, ("NAKACK2", {"xmit_interval": 0}))
    with pytest.raises(PropertyError, match=reason) as info:
        config.build()
    assert "gap forever" in str(info.value) and "NAKACK2.xmit_interval must be > 0" in str(
        info.value
    )


def test_seed003_no_retransmission_accepted_over_tcp_and_lossless_sim() -> None:
    StackConfig.of("TCP", ("NAKACK2", {"xmit_interval": "0ms"})).build()
    StackConfig.of(("SIM", {"lossless": True}), ("NAKACK2", {"xmit_interval": -1})).build()
    StackConfig.of("SIM", "DISCARD", "NAKACK2").build()  # with retransmission: fine


def test_seed003_run_time_switch_to_no_retransmission_refused_over_lossy_transport() -> None:
    layers = StackConfig.of("SIM", "NAKACK2").build()
    nak = layers[1]
    nak.start(Address(1, "A"), "c", 0.0)
    with pytest.raises(PropertyError, match="SIM can lose messages"):
        nak.set_property("xmit_interval", 0, 0.1)
    assert nak.properties()["xmit_interval"] == 0.5 and nak.next_deadline() == 0.5


# --- header encoding ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seqnos", "ranges"),
    [([], ()), ([4], (4, 4)), ([1, 2, 3, 7], (1, 3, 7, 7)), ([2, 4, 5, 6], (2, 2, 4, 6))],
)
def test_nakack2_xmit_req_ranges_round_trip(seqnos: list[int], ranges: tuple[int, ...]) -> None:
    assert to_ranges(seqnos) == ranges
    assert expand_ranges(ranges, 1, 100, 1000) == seqnos


@pytest.mark.parametrize(
    ("ranges", "low", "high", "limit", "expected"),
    [
        ((1,), 1, 9, 9, None),
        ((3, 2), 1, 9, 9, None),
        ((0, 2), 1, 9, 9, None),
        ((1, 10**15), 5, 8, 9, [5, 6, 7, 8]),
        ((1, 9), 1, 9, 3, [1, 2, 3]),
    ],
)
def test_nakack2_hostile_ranges_are_refused_or_clamped(
    ranges: tuple[int, ...], low: int, high: int, limit: int, expected: list[int] | None
) -> None:
    assert expand_ranges(ranges, low, high, limit) == expected


def test_nakack2_properties_have_jgroups_names_and_udp_defaults() -> None:
    props = Nakack2().properties()
    assert props["xmit_interval"] == 0.5 and props["use_mcast_xmit"] is True
    assert props["max_xmit_req_size"] == 1024 and props["become_server_queue_size"] == 50
    with pytest.raises(PropertyError, match=r"NAKACK2\.max_xmit_req_size must be >= 1"):
        Nakack2(max_xmit_req_size=0)


def test_nakack2_stats_show_windows_xmit_counters_and_queue() -> None:
    net = _Net(2)
    net.view()
    net.send(0, *_payloads(2))
    net.pump()
    stats = net[1].stats()
    for key in (
        "xmit_reqs_sent",
        "xmit_reqs_received",
        "xmit_rsps_sent",
        "xmit_rsps_received",
        "non_member_dropped",
        "become_server_queue",
        "become_server_queue_dropped",
        "highest_seqno_sent",
    ):
        assert stats[key] == 0, key
    assert stats["windows"][str(net.addrs[0])] == {"hd": 2, "hr": 2, "size": 0, "missing": 0}


# --- limits against abuse (issue 18) -----------------------------------------------------


def test_nakack2_serves_at_most_max_xmits_per_interval_to_one_member() -> None:
    """A member asking for everything again and again gets ``max_xmits_per_interval``
    messages per xmit_interval; the rest is counted as ``xmits_capped``, and another
    member's requests are served from their own budget."""
    net = _Net(3, max_xmits_per_interval=5, xmit_interval=0.5)
    net.view()
    net.send(0, *_payloads(8))
    net.pump()
    a = net[0]

    def resent(requester: Address, now: float) -> int:
        hdr = NakAckHeader2(XMIT_REQ, 0, net.addrs[0], (1, 8))
        a.up([Message(net.addrs[0], src=requester, headers={ID: hdr})], now)
        return len([m for item in a.take_down() if isinstance(item, list) for m in item])

    assert [resent(net.addrs[1], t) for t in (0.0, 0.1, 0.2)] == [5, 0, 0]
    assert resent(net.addrs[2], 0.2) == 5
    assert a.stats()["xmits_capped"] == 3 + 8 + 8 + 3
    assert resent(net.addrs[1], 0.5) == 5  # the next interval


def test_nakack2_xmit_budget_follows_xmit_interval_and_is_a_second_without_it() -> None:
    """With ``xmit_interval <= 0`` (seed 003's TCP mode) a member's budget lasts a second;
    a run-time change of ``xmit_interval`` applies to the budget already open (the real
    flood tests widen it so a whole flood falls in one interval, however slow the machine)."""
    net = _Net(2, max_xmits_per_interval=5, xmit_interval=0)
    net.view()
    net.send(0, *_payloads(8))
    net.pump()
    a = net[0]

    def resent(now: float) -> int:
        hdr = NakAckHeader2(XMIT_REQ, 0, net.addrs[0], (1, 8))
        a.up([Message(net.addrs[0], src=net.addrs[1], headers={ID: hdr})], now)
        return len([m for item in a.take_down() if isinstance(item, list) for m in item])

    assert [resent(t) for t in (0.0, 0.9, 1.0)] == [5, 0, 5]
    a.set_property("xmit_interval", 3600.0, 1.5)
    assert [resent(t) for t in (2.0, 100.0, 3600.9, 3601.0)] == [0, 0, 0, 5]


def test_nakack2_drops_messages_beyond_max_receive_window() -> None:
    """A sender that skips far ahead (never filling its gaps) cannot make a receiver
    buffer more than ``max_receive_window`` seqnos of it."""
    c = _joiner(max_receive_window=10)
    b = Address(2, "B")
    c.down_event(SetDigest(Digest({b: (0, 0)})), 0.0)
    c.down_event(BecomeServer(), 0.0)
    c.up([_msg_from(b, seqno) for seqno in (2, 10, 11, 1000)], 0.0)
    assert c.stats()["dropped_beyond_window"] == 2
    c.up([_msg_from(b, 1)], 0.0)
    assert _delivered(c) == [b"1", b"2"]


def test_nakack2_member_that_leaves_and_comes_back_is_not_delivered_twice() -> None:
    """Chaos run udp seed 17: E dropped B's window when a partition took B out of its view;
    a merge view with B again (from a stale subgroup's digest) opened B's window at 0 and
    B's retransmissions were delivered a second time, OOB ones included. A sender's seqnos
    never restart within its incarnation: the window comes back where it was."""
    net = _Net(2)
    net.view()
    a, b = net.addrs
    net.send(1, b"1", b"2")
    net.send(1, b"3", flags=Flag.OOB)
    net.pump()
    assert net.delivered[a] == [b"1", b"2", b"3"]
    old = [m for s, m in net.sent(MSG) if s == b]
    net.event(a, ViewChange(View.create(a, 2, [a])))
    net.event(a, ViewChange(View.create(a, 3, [a, b])))
    for msg in old:  # B retransmits what A already has
        net[0].up([msg.copy()], 0.0)
    net.send(1, b"4")
    net.pump()
    assert net.delivered[a] == [b"1", b"2", b"3", b"4"]
    assert net[0].stats()["windows"][str(b)]["hd"] == 4
    assert net[0].stats()["windows_reopened"] == 1


def test_nakack2_msg_as_bare_seqno_or_as_header_is_delivered_alike() -> None:
    """A MSG travels as its bare seqno (an int, see `NakAckHeader2`); the NamedTuple form
    still means the same. One sender's mix, with a gap and a duplicate: each delivered
    once, in seqno order, and `as_header` reads both forms as the same header."""
    a, b = addresses("AB")
    nak = started(Nakack2(), b, view=view_of(a, b))

    def msg(seqno: int) -> Message:
        hdr = seqno if seqno % 2 else NakAckHeader2(MSG, seqno)
        return Message(None, b"%d" % seqno, src=a, headers={ID: hdr})

    nak.up([msg(1), msg(2), msg(4), msg(5)], 0.0)  # 3 missing: 4 and 5 wait for it
    assert [m.payload for m in up_messages(nak)] == [b"1", b"2"]
    nak.up([msg(2), msg(3), msg(6)], 0.0)
    assert [m.payload for m in up_messages(nak)] == [b"3", b"4", b"5", b"6"]
    assert nak.stats()["duplicates"] == 1
    assert as_header(5) == as_header(NakAckHeader2(MSG, 5)) == NakAckHeader2(MSG, 5)
    assert as_header(None) is None


def test_nakack2_bare_seqnos_cross_the_wire_codec_and_are_delivered() -> None:
    """What NAKACK2 sends (bare seqnos) crosses the real codec and another member's
    NAKACK2 delivers it in order."""
    a, b = addresses("AB")
    sender = started(Nakack2(), a, view=view_of(a, b))
    receiver = started(Nakack2(), b, view=view_of(a, b))
    sender.down([Message(None, b"m%d" % i) for i in range(5)], 0.0)
    sent = down_messages(sender, wire=True)
    assert [m.headers[ID] for m in sent] == [1, 2, 3, 4, 5]
    receiver.up(sent, 0.0)
    assert [m.payload for m in up_messages(receiver)] == [b"m%d" % i for i in range(5)]


def test_nakack2_a_window_moved_past_a_gap_delivers_what_it_held_and_says_what_it_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A merge digest (or VIEW_SEQNO) that moves a server's window past a gap delivers what
    was held behind it, in order, instead of dropping it (JGroups resets the window); the
    gap's messages, lost at this member, are counted in ``skipped_by_window_move`` and said
    in a warning. A move over seqnos never received says nothing. (Chaos run tcp seed
    1103318452: a member held 1,108 multicasts of one sender behind a gap until a merge
    digest moved its window past it; they were dropped, and nothing said so.)"""
    me, b, c = Address(1, "A"), Address(2, "B"), Address(3, "C")
    # without retransmission (TCP): with it, a merge digest leaves the windows of our view
    # alone (test_nakack2_merge_digest_never_skips_a_gap_our_subgroup_member_retransmits)
    a = started(Nakack2(xmit_interval=0), me, view=View.create(me, 1, [me, b, c]))
    a.up([_msg_from(b, 3), _msg_from(b, 4), _msg_from(c, 1)], 0.0)
    assert _delivered(a) == [b"1"]
    with caplog.at_level(logging.WARNING, logger="triogroups.protocols.nakack2"):
        a.down_event(MergeDigest(Digest({b: (5, 5), c: (9, 9)})), 0.0)
    assert _delivered(a) == [b"3", b"4"]
    assert a.stats()["skipped_by_window_move"] == 2
    (line,) = [r.getMessage() for r in caplog.records]
    assert f"moved the window for {b} from 0 to 5: 2 of its messages never came" in line
    assert line.endswith("2 held behind them are delivered")
    a.up([_msg_from(b, 2), _msg_from(b, 6)], 0.1)  # a late one is a duplicate now
    assert _delivered(a) == [b"6"] and a.stats()["duplicates"] == 1
    assert a.stats()["windows"][str(c)]["hd"] == 9
