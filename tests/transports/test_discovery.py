"""PING and TCPPING as sans-IO state machines: explicit ``now``, events in, events out."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest

from triogroups import Address, Message, PropertyError, StackConfig, View
from triogroups.events import (
    AddPhysicalAddress,
    Disconnect,
    ForeignEndpoint,
    Item,
    LocalPhysicalAddress,
)
from triogroups.extend import (
    FindMembers,
    MembersFound,
    SendToHosts,
    SetPhysicalAddresses,
    ViewChange,
    WireCodec,
)
from triogroups.protocols import Ping, TcpPing, ids
from triogroups.protocols._discovery import REQUEST, RESPONSE, Discovery, DiscoveryHeader
from triogroups.protocols.tcpping import parse_hosts
from triogroups.testing import open_cluster, wait_until

A, B, C = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C")))
PHYS = {A: ("10.0.0.1", 7800), B: ("10.0.0.2", 7800), C: ("10.0.0.3", 7800)}


def member(cls: type[Discovery], me: Address, now: float = 0.0, **props: Any) -> Discovery:
    proto = cls(**props)
    proto.start(me, "c", now)
    proto.up_event(LocalPhysicalAddress(PHYS[me]), now)
    proto.take_up()
    return proto


def messages(items: list[Item]) -> list[Message]:
    return [m for item in items if isinstance(item, list) for m in item]


def events(items: list[Item], kind: type) -> list[Any]:
    return [item for item in items if isinstance(item, kind)]


class Link:
    """Carries discovery traffic between protocol objects, as a loss-free network would."""

    def __init__(self, *protos: Discovery) -> None:
        self.protos = {p.local_address: p for p in protos}
        self.up_events: dict[Address | None, list[Item]] = {a: [] for a in self.protos}

    def flush(self, now: float) -> None:
        moved = True
        while moved:
            moved = False
            for src, proto in self.protos.items():
                for item in proto.take_down():
                    moved = True
                    self._carry(src, item, now)
                self.up_events[src].extend(proto.take_up())

    def _carry(self, src: Address | None, item: Item, now: float) -> None:
        if isinstance(item, list):
            for msg in item:
                msg.src = src
                targets = [p for a, p in self.protos.items() if msg.dest in (None, a) and a != src]
                for target in targets:
                    target.up([msg.copy()], now)
        elif isinstance(item, SendToHosts):
            for msg in item.messages:
                msg.src = src
            for target in self.protos.values():
                if target.local_physical in item.hosts:
                    target.up([m.copy() for m in item.messages], now)

    def found(self, who: Address) -> list[MembersFound]:
        return events(self.up_events[who], MembersFound)


def test_ping_find_multicasts_one_request_carrying_its_physical_address() -> None:
    a = member(Ping, A)
    a.down_event(FindMembers(2.0), 0.0)
    out = a.take_down()
    (request,) = messages(out)
    assert request.dest is None
    assert request.headers[ids.PING] == DiscoveryHeader(REQUEST, "10.0.0.1", 7800, False)
    assert not events(out, SendToHosts)
    assert a.next_deadline() == 2.0


def test_ping_reports_members_found_at_the_timeout_without_itself() -> None:
    a, b, c = member(Ping, A), member(Ping, B), member(Ping, C)
    link = Link(a, b, c)
    a.down_event(FindMembers(2.0), 0.0)
    link.flush(0.01)
    assert link.found(A) == []
    a.tick(1.99)
    link.flush(1.99)
    assert link.found(A) == []
    a.tick(2.0)
    link.flush(2.0)
    (found,) = link.found(A)
    assert {(d.address, d.physical, d.is_coord) for d in found.responses} == {
        (B, PHYS[B], False),
        (C, PHYS[C], False),
    }
    assert a.next_deadline() == math.inf


def test_requests_and_responses_tell_the_transport_where_members_are() -> None:
    a, b = member(Ping, A), member(Ping, B)
    a.down_event(FindMembers(1.0), 0.0)
    request = messages(a.take_down())[0]
    request.src = A
    b.up([request], 0.0)
    out = b.take_down()
    assert events(out, AddPhysicalAddress) == [AddPhysicalAddress(A, PHYS[A])]
    (response,) = messages(out)
    assert response.dest == A and response.headers[ids.PING].type == RESPONSE


def test_break_on_coord_rsp_ends_the_find_when_the_coordinator_answers() -> None:
    a, b, c = member(Ping, A), member(Ping, B), member(Ping, C)
    view = View.create(B, 1, [B, C])
    for p in (b, c):
        p.down_event(ViewChange(view), 0.0)
    link = Link(a, b, c)
    a.down_event(FindMembers(5.0), 0.0)
    link.flush(0.1)
    (found,) = link.found(A)
    assert {d.address: d.is_coord for d in found.responses}[B] is True


def test_without_break_on_coord_rsp_the_find_runs_to_its_timeout() -> None:
    a, b = member(Ping, A, break_on_coord_rsp=False), member(Ping, B)
    b.down_event(ViewChange(View.create(B, 1, [B])), 0.0)
    link = Link(a, b)
    a.down_event(FindMembers(5.0), 0.0)
    link.flush(0.1)
    assert link.found(A) == []
    a.tick(5.0)
    link.flush(5.0)
    assert len(link.found(A)) == 1


def test_is_coord_needs_a_view_naming_this_member_first() -> None:
    a = member(Ping, A)
    assert not a._is_coord()
    a.down_event(ViewChange(View.create(B, 1, [B, A])), 0.0)
    assert not a._is_coord()
    a.down_event(ViewChange(View.create(A, 2, [A, B])), 0.0)
    assert a._is_coord()


def test_a_coordinator_that_left_answers_as_a_non_coordinator() -> None:
    """A joiner must not send its JOIN_REQ to a member that left the group."""
    a, b = member(Ping, A), member(Ping, B)
    a.down_event(ViewChange(View.create(A, 2, [A, B])), 0.0)
    a.down_event(Disconnect(), 1.0)
    a.take_down()
    link = Link(a, b)
    b.down_event(FindMembers(1.0), 1.0)
    link.flush(1.0)
    b.tick(2.0)
    link.flush(2.0)
    (found,) = link.found(B)
    assert [(d.address, d.is_coord) for d in found.responses] == [(A, False)]


def test_num_discovery_runs_spreads_requests_over_the_timeout() -> None:
    a = member(Ping, A, num_discovery_runs=3)
    a.down_event(FindMembers(3.0), 0.0)
    sent = [len(messages(a.take_down()))]
    assert a.next_deadline() == pytest.approx(1.0)
    for now in (1.0, 2.0):
        a.tick(now)
        sent.append(len(messages(a.take_down())))
    assert sent == [1, 1, 1]
    assert a.next_deadline() == pytest.approx(3.0)
    a.tick(3.0)
    assert events(a.take_up(), MembersFound) and a.counters["requests_sent"] == 3


def test_without_a_physical_address_requests_carry_none_and_teach_the_transport_nothing() -> None:
    a, b = Ping(), member(Ping, B)
    a.start(A, "c", 0.0)  # e.g. on the simulated network: no LocalPhysicalAddress ever comes
    a.down_event(FindMembers(1.0), 0.0)
    (request,) = messages(a.take_down())
    assert request.headers[ids.PING] == DiscoveryHeader(REQUEST, "", 0, False)
    request.src = A
    b.up([request], 0.0)
    out = b.take_down()
    assert events(out, AddPhysicalAddress) == [] and len(messages(out)) == 1
    a.tick(1.0)
    assert events(a.take_up(), MembersFound) and a.next_deadline() == math.inf


def test_local_physical_address_is_recorded_and_passed_up() -> None:
    a = Ping()
    a.start(A, "c", 0.0)
    a.up_event(LocalPhysicalAddress(PHYS[A]), 0.0)
    assert a.take_up() == [LocalPhysicalAddress(PHYS[A])] and a.local_physical == PHYS[A]


def test_a_concurrent_request_counts_as_an_answer() -> None:
    a, b = member(Ping, A, break_on_coord_rsp=False), member(Ping, B)
    link = Link(a, b)
    a.down_event(FindMembers(1.0), 0.0)
    b.down_event(FindMembers(1.0), 0.0)
    link.flush(0.0)
    for p in (a, b):
        p.tick(1.0)
    link.flush(1.0)
    assert [d.address for d in link.found(A)[0].responses] == [B]
    assert [d.address for d in link.found(B)[0].responses] == [A]


def test_set_physical_addresses_are_asked_directly_and_end_the_find_once_all_answer() -> None:
    a, b, c = member(Ping, A), member(Ping, B), member(Ping, C)
    link = Link(a, b, c)
    hosts = (PHYS[A], PHYS[B], PHYS[C])
    a.down_event(SetPhysicalAddresses(hosts), 0.0)
    assert events(a.take_down(), SetPhysicalAddresses)  # passed on to the transport
    a.down_event(FindMembers(10.0), 0.0)
    out = a.take_down()
    (direct,) = events(out, SendToHosts)
    assert direct.hosts == (PHYS[B], PHYS[C])  # never itself
    for item in out:
        link._carry(A, item, 0.0)
    link.flush(0.1)
    assert len(link.found(A)) == 1


def test_member_table_is_in_stats_and_forgets_silent_members_outside_the_view() -> None:
    a, b, c = member(Ping, A, discovery_rsp_expiry_time=10.0), member(Ping, B), member(Ping, C)
    link = Link(a, b, c)
    a.down_event(ViewChange(View.create(A, 1, [A, B])), 0.0)
    link.flush(0.0)
    a.down_event(FindMembers(1.0), 0.0)
    link.flush(0.0)
    assert sorted(d.address for d in a.members()) == [B, C]
    assert set(a.stats()["members"]) == {"B#00000000", "C#00000000"}
    a.down_event(FindMembers(1.0), 20.0)  # a new find purges first; then asks again
    assert sorted(d.address for d in a.members()) == [B]


def test_negative_find_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="find timeout must be >= 0, got -1"):
        member(Ping, A).down_event(FindMembers(-1.0), 0.0)


def test_other_messages_pass_up_untouched() -> None:
    a = member(Ping, A)
    msg = Message(A, b"app", src=B)
    a.up([msg], 0.0)
    assert a.take_up() == [[msg]]


def test_discovery_header_round_trips_through_the_wire_codec() -> None:
    codec = WireCodec("c")
    hdr = DiscoveryHeader(RESPONSE, "10.0.0.2", 7800, True)
    data = codec.encode(A, B, [Message(A, headers={ids.PING: hdr, ids.TCPPING: hdr})])
    assert codec.decode(data).messages[0].headers == {ids.PING: hdr, ids.TCPPING: hdr}


# --- TCPPING -------------------------------------------------------------------------------


def test_parse_hosts_accepts_jgroups_and_colon_syntax() -> None:
    assert parse_hosts(("a[7800]", " b:7801 ")) == [("a", 7800), ("b", 7801)]
    for bad in ("a", "a[0]", "a[70000]", "[1]"):
        with pytest.raises(ValueError, match="initial_hosts"):
            parse_hosts((bad,))


def test_tcpping_refuses_a_bad_initial_hosts_entry_naming_it() -> None:
    with pytest.raises(
        PropertyError, match=r"TCPPING.initial_hosts must be a list of host\[port\]"
    ):
        TcpPing(initial_hosts="a[1],nonsense")


def test_tcpping_sends_to_listed_hosts_and_port_range_but_not_itself() -> None:
    a = member(TcpPing, A, initial_hosts="10.0.0.1[7800],10.0.0.2[7800]", port_range=1)
    a.down_event(FindMembers(2.0), 0.0)
    out = a.take_down()
    assert messages(out) == []  # no multicast
    (direct,) = events(out, SendToHosts)
    assert direct.hosts == (("10.0.0.1", 7801), ("10.0.0.2", 7800), ("10.0.0.2", 7801))
    assert direct.messages[0].headers[ids.TCPPING].type == REQUEST


def test_tcpping_ends_early_once_every_listed_host_answered() -> None:
    hosts = "10.0.0.1[7800],10.0.0.2[7800],10.0.0.3[7800]"
    a, b, c = (member(TcpPing, m, initial_hosts=hosts, port_range=0) for m in (A, B, C))
    link = Link(a, b)
    a.down_event(FindMembers(5.0), 0.0)
    link.flush(0.0)
    assert link.found(A) == []  # C is listed and has not answered
    link = Link(a, b, c)
    a.tick(5.0)
    link.flush(5.0)
    a.down_event(FindMembers(5.0), 6.0)
    link.flush(6.0)
    assert {d.address for d in link.found(A)[-1].responses} == {B, C}
    assert a.counters["finds"] == 2


def test_tcpping_asks_members_it_discovered_before_in_later_finds() -> None:
    a = member(TcpPing, A, initial_hosts="10.0.0.1[7800]", port_range=0)
    reply = Message(
        A, src=B, headers={ids.TCPPING: DiscoveryHeader(RESPONSE, "10.9.9.9", 1, False)}
    )
    a.up([reply], 0.0)
    a.down_event(FindMembers(1.0), 0.0)
    (direct,) = events(a.take_down(), SendToHosts)
    assert direct.hosts == (("10.9.9.9", 1),)


async def test_ping_finds_members_on_the_simulated_network(autojump_clock: Any) -> None:
    async with open_cluster(3, StackConfig.of("UDP", "PING"), view=False) as cluster:
        await cluster[0].stack.send(FindMembers(2.0))
        await wait_until(
            lambda: any(isinstance(e, MembersFound) for e in cluster[0].events),
            timeout=10,
            interval=0.1,
        )
        (found,) = [e for e in cluster[0].events if isinstance(e, MembersFound)]
        assert {d.address for d in found.responses} == {cluster[1].address, cluster[2].address}
        assert not any(d.is_coord for d in found.responses)


def test_tcpping_waits_for_the_port_range_extras_when_no_coordinator_answered() -> None:
    """Members starting together on one host (base port listed, the rest in
    ``port_range``): the base port's answer alone must not end the find, or
    several joiners each conclude they sort first and the group splits."""
    a, b, c = (member(TcpPing, m, initial_hosts="10.0.0.9[7800]", port_range=2) for m in (A, B, C))
    for port, proto in enumerate((a, b, c), start=7800):  # one host, consecutive ports
        proto.up_event(LocalPhysicalAddress(("10.0.0.9", port)), 0.0)
        proto.take_up()
    link = Link(a, b)
    a.down_event(FindMembers(5.0), 0.0)
    link.flush(0.0)
    assert link.found(A) == []  # B (7801) answered; 7802, in the port range, has not
    link = Link(a, b, c)
    a.tick(5.0)
    link.flush(5.0)
    a.down_event(FindMembers(5.0), 6.0)
    link.flush(6.0)
    assert {d.address for d in link.found(A)[-1].responses} == {B, C}


def _preset_tcpping(port: int) -> TcpPing:
    """The ``tcp`` preset's TCPPING, built in its stack, started at 127.0.0.1:``port``."""
    proto = StackConfig.preset("tcp").build()[1]
    assert isinstance(proto, TcpPing)
    proto.start(A, "cluster-y", 0.0)
    proto.up_event(LocalPhysicalAddress(("127.0.0.1", port)), 0.0)
    proto.take_up()
    return proto


