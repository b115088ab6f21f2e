"""NAKACK2 scenarios on the simulated network, in virtual time.

Each test names the rule or seed scenario it plays: retransmission healing
loss, the last message dropped, XMIT_RSP by unicast, OOB overtaking, and
seed 003's join while a member sends, with and without retransmission.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from triogroups import Flag, Message, StackConfig, View
from triogroups.events import DigestReply, GetDigest
from triogroups.extend import BecomeServer, SetDigest, ViewChange
from triogroups.protocols import ids
from triogroups.protocols.gms._header import VIEW as GMS_VIEW
from triogroups.protocols.nakack2._header import HIGHEST_SEQNO, as_header
from triogroups.testing import SimCluster, SimMember, open_cluster, wait_until
from triogroups.view import Digest


def _stack(transport: str = "SIM", *, discard: bool = False, stable: bool = False,
           **nakack2: Any) -> StackConfig:  # fmt: skip
    layers: list[Any] = [transport]
    if discard:
        layers.append("DISCARD")
    layers.append(("NAKACK2", nakack2))
    if stable:
        layers.append(("STABLE", {"desired_avg_gossip": 1.0}))
    return StackConfig.of(*layers)


def _payloads(prefix: str, first: int, last: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(first, last + 1)]


def _got(member: SimMember, src: SimMember | None = None) -> list[bytes]:
    return [m.payload for m in member.delivered if src is None or m.src == src.address]


def _is_msg(payload: bytes) -> Callable[[Message], bool]:
    def match(msg: Message) -> bool:
        hdr = as_header(msg.headers.get(ids.NAKACK2))
        return msg.payload == payload and hdr is not None and hdr.type == 1

    return match


def _stat(cluster: SimCluster, key: str) -> int:
    return sum(m.protocol("NAKACK2").stats()[key] for m in cluster.members)


async def test_nakack2_heals_loss_duplication_and_reordering(autojump_clock: Any) -> None:
    """Gaps are asked for and re-multicast; every member delivers everything, per-sender FIFO."""
    faults = {"loss": 0.2, "duplicate": 0.1, "min_delay": 0.001, "max_delay": 0.03}
    async with open_cluster(3, _stack(stable=True), seed=7, **faults) as cluster:
        for i in range(40):
            for member in cluster.members:
                await member.send(f"{member.name}{i}".encode())
            await trio.sleep(0.01)
        await cluster.wait_until_delivered(timeout=60)
        assert _stat(cluster, "xmit_reqs_sent") > 0 and _stat(cluster, "xmit_rsps_sent") > 0
        assert _stat(cluster, "duplicates") > 0


async def test_nakack2_last_message_dropped_is_healed_without_stable(autojump_clock: Any) -> None:
    """JGroups' LastMessageDroppedTest: HIGHEST_SEQNO reveals the lost last message."""
    async with open_cluster(3, _stack(discard=True), seed=1) as cluster:
        a, b, c = cluster.members
        a.protocol("DISCARD").drop_if(_is_msg(b"a3"), direction="down")
        start = trio.current_time()
        await a.send_many(_payloads("a", 1, 3))
        await trio.sleep(0.2)
        assert _got(b) == _got(c) == _payloads("a", 1, 2)
        await wait_until(lambda: _got(b) == _got(c) == _payloads("a", 1, 3), timeout=30)
        assert trio.current_time() - start < 1.5  # two xmit_interval runs, no STABLE round
        assert a.protocol("NAKACK2").stats()["highest_seqno_sent"] == 1
        cluster.check_contract()


