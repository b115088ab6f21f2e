"""UNICAST2 on the simulated network: seed 002's scenarios #1 to #9, one test each,
and its goals #2 (non-members) and #4 (no group communication).

Stack: SIM, DISCARD, UNICAST2. DISCARD sits right below UNICAST2, so a test
can lose one precise message (``drop_if`` with a predicate on the UNICAST2
header) or watch what arrives (a predicate that records and never drops).
Views are installed by the test kit (no GMS here), one member at a time when
a scenario needs members to disagree, or not at all (goal #4).
"""

from __future__ import annotations

from typing import Any

import trio

from triogroups import Flag, Message, StackConfig
from triogroups.protocols import ids
from triogroups.protocols.unicast2 import DATA, Unicast2, Unicast2Header
from triogroups.testing import SimCluster, SimMember, open_cluster, wait_until

ID = ids.UNICAST2
STACK = StackConfig.of("SIM", "DISCARD", ("UNICAST2", {"conn_expiry_timeout": 0}))


def _u2(member: SimMember) -> Unicast2:
    proto = member.protocol("UNICAST2")
    assert isinstance(proto, Unicast2)
    return proto


def _stats(member: SimMember) -> dict[str, Any]:
    return _u2(member).stats()


def _got(member: SimMember, src: SimMember) -> list[bytes]:
    return [m.payload for m in member.delivered if m.src == src.address]


def _watch(member: SimMember, direction: str = "up") -> list[Unicast2Header]:
    """Record every UNICAST2 DATA header passing ``member``'s DISCARD (drops nothing)."""
    seen: list[Unicast2Header] = []

    def record(msg: Message) -> bool:
        hdr = msg.headers.get(ID)
        if hdr is not None and hdr.type == DATA:
            seen.append(hdr)
        return False

    member.protocol("DISCARD").drop_if(record, direction=direction, count=None)
    return seen


async def _send(member: SimMember, to: SimMember, *payloads: bytes) -> None:
    await member.send_many(list(payloads), to.address)


async def _exchange(cluster: SimCluster, a: SimMember, b: SimMember, n: int) -> None:
    """``n`` messages each way, delivered, and the senders' windows purged by STABLE."""
    await _send(a, b, *(b"a%d" % i for i in range(1, n + 1)))
    await _send(b, a, *(b"b%d" % i for i in range(1, n + 1)))
    await cluster.wait_until_delivered(timeout=10)
    await trio.sleep(2 * _u2(a).stable_interval)
    assert _stats(a)["send_window_size"] == 0 and _stats(b)["send_window_size"] == 0


async def test_unicast2_scenario_1_a_creates_new_connection_to_b(autojump_clock: Any) -> None:
    """#1: the entry for B is created, send-conn-id is set and sent with the message,
    entry.seqno is 1."""
    async with open_cluster(2, STACK, seed=1) as cluster:
        a, b = cluster.members
        arrived = _watch(b)
        assert "B" not in _stats(a)["send"]
        await _send(a, b, b"hello")
        await cluster.wait_until_delivered(timeout=5)
        entry = _stats(a)["send"]["B"]
        assert entry["seqno"] == 1 and entry["conn_id"] > 0
        assert arrived == [Unicast2Header(DATA, 1, entry["conn_id"], True)]


async def test_unicast2_scenario_2_b_receives_new_connection(autojump_clock: Any) -> None:
    """#2: B creates an entry and recv_win at msg.seqno, sets recv-conn-id to msg.conn-id,
    and adds (here: delivers) the message."""
    async with open_cluster(2, STACK, seed=2) as cluster:
        a, b = cluster.members
        assert "A" not in _stats(b)["recv"]
        await _send(a, b, b"m1", b"m2")
        await cluster.wait_until_delivered(timeout=5)
        recv = _stats(b)["recv"]["A"]
        assert recv["conn_id"] == _stats(a)["send"]["B"]["conn_id"]
        assert (recv["low"], recv["high"]) == (2, 2) and _got(b, a) == [b"m1", b"m2"]