def test_tcpping_port_range_unset_probes_every_port_the_transport_may_take() -> None:
    """Issue 12 item 6: TCP may listen anywhere in 7800..7850, so the preset's TCPPING
    (port_range unset) probes all of those ports, not only 7800..7804."""
    a = _preset_tcpping(7805)
    a.down_event(FindMembers(2.0), 0.0)
    (direct,) = events(a.take_down(), SendToHosts)
    expected = [("127.0.0.1", p) for p in range(7800, 7851) if p != 7805]
    assert list(direct.hosts) == expected


def test_tcpping_port_range_set_or_without_a_port_range_transport() -> None:
    """An explicit port_range wins over the transport's; alone, or over a transport that
    takes any free port, TCPPING probes one extra port as JGroups does."""
    config = StackConfig.preset("tcp")
    for tcp, tcpping, extra in (({}, {"port_range": 3}, 3), ({"bind_port": 0}, {}, 1)):
        built = config.configure("TCP", **tcp).configure("TCPPING", **tcpping).build()
        assert isinstance(built[1], TcpPing) and built[1].extra_ports() == extra
    assert TcpPing().extra_ports() == 1


def _alone_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "found no member" in r.getMessage()
    ]


def test_a_joiner_hearing_no_member_where_ports_are_taken_warns_naming_cluster_and_finds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 12 item 6: five members of another cluster hold 7800..7804; a joiner of
    "cluster-y" at 7805 hears none of its own and must say so, naming its cluster, the
    foreign endpoints and the taken ports, rather than silently become a group of one."""
    a = _preset_tcpping(7805)
    a.down_event(FindMembers(2.0), 0.0)
    a.take_down()
    for port in range(7800, 7805):
        a.up_event(ForeignEndpoint(("127.0.0.1", port), "bad_hello: closed before its hello"), 0.1)
    a.tick(2.0)
    (found,) = events(a.take_up(), MembersFound)
    assert found.responses == ()
    (warning,) = _alone_warnings(caplog)
    assert "cluster 'cluster-y'" in warning
    assert "127.0.0.1:7800..7804 answered but not for it (bad_hello" in warning
    assert "starts a group of its own" in warning and "127.0.0.1:7805" in warning


def test_a_joiner_above_taken_ports_warns_even_when_they_did_not_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    a = _preset_tcpping(7803)
    a.down_event(FindMembers(2.0), 0.0)
    a.tick(2.0)
    (warning,) = _alone_warnings(caplog)
    assert "127.0.0.1:7800..7802 were taken when it bound its port" in warning


def test_no_alone_warning_for_the_first_member_an_answered_find_or_a_merge_find(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first member at the base port, a joiner that heard a member, and a find run with
    a view (MERGE3's) are normal: no warning."""
    first = _preset_tcpping(7800)
    first.down_event(FindMembers(2.0), 0.0)
    first.tick(2.0)
    joiner = _preset_tcpping(7801)
    joiner.down_event(FindMembers(2.0), 0.0)
    answer = DiscoveryHeader(RESPONSE, "127.0.0.1", 7800, False)
    joiner.up([Message(A, src=B, headers={ids.TCPPING: answer})], 0.5)
    joiner.tick(2.0)
    merging = _preset_tcpping(7806)
    merging.down_event(ViewChange(View.create(A, 1, [A])), 0.0)
    merging.down_event(FindMembers(2.0), 0.0)
    merging.tick(2.0)
    assert _alone_warnings(caplog) == []