async def test_nakack2_xmit_reqs_for_many_scattered_gaps_fit_one_bundle(
    autojump_clock: Any,
) -> None:
    """Issue 12 item 2 (JGRP-1868): three members, 10 KB bundles, max_xmit_req_size 5000.

    A multicasts 20,000 messages and the first copy of every other one is
    lost. A request for 5000 scattered seqnos would be 30 KB, dropped by the
    transport at every run (B and C would deliver #1 and nothing more); cut
    to one bundle, each run asks for the next gaps and everything arrives.
    """
    stack = StackConfig.of(
        ("SIM", {"max_bundle_size": 10_000}),
        "DISCARD",
        ("NAKACK2", {"max_xmit_req_size": 5000}),
    )
    async with open_cluster(3, stack, seed=12) as cluster:
        a, b, c = cluster.members
        lost: set[int] = set()

        def every_other_first_copy(msg: Message) -> bool:
            hdr = as_header(msg.headers.get(ids.NAKACK2))
            if hdr is None or hdr.type != 1 or hdr.seqno % 2 or hdr.seqno in lost:
                return False
            lost.add(hdr.seqno)
            return True

        a.protocol("DISCARD").drop_if(every_other_first_copy, direction="down", count=None)
        for first in range(1, 20_001, 500):
            await a.send_many(_payloads("a", first, first + 499))
        await wait_until(lambda: len(_got(b)) == len(_got(c)) == 20_000, timeout=60)
        assert len(lost) == 10_000
        assert _got(b) == _got(c) == _payloads("a", 1, 20_000)
        assert all(m.protocol("SIM").counters["dropped_oversized"] == 0 for m in cluster.members)
        for receiver in (b, c):
            stats = receiver.protocol("NAKACK2").stats()
            assert stats["xmit_reqs_capped"] > 0 and stats["xmit_reqs_sent"] > 5


async def test_nakack2_xmit_rsp_by_unicast_when_use_mcast_xmit_is_off(autojump_clock: Any) -> None:
    """use_mcast_xmit=False: only the member that asked gets the message again."""
    async with open_cluster(3, _stack(discard=True, use_mcast_xmit=False), seed=2) as cluster:
        a, b, _c = cluster.members
        b.protocol("DISCARD").drop_if(_is_msg(b"a2"), direction="up")
        await a.send_many(_payloads("a", 1, 3))
        await cluster.wait_until_delivered(timeout=5)
        stats = {m.name: m.protocol("NAKACK2").stats() for m in cluster.members}
        assert stats["A"]["xmit_rsps_sent"] == 1 and stats["B"]["xmit_rsps_received"] == 1
        assert stats["C"]["xmit_rsps_received"] == 0 and stats["C"]["duplicates"] == 0


async def test_nakack2_oob_is_not_held_up_by_a_blocked_regular_message(
    autojump_clock: Any,
) -> None:
    """OOB multicasts are reliable and may overtake a regular one that waits for a gap."""
    async with open_cluster(2, _stack(discard=True), seed=3) as cluster:
        a, b = cluster.members
        b.protocol("DISCARD").drop_if(_is_msg(b"r1"), direction="up")
        await a.send_many([b"r1", b"r2"])
        await a.send(b"oob", flags=Flag.OOB)
        await trio.sleep(0.2)
        assert _got(b) == [b"oob"]  # r1 lost, r2 held behind it, the OOB one delivered
        await cluster.wait_until_delivered(timeout=5)
        assert _got(b) == [b"oob", b"r1", b"r2"]


async def test_nakack2_multicasts_from_non_members_wait_for_a_view_that_has_them(
    autojump_clock: Any,
) -> None:
    """C multicasts before A and B have a view with C: nothing is delivered from C then;
    once the view has C, its message is delivered from what A and B kept, without
    retransmission (xmit_interval 0, as over TCP)."""
    async with open_cluster(3, _stack("TCP", xmit_interval=0), seed=4, view=False) as cluster:
        a, b, c = cluster.members
        await cluster.install_view([a, b])
        await c.send(b"c1")
        await a.send(b"a1")
        await wait_until(lambda: _got(b) == [b"a1"], timeout=30)
        await trio.sleep(0.5)
        assert _got(a) == _got(b) == [b"a1"]
        assert a.protocol("NAKACK2").stats()["non_member_kept"] == 1
        await cluster.install_view([a, b, c])
        await wait_until(lambda: _got(a) == _got(b) == [b"a1", b"c1"], timeout=30)