async def test_unicast2_scenario_3_a_and_b_close_on_a_view_change(autojump_clock: Any) -> None:
    """#3: a partition's views make both A and B reset: pending retransmissions are
    cancelled and the entries for the peer are removed."""
    async with open_cluster(2, STACK, seed=3) as cluster:
        a, b = cluster.members
        await _exchange(cluster, a, b, 3)
        cluster.network.partition([a.address], [b.address])
        await _send(a, b, b"lost1", b"lost2")  # blocked: pending retransmission at A
        await trio.sleep(0.1)
        assert _stats(a)["send_window_size"] == 2
        await cluster.install_view([a])
        await cluster.install_view([b])
        await trio.sleep(0.1)
        for member in (a, b):
            s = _stats(member)
            assert s["send_connections"] == 0 and s["recv_connections"] == 0
        assert _stats(a)["abandoned"] == 2
        retransmissions = _stats(a)["retransmissions"]
        cluster.network.heal()
        await trio.sleep(10)
        assert _stats(a)["retransmissions"] == retransmissions
        assert b"lost1" not in _got(b, a)


async def test_unicast2_scenario_4_a_closes_unilaterally_then_reopens(
    autojump_clock: Any,
) -> None:
    """#4: A removes its entry for B (B's recv_win for A is at #25), reopens with a new
    conn-id at seqno 1; B sees the mismatch and creates a new recv_win at msg.seqno."""
    async with open_cluster(2, STACK, seed=4) as cluster:
        a, b = cluster.members
        await _send(a, b, *(b"old%d" % i for i in range(25)))
        await cluster.wait_until_delivered(timeout=5)
        old = _stats(a)["send"]["B"]["conn_id"]
        assert _stats(b)["recv"]["A"]["high"] == 25
        _u2(a).close_connection(b.address, trio.current_time())
        assert "B" not in _stats(a)["send"] and "A" in _stats(b)["recv"]
        await _send(a, b, b"new1", b"new2")
        await cluster.wait_until_delivered(timeout=5)
        sent, recv = _stats(a)["send"]["B"], _stats(b)["recv"]["A"]
        assert sent["seqno"] == 2 and sent["conn_id"] > old
        assert recv["conn_id"] == sent["conn_id"] and recv["low"] == 2
        assert _stats(b)["connections_reset"] == 1
        cluster.check_contract()


async def test_unicast2_scenario_5_b_closes_unilaterally_then_a_sends(
    autojump_clock: Any,
) -> None:
    """#5: B has no entry for A, discards the message and sends SEND_FIRST_SEQNO; A
    resends its lowest unacked message flagged first; B opens a recv_win with A's
    (unchanged) conn-id. Closed before STABLE purged A's window, so A resends messages
    B already delivered: none is delivered twice."""
    async with open_cluster(2, STACK, seed=5) as cluster:
        a, b = cluster.members
        arrived = _watch(b)
        await _send(a, b, *(b"m%d" % i for i in range(1, 6)))
        await trio.sleep(0.1)  # delivered, but no STABLE yet
        conn = _stats(a)["send"]["B"]["conn_id"]
        assert _stats(a)["send_window_size"] == 5
        _u2(b).close_connection(a.address, trio.current_time())
        await _send(a, b, b"m6")
        await cluster.wait_until_delivered(timeout=5)
        assert _stats(b)["send_first_seqno_sent"] == 1
        assert _stats(a)["send_first_seqno_received"] == 1
        assert [(h.seqno, h.first) for h in arrived[5:]] == [(6, False), (1, True)] + [
            (s, False) for s in range(2, 7)
        ]
        assert _stats(b)["recv"]["A"]["conn_id"] == conn
        assert _got(b, a) == [b"m%d" % i for i in range(1, 7)]
        cluster.check_contract()