async def test_nakack2_member_that_lost_the_last_view_and_first_announcement_catches_up(
    autojump_clock: Any,
) -> None:
    """Issue 12 item 5: D joins {A,B,C}; C loses A's VIEW (A's last multicast) and A's first
    HIGHEST_SEQNO after it.

    C's STABLE gossip names the old view and is ignored, so no stability round
    completes and A keeps announcing: the next announcement makes C ask for
    the VIEW, and C installs the view the others have. A stops announcing once
    a stability round shows every member delivered it.
    """
    stack = StackConfig.of(
        "SIM", "PING", "DISCARD", "NAKACK2", ("STABLE", {"desired_avg_gossip": 1.0}), "GMS"
    )
    async with open_cluster(3, stack, seed=5) as cluster:
        a, b, c = cluster.members
        d = await cluster.add_member()
        nak_a = a.protocol("NAKACK2")
        view_seqno = nak_a.stats()["seqno"] + 1  # A's next multicast: the VIEW with D

        def view_with_d(msg: Message) -> bool:
            hdr = msg.headers.get(ids.GMS)
            return hdr is not None and hdr.type == GMS_VIEW and d.address in hdr.view

        def its_announcement(msg: Message) -> bool:
            hdr = as_header(msg.headers.get(ids.NAKACK2))
            return hdr is not None and hdr.type == HIGHEST_SEQNO and hdr.seqno == view_seqno

        c_drops = c.protocol("DISCARD")
        c_drops.drop_if(view_with_d, direction="up")
        c_drops.drop_if(its_announcement, direction="up")
        await cluster.join(d)
        view = await cluster.wait_for_view(timeout=30)
        assert c.view == view and d.address in view
        assert c_drops.stats()["dropped_up"] == 2  # the VIEW and the first announcement
        assert c.protocol("NAKACK2").stats()["xmit_reqs_sent"] >= 1
        await wait_until(lambda: nak_a.stats()["sent_retained"] == 0, timeout=30)  # stable
        sent = nak_a.stats()["highest_seqno_sent"]
        await trio.sleep(5)
        assert nak_a.stats()["highest_seqno_sent"] == sent and b.view == view


# --- seed 003: join while a member sends ------------------------------------------------------


async def _join_while_b_sends(cluster: SimCluster) -> tuple[SimMember, SimMember, SimMember]:
    """The seed's scenario up to BECOME_SERVER: B is at 100, C joins, B sends 101..170.

    C installs view {A,B,C} and gets the digest taken at A (B at 100), then
    B sends 70 messages before C becomes a server.
    """
    a, b, c = cluster.members
    await cluster.install_view([a, b])
    await b.send_many(_payloads("b", 1, 100))
    await wait_until(lambda: len(_got(a)) == 100, timeout=30)
    await a.stack.send(GetDigest("TEST"))
    await wait_until(lambda: any(isinstance(e, DigestReply) for e in a.events), timeout=30)
    (reply,) = [e for e in a.events if isinstance(e, DigestReply)]
    assert reply.digest[b.address] == (100, 100)
    view = View.create(a.address, 2, [a.address, b.address, c.address])
    for member in (a, b, c):
        await member.stack.send(ViewChange(view))
    await c.stack.send(SetDigest(reply.digest))
    for i in range(101, 171):
        await b.send(f"b{i}".encode())
        await trio.sleep(0.001)
    await trio.sleep(0.5)
    assert _got(c) == []
    return a, b, c


async def test_seed003_join_while_sending_over_tcp_without_retransmission(
    autojump_clock: Any,
) -> None:
    """C joins {A,B} while B sends 70: C delivers all 70 in order, then all that follows.

    With xmit_interval=0 nothing could bring back a dropped message, so the
    become_server_queue must keep every one of them (unbounded).
    """
    stack = _stack("TCP", xmit_interval=0)
    async with open_cluster(3, stack, seed=5, view=False) as cluster:
        _a, b, c = await _join_while_b_sends(cluster)
        nak = c.protocol("NAKACK2")
        assert nak.stats()["become_server_queue"] == 70  # B's 1..100 went to {A,B} only (TCP)
        assert nak.stats()["become_server_queue_dropped"] == 0
        await c.stack.send(BecomeServer())
        await b.send_many(_payloads("b", 171, 200))
        await wait_until(lambda: len(_got(c)) == 100, timeout=30)
        assert _got(c) == _payloads("b", 101, 200)
        assert _stat(cluster, "xmit_reqs_sent") == 0 and _stat(cluster, "highest_seqno_sent") == 0


async def test_seed003_join_while_sending_bounded_queue_healed_by_retransmission(
    autojump_clock: Any,
) -> None:
    """With retransmission the queue keeps the newest 50; the 20 dropped are retransmitted."""
    async with open_cluster(3, _stack(), seed=6, view=False) as cluster:
        _a, b, c = await _join_while_b_sends(cluster)
        nak = c.protocol("NAKACK2")
        assert nak.stats()["become_server_queue"] == 50
        assert nak.stats()["become_server_queue_dropped"] == 120
        await c.stack.send(BecomeServer())
        await b.send_many(_payloads("b", 171, 200))
        await wait_until(lambda: len(_got(c)) == 100, timeout=30)
        assert _got(c) == _payloads("b", 101, 200)
        assert nak.stats()["xmit_reqs_sent"] > 0


async def test_seed003_tcp_orders_and_stable_purges_without_any_retransmission(
    autojump_clock: Any,
) -> None:
    """Seqnos only order; STABLE still purges; nothing is ever asked for again."""
    stack = _stack("TCP", stable=True, xmit_interval=0)
    async with open_cluster(3, stack, seed=8, min_delay=0.001, max_delay=0.02) as cluster:
        for i in range(30):
            for member in cluster.members:
                await member.send(f"{member.name}{i}".encode())
        await cluster.wait_until_delivered(timeout=10)
        await wait_until(
            lambda: all(m.protocol("NAKACK2").retained() == 0 for m in cluster.members), timeout=30
        )
        assert _stat(cluster, "xmit_reqs_sent") == 0 and _stat(cluster, "highest_seqno_sent") == 0
        assert _stat(cluster, "purged") == 90 * 3 // 3


def _ticks(member: Any) -> int:
    """How often the host ran NAKACK2's timer: the xmit task is its only timer here."""
    (layer,) = [x for x in member.stack.stats()["layers"] if x["protocol"] == "NAKACK2"]
    return int(layer["host"]["ticks"])


async def test_seed003_xmit_interval_changed_at_run_time_starts_and_stops_the_task(
    autojump_clock: Any,
) -> None:
    # No STABLE here: each highest seqno is announced once, so the counts below are exact.
    stack = _stack("TCP", xmit_interval=0, resend_last_seqno_max_times=1)
    async with open_cluster(2, stack, seed=9) as cluster:
        a, _b = cluster.members
        nak = a.protocol("NAKACK2")
        await a.send(b"a1")
        await trio.sleep(2)
        assert not nak.stats()["xmit_task_running"] and nak.stats()["highest_seqno_sent"] == 0
        await a.stack.set_property("NAKACK2", "xmit_interval", "200ms")  # re-arms the timer
        await trio.sleep(2)
        assert nak.stats()["xmit_task_running"] and _ticks(a) >= 5
        await a.send(b"a2")
        await trio.sleep(2)
        assert nak.stats()["highest_seqno_sent"] == 2  # HIGHEST_SEQNO for a1, then for a2
        await a.stack.set_property("NAKACK2", "xmit_interval", 0)
        runs = _ticks(a)
        await a.send(b"a3")
        await trio.sleep(2)
        assert not nak.stats()["xmit_task_running"] and nak.stats()["highest_seqno_sent"] == 2
        assert _ticks(a) == runs
        await cluster.wait_until_delivered(timeout=5)


async def test_nakack2_answers_get_digest_through_a_running_stack(autojump_clock: Any) -> None:
    async with open_cluster(2, _stack(), seed=10) as cluster:
        a, b = cluster.members
        await b.send_many([b"1", b"2"])
        await cluster.wait_until_delivered(timeout=5)
        await a.stack.send(GetDigest("TEST"))
        await wait_until(lambda: any(isinstance(e, DigestReply) for e in a.events), timeout=30)
        (reply,) = [e for e in a.events if isinstance(e, DigestReply)]
        assert reply.digest == Digest({a.address: (0, 0), b.address: (2, 2)})