async def test_unicast2_scenario_6_first_message_lost_after_reopening(
    autojump_clock: Any,
) -> None:
    """#6: as #4, but of A's #1(first) #2 #3 on the new connection #1 is lost, so B gets
    #2 first while its recv_win for A is still the old one. The conn-id on #2 tells B it
    is not part of that connection: B drops it and asks SEND_FIRST_SEQNO instead of
    treating (and acknowledging) it as old traffic, and every message arrives once."""
    async with open_cluster(2, STACK, seed=6) as cluster:
        a, b = cluster.members
        await _send(a, b, *(b"old%d" % i for i in range(1, 26)))
        await cluster.wait_until_delivered(timeout=5)
        await trio.sleep(2)
        old = _stats(a)["send"]["B"]["conn_id"]
        assert _stats(b)["recv"]["A"]["high"] == 25 and _stats(a)["send_window_size"] == 0
        _u2(a).close_connection(b.address, trio.current_time())

        def first_of_new_connection(msg: Message) -> bool:
            hdr = msg.headers.get(ID)
            return hdr is not None and hdr.type == DATA and hdr.first and hdr.conn_id > old

        a.protocol("DISCARD").drop_if(first_of_new_connection, direction="down", count=1)
        arrived = _watch(b)
        await _send(a, b, b"new1", b"new2", b"new3")
        await cluster.wait_until_delivered(timeout=10)
        assert a.protocol("DISCARD").stats()["dropped_down"] == 1
        assert (arrived[0].seqno, arrived[0].first) == (2, False)  # B got #2 first
        assert arrived[0].conn_id > old
        assert _stats(b)["send_first_seqno_sent"] >= 1
        assert _got(b, a)[-3:] == [b"new1", b"new2", b"new3"]
        cluster.check_contract()
        await trio.sleep(3)
        assert _stats(a)["send_window_size"] == 0  # purged only after B delivered


async def test_unicast2_scenario_7_merge_of_disjoint_partitions(autojump_clock: Any) -> None:
    """#7: in different partitions A and B remove each other's entries; once healed
    both create new entries (as #2) and talk again."""
    async with open_cluster(2, STACK, seed=7) as cluster:
        a, b = cluster.members
        await _exchange(cluster, a, b, 4)
        old_a = _stats(a)["send"]["B"]["conn_id"]
        old_b = _stats(b)["send"]["A"]["conn_id"]
        cluster.network.partition([a.address], [b.address])
        await cluster.install_view([a])
        await cluster.install_view([b])
        await trio.sleep(0.1)
        assert _stats(a)["send_connections"] == _stats(b)["send_connections"] == 0
        assert _stats(a)["recv_connections"] == _stats(b)["recv_connections"] == 0
        cluster.network.heal()
        await cluster.install_view([a, b])
        await _send(a, b, b"a-after")
        await _send(b, a, b"b-after")
        await cluster.wait_until_delivered(timeout=5)
        assert _stats(a)["send"]["B"]["conn_id"] > old_a
        assert _stats(b)["send"]["A"]["conn_id"] > old_b
        assert _stats(b)["recv"]["A"]["conn_id"] == _stats(a)["send"]["B"]["conn_id"]
        assert _stats(a)["recv"]["B"]["conn_id"] == _stats(b)["send"]["A"]["conn_id"]
        cluster.check_contract()


async def test_unicast2_scenario_8_overlapping_partitions_a_alone(autojump_clock: Any) -> None:
    """#8: A sees {A}, B sees {A,B}. A removed its entry for B, B kept its entry for A;
    A opens a new connection (as #1) and B replaces its recv_win (second half of #4)."""
    async with open_cluster(2, STACK, seed=8) as cluster:
        a, b = cluster.members
        await _exchange(cluster, a, b, 4)
        old = _stats(a)["send"]["B"]["conn_id"]
        await cluster.install_view([a])
        await trio.sleep(0.1)
        assert "B" not in _stats(a)["send"] and "A" in _stats(b)["recv"]
        await _send(a, b, b"a-after")
        await _send(b, a, b"b-after")
        await cluster.wait_until_delivered(timeout=5)
        new = _stats(a)["send"]["B"]["conn_id"]
        assert new > old and _stats(b)["recv"]["A"]["conn_id"] == new
        assert _stats(b)["connections_reset"] == 1
        cluster.check_contract()