async def test_nakack2_member_joining_through_gms_delivers_a_gapless_suffix(
    autojump_clock: Any,
) -> None:
    """GMS hands the joiner its view, digest and BecomeServer while everyone sends.

    From each sender the joiner delivers an unbroken run up to the last
    message: nothing after its digest is lost, nothing before it delivered.
    """
    stack = StackConfig.of("SIM", "PING", "NAKACK2", ("STABLE", {"desired_avg_gossip": 1.0}), "GMS")
    async with open_cluster(3, stack, seed=14, loss=0.1) as cluster:
        joiner = await cluster.add_member()
        async with trio.open_nursery() as nursery:

            async def chatter() -> None:
                for i in range(40):
                    for member in cluster.members[:3]:
                        await member.send(f"{member.name}{i}".encode())
                    await trio.sleep(0.05)

            nursery.start_soon(chatter)
            await cluster.join(joiner)
        await cluster.wait_for_view()
        old = cluster.members[:3]
        await wait_until(
            lambda: all(_got(joiner, m)[-1:] == [f"{m.name}39".encode()] for m in old), timeout=30
        )
        for member in old:
            sent = cluster.log.sent[(member.address, None)]
            got = _got(joiner, member)
            assert got == sent[len(sent) - len(got) :] and len(got) < len(sent)
        old_addresses = [m.address for m in old]  # the old members may still be healing
        await wait_until(lambda: cluster.log.all_arrived(old_addresses, old_addresses), timeout=30)
        cluster.check_contract(old)


async def test_seed003_join_while_a_non_coordinator_sends_delivers_all_after_the_digest(
    autojump_clock: Any,
) -> None:
    """C joins {A,B} through GMS while B multicasts every 2 ms, over TCP without retransmission.

    The coordinator A takes C's digest before B installs {A,B,C}; what B sends
    meanwhile goes to A only (a TCP multicast is one send to each member of
    the sender's view). B's VIEW_SEQNO tells C where B's multicasts to it
    begin: C delivers an unbroken, duplicate-free run of B's messages from
    there to the last, and its window for B has nothing missing.
    """
    sim = ("SIM", {"lossless": True, "fan_out": True})  # the sim's TCP: multicast to the view
    stack = StackConfig.of(sim, "PING", ("NAKACK2", {"xmit_interval": 0}), "GMS")
    async with open_cluster(2, stack, seed=21, min_delay=0.002, max_delay=0.01) as cluster:
        _a, b = cluster.members
        c = await cluster.add_member()
        sent: list[bytes] = []
        joined = trio.Event()

        async def chatter() -> None:
            for i in range(1, 1000):
                sent.append(f"b{i}".encode())
                await b.send(sent[-1])
                await trio.sleep(0.002)
                if joined.is_set() and len(sent) >= 100:
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(chatter)
            await trio.sleep(0.05)
            await cluster.join(c)
            await cluster.wait_for_view()
            await trio.sleep(0.2)
            joined.set()
        await b.send_many(_payloads("b-after", 1, 20))
        sent += _payloads("b-after", 1, 20)
        with trio.move_on_after(30):
            await wait_until(lambda: _got(c, b)[-1:] == sent[-1:], timeout=30)
        got = _got(c, b)
        nak = c.protocol("NAKACK2")
        window = nak.stats()["windows"][str(b.address)]
        assert got and got == sent[len(sent) - len(got) :], (len(got), window)
        assert window["missing"] == 0 and window["hd"] == len(sent)
        assert nak.stats()["view_seqnos_received"] >= 1


async def test_nakack2_member_out_of_a_view_and_back_delivers_its_messages_once(
    autojump_clock: Any,
) -> None:
    """Chaos run udp seed 17, on the simulated network: C installs a view without B (as
    after a partition), B goes on multicasting, then C installs a view with B again (as a
    merge view does). C must deliver what B sent meanwhile once, and nothing twice."""
    stack = StackConfig.of("SIM", "PING", "NAKACK2", "GMS")
    async with open_cluster(3, stack, seed=17) as cluster:
        a, b, c = cluster.members
        first = await cluster.wait_for_view()
        n = first.view_id.id
        await b.send_many(_payloads("b", 1, 3))
        await cluster.wait_until_delivered()
        await cluster.inject_view(View.create(a.address, n + 1, [a.address, c.address]), [c])
        await b.send_many(_payloads("b", 4, 5))
        await trio.sleep(1.0)
        back = View.create(a.address, n + 2, [a.address, b.address, c.address])
        await cluster.inject_view(back, [c])
        await b.send(b"b6")
        await wait_until(lambda: _got(c, b)[-1:] == [b"b6"], timeout=30, interval=0.1)
        await trio.sleep(2.0)
        assert _got(c, b) == _payloads("b", 1, 6)
        cluster.check_contract()


async def test_nakack2_joiner_answered_late_delivers_what_was_multicast_in_its_view(
    autojump_clock: Any,
) -> None:
    """Chaos run tcp seed 109761227: a joiner whose JOIN_RSP is lost asks again and is
    answered with the view it is already in; it must deliver everything multicast in that
    view meanwhile, over TCP without retransmission.

    A admits C into {A,B,C}; A's JOIN_RSP to C is lost (A cannot reach C for a while).
    B installs the view and multicasts to C, which queues what it gets. When C's JOIN_REQ
    gets through again, A answers with the digest of the view's installation (a digest
    taken then would start C's window for B after all of it, and C would never deliver it):
    C delivers all of B's multicasts of the view, in order, then what follows.
    """
    sim = ("SIM", {"lossless": True, "fan_out": True})  # the sim's TCP: multicast to the view
    gms = ("GMS", {"join_timeout": 0.5})
    stack = StackConfig.of(sim, "PING", ("NAKACK2", {"xmit_interval": 0}), gms)
    async with open_cluster(2, stack, seed=31, min_delay=0.002, max_delay=0.004) as cluster:
        a, b = cluster.members
        c = await cluster.add_member()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cluster.join, c)
            # A installed the view: block the answer
            await wait_until(lambda: c.address in (a.view or ()), interval=0.0005)
            cluster.network.block(a.address, c.address)
            await wait_until(lambda: b.view is not None and c.address in b.view, timeout=30)
            sent = _payloads("b", 1, 20)
            await b.send_many(sent)
            await trio.sleep(1.0)  # C asks again and again, unanswered
            assert c.view is None and _got(c) == []
            cluster.heal()
        await b.send_many(_payloads("b-after", 1, 5))
        await wait_until(lambda: len(_got(c, b)) >= 25, timeout=30)
        assert _got(c, b) == sent + _payloads("b-after", 1, 5)
        assert c.view == a.view == b.view


async def test_nakack2_rejoiner_gets_what_was_multicast_after_a_view_its_answerer_got_late(
    autojump_clock: Any,
) -> None:
    """As campaign udp-mcast 40480 on MCAST, hand-built on the udp preset (NAKACK2): A admits J
    into view v but J's JOIN_RSP is lost; A then leaves and installs v+1 = [B, C, J], which
    makes B the coordinator. B is paused across A's VIEW of v+1, and C multicasts in v+1
    meanwhile: B gets the VIEW and C's multicasts together, all in NAKACK2's windows before
    GMS installs v+1. J asks B to join again and is answered with v+1 and the digest of
    its installation, which must stop at A's VIEW: J delivers C's multicasts of v+1. It used
    to count them as delivered before v+1, and J never got them."""
    async with open_cluster(3, "udp", seed=37, min_delay=0.002, max_delay=0.004) as cluster:
        a, b, c = cluster.members
        j = await cluster.add_member("J")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cluster.join, j)
            # A installed v: block its answer (it waits for B's and C's VIEW_ACKs first)
            await wait_until(lambda: j.address in (a.view or ()), interval=0.0005)
            cluster.network.block(a.address, j.address)
            await wait_until(lambda: all(j.address in (m.view or ()) for m in (b, c)))
            v = c.view
            assert v is not None and j.view is None
            nursery.start_soon(a.disconnect)
            # A's leave flush waits leave_timeout for J, which never delivers: pause B for
            # its end only (FD_ALL3 must not suspect B)
            gms = a.protocol("GMS")
            await wait_until(lambda: gms.stats()["flushing"] is not None)
            await trio.sleep(gms.leave_timeout - 1.0)
            b.pause()
            await wait_until(lambda: c.view is not None and c.view.view_id.id > v.view_id.id)
            assert c.view is not None and list(c.view.members) == [b.address, c.address, j.address]
            sent = _payloads("c", 1, 10)
            await c.send_many(sent)
            await trio.sleep(0.5)
            assert b.view == v and j.view is None  # B gets A's VIEW and C's multicasts now
            b.resume()
        await wait_until(lambda: j.view == c.view, timeout=30)
        await c.send(b"c-after")
        await wait_until(lambda: _got(j, c)[-1:] == [b"c-after"], timeout=30)
        await trio.sleep(2.0)
        assert _got(j, c) == [*sent, b"c-after"]