async def test_unicast2_scenario_9_overlapping_partitions_b_alone(autojump_clock: Any) -> None:
    """#9: A sees {A,B}, B sees {B}. A sends #25; B has no entry, discards it and sends
    SEND_FIRST_SEQNO; A resends its lowest unacked message with its conn-id; B opens a
    recv_win there with A's (unchanged) conn-id."""
    async with open_cluster(2, STACK, seed=9) as cluster:
        a, b = cluster.members
        await _send(a, b, *(b"m%d" % i for i in range(1, 25)))
        await cluster.wait_until_delivered(timeout=5)
        await trio.sleep(2)  # STABLE: A purged #1..#24
        conn = _stats(a)["send"]["B"]["conn_id"]
        await cluster.install_view([b])
        await trio.sleep(0.1)
        assert "A" not in _stats(b)["recv"] and "B" in _stats(a)["send"]
        arrived = _watch(b)
        await _send(a, b, b"m25")
        await cluster.wait_until_delivered(timeout=5)
        assert [(h.seqno, h.first) for h in arrived] == [(25, False), (25, True)]
        assert _stats(b)["send_first_seqno_sent"] == 1
        recv = _stats(b)["recv"]["A"]
        assert recv["conn_id"] == conn and recv["low"] == 25
        cluster.check_contract()


# --- the delivery contract's other promises ------------------------------------------------


async def test_unicast2_unicast_to_self_is_delivered_locally_and_in_order(
    autojump_clock: Any,
) -> None:
    async with open_cluster(2, STACK, seed=10, loss=0.3) as cluster:
        a, _ = cluster.members
        await _send(a, a, *(b"self%d" % i for i in range(50)))
        await trio.sleep(0.01)
        assert _got(a, a) == [b"self%d" % i for i in range(50)]
        assert cluster.network.stats()["sent"] == 0 and _stats(a)["retransmissions"] == 0


async def test_unicast2_oob_is_reliable_under_loss_and_may_overtake(
    autojump_clock: Any,
) -> None:
    async with open_cluster(2, STACK, seed=11, loss=0.25, max_delay=0.02) as cluster:
        a, b = cluster.members
        for i in range(60):
            await a.send(b"m%d" % i, b.address, flags=Flag.OOB if i % 3 == 0 else 0)
            await trio.sleep(0.005)
        await cluster.wait_until_delivered(timeout=20)
        cluster.check_contract()
        assert _stats(b)["xmit_reqs_sent"] > 0 and _stats(a)["retransmissions"] > 0


async def test_unicast2_lost_last_message_is_recovered_through_stable(
    autojump_clock: Any,
) -> None:
    """No later message reveals the gap; the STABLE's hr tells A what B lacks."""
    async with open_cluster(2, STACK, seed=12) as cluster:
        a, b = cluster.members
        await _send(a, b, b"m1", b"m2")
        await cluster.wait_until_delivered(timeout=5)
        a.protocol("DISCARD").drop_if(lambda m: m.payload == b"m3", count=1)
        await _send(a, b, b"m3")
        await trio.sleep(0.5)
        assert _got(b, a) == [b"m1", b"m2"]
        await cluster.wait_until_delivered(timeout=5)
        assert _stats(a)["retransmissions"] == 1 and _stats(b)["xmit_reqs_sent"] == 0


async def test_unicast2_connection_to_a_non_member_ages_out(autojump_clock: Any) -> None:
    async with open_cluster(3, STACK, seed=13) as cluster:
        a, b, c = cluster.members
        await cluster.install_view([a, b])
        await trio.sleep(0.1)
        _u2(a).set_property("max_retransmit_time", 5.0, trio.current_time())
        cluster.network.partition([a.address, b.address], [c.address])
        await _send(a, c, b"to-non-member")
        await trio.sleep(4)
        assert "C" in _stats(a)["send"] and _stats(a)["age_out"] == 1
        await trio.sleep(2)
        assert "C" not in _stats(a)["send"] and _stats(a)["aged_out"] == 1


# --- the seed's goals #2 and #4 ----------------------------------------------------------------


async def test_unicast2_goal_2_unicasts_to_and_from_a_non_member_are_delivered(
    autojump_clock: Any,
) -> None:
    """Goal #2: a member talks to a non-member, both ways, and nothing gates it (JGroups'
    old enabled_mbrs / prev_mbrs are gone). A and B share a view; C is in neither of
    their views and A in none of C's. With 20% loss, A's unicasts to C and C's to A are
    all delivered exactly once and in order. A does treat C as a non-member (the
    connection is on the age-out list of goal #3), but nothing ages out in this time."""
    faults: dict[str, Any] = {"loss": 0.2, "max_delay": 0.02}
    async with open_cluster(3, STACK, seed=14, view=False, **faults) as cluster:
        a, b, c = cluster.members
        await cluster.install_view([a, b])
        await cluster.install_view([c])
        await trio.sleep(0.1)
        a_view, c_view = _u2(a).view, _u2(c).view
        assert a_view is not None and c.address not in a_view
        assert c_view is not None and a.address not in c_view
        for i in range(40):
            await _send(a, c, b"a>c%d" % i)
            await _send(c, a, b"c>a%d" % i)
            await _send(a, b, b"a>b%d" % i)
            await trio.sleep(0.01)
        await cluster.wait_until_delivered(timeout=30)
        assert _got(c, a) == [b"a>c%d" % i for i in range(40)]
        assert _got(a, c) == [b"c>a%d" % i for i in range(40)]
        assert _stats(a)["age_out"] == 1 and _stats(a)["aged_out"] == 0
        assert _stats(a)["retransmissions"] > 0 and _stats(c)["retransmissions"] > 0


async def test_unicast2_goal_4_works_without_views_or_gms(autojump_clock: Any) -> None:
    """Goal #4, 'Unicast JGroups': two members whose stack has no GMS, and no view is
    ever installed. With 20% loss, duplication and reordering every unicast is
    delivered exactly once and in order, both ways, and STABLE purges both windows."""
    faults: dict[str, Any] = {"loss": 0.2, "duplicate": 0.1, "max_delay": 0.03}
    async with open_cluster(2, STACK, seed=15, view=False, **faults) as cluster:
        a, b = cluster.members
        assert "GMS" not in cluster.config.names()
        for i in range(50):
            await _send(a, b, b"a%d" % i)
            await _send(b, a, b"b%d" % i)
            await trio.sleep(0.01)
        await cluster.wait_until_delivered(timeout=30)
        assert _got(b, a) == [b"a%d" % i for i in range(50)]
        assert _got(a, b) == [b"b%d" % i for i in range(50)]
        await wait_until(
            lambda: not _stats(a)["send_window_size"] and not _stats(b)["send_window_size"],
            interval=0.5,
        )
        assert _u2(a).view is None and _u2(b).view is None
        assert _stats(a)["retransmissions"] > 0 and _stats(b)["retransmissions"] > 0


async def test_unicast2_sender_that_never_fills_a_gap_is_capped_then_recovers(
    autojump_clock: Any,
) -> None:
    """Issue 18, a sender that never fills its gaps: every copy of A's #2 is lost while
    A sends 60 more, so B's window of A would grow without end. With
    ``max_receive_window=10`` B keeps at most 10 seqnos of it and counts the rest as
    ``dropped_beyond_window``; once #2 gets through, A's retransmissions bring what B
    dropped and every message is delivered exactly once, in order."""
    stack = STACK.configure("UNICAST2", max_receive_window=10, xmit_interval=0.2)
    async with open_cluster(2, stack, seed=18) as cluster:
        a, b = cluster.members

        def second(msg: Message) -> bool:
            hdr = msg.headers.get(ID)
            return hdr is not None and hdr.type == DATA and hdr.seqno == 2

        a.protocol("DISCARD").drop_if(second, direction="down", count=None)
        peak = 0
        for i in range(1, 62):
            await _send(a, b, b"m%d" % i)
            await trio.sleep(0.05)
            peak = max(peak, _stats(b)["recv_window_size"])
        assert peak <= 10 and _stats(b)["dropped_beyond_window"] > 0
        assert _got(b, a) == [b"m1"]
        a.protocol("DISCARD").reset()
        await cluster.wait_until_delivered(timeout=60)
        assert _got(b, a) == [b"m%d" % i for i in range(1, 62)]
        cluster.check_contract()
