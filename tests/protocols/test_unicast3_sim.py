"""UNICAST3 in whole stacks on the simulated network, in virtual time.

Named scenarios of seeds 001 and 000, and a Hypothesis property test that
drives loss, duplication, reordering, one-way partitions that heal, and
connections closed and reopened on either side, then checks the delivery
contract, that send windows are purged and that retransmissions stay in
proportion to what the network lost.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Flag, Message, StackConfig
from triogroups.extend import Protocol
from triogroups.protocols import ids
from triogroups.protocols.unicast3 import Unicast3Header
from triogroups.protocols.unicast3._common import ACK, DATA, SEND_FIRST_SEQNO, XMIT_REQ
from triogroups.testing import SimCluster, SimMember, open_cluster, wait_until

ID = ids.UNICAST3
_NONE = Unicast3Header(-1)


class _Tap(Protocol):
    """Test layer below UNICAST3: records its control traffic; can delay ACKs coming up.

    With ``hold_acks`` set, ACKs coming up are kept back until a batch with a
    SEND_FIRST_SEQNO comes up; they are then passed up right after it, which
    is exactly "a delayed ACK arriving after a resync" (seed 000).
    `delay_acks` keeps ACKs back until a given time instead.
    """

    name = "TEST_U3_TAP"

    def __init__(self, **props: Any) -> None:
        super().__init__(**props)
        self.sent: list[tuple[float, int]] = []
        self.hold_acks = False
        self.held_until = -math.inf
        self.held: list[Message] = []

    def delay_acks(self, until: float) -> None:
        self.held_until = until

    def down(self, batch: list[Message], now: float) -> None:
        self.sent.extend((now, m.headers[ID].type) for m in batch if ID in m.headers)
        self.send_down(batch)

    def up(self, batch: list[Message], now: float) -> None:
        if self.held and not self.hold_acks and now >= self.held_until:
            self.tick(now)
        if not self.hold_acks and now >= self.held_until:
            self.send_up(batch)
            return
        keep = []
        for m in batch:
            hdr = m.headers.get(ID)
            if hdr is not None and hdr.type == ACK:
                self.held.append(m)
            else:
                keep.append(m)
        if self.hold_acks and any(m.headers.get(ID, _NONE).type == SEND_FIRST_SEQNO for m in keep):
            keep.extend(self.held)
            self.held = []
            self.hold_acks = False
        self.send_up(keep)

    def next_deadline(self) -> float:
        return self.held_until if self.held and not self.hold_acks else math.inf

    def tick(self, now: float) -> None:
        """The delay is over: the held ACKs go up, in the order they came."""
        self.send_up(self.held)
        self.held = []
        self.held_until = -math.inf

    def times_sent(self, kind: int) -> list[float]:
        return [t for t, k in self.sent if k == kind]


class _DropEveryOther(Protocol):
    """Test layer below UNICAST3: drops the first sending of every even-seqno DATA
    (its retransmissions pass) and records the size of every XMIT_REQ going down."""

    name = "TEST_U3_DROP_EVERY_OTHER"

    def __init__(self, **props: Any) -> None:
        super().__init__(**props)
        self.dropped: set[tuple[Any, int]] = set()
        self.xmit_req_sizes: list[int] = []

    def down(self, batch: list[Message], now: float) -> None:
        keep = []
        for m in batch:
            hdr = m.headers.get(ID)
            if hdr is not None and hdr.type == DATA and hdr.seqno % 2 == 0:
                if (m.dest, hdr.seqno) not in self.dropped:
                    self.dropped.add((m.dest, hdr.seqno))
                    continue
            elif hdr is not None and hdr.type == XMIT_REQ:
                self.xmit_req_sizes.append(len(hdr.missing))
            keep.append(m)
        self.send_down(keep)


def _stack(**props: Any) -> StackConfig:
    return StackConfig.of("SIM", "TEST_U3_TAP", "DISCARD", ("UNICAST3", props))


def _u3(member: SimMember) -> Any:
    return member.protocol("UNICAST3")


def _received_from(member: SimMember, src: SimMember) -> list[bytes]:
    return [m.payload for m in member.delivered if m.src == src.address]


def _payloads(prefix: str, n: int, start: int = 0) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(start, start + n)]


async def _settle(cluster: SimCluster, timeout: float = 60.0) -> None:
    """Wait until everything is delivered and every send window is empty (acked)."""
    await cluster.wait_until_delivered(timeout=timeout)
    with trio.move_on_after(timeout):
        while any(_u3(m).stats()["unacked"] for m in cluster.members):
            await trio.sleep(0.1)
    assert [_u3(m).stats()["unacked"] for m in cluster.members] == [0] * len(cluster.members)


def _retransmitted(cluster: SimCluster) -> int:
    return sum(
        s["xmit_rsps_sent"] + s["retransmissions"] + s["first_resent"]
        for s in (_u3(m).stats() for m in cluster.members)
    )


# --- scenarios ---------------------------------------------------------------------------


async def test_unicast3_scenario_lossy_network_delivers_everything(autojump_clock: Any) -> None:
    """Loss, duplication and reordering: every unicast exactly once, in order; windows purged."""
    faults: dict[str, Any] = {"loss": 0.2, "duplicate": 0.1, "min_delay": 0.001, "max_delay": 0.03}
    async with open_cluster(3, _stack(), seed=7, **faults) as cluster:
        for i in range(100):
            for src in cluster.members:
                for dst in cluster.members:
                    if dst is not src:
                        await src.send(f"{src.name}{i}".encode(), dst.address)
            await trio.sleep(0.01)
        await _settle(cluster)
        cluster.check_contract()
        st = _u3(cluster[0]).stats()
        assert st["undelivered"] == 0 and st["xmit_reqs_sent"] > 0 and st["acks_sent"] > 0


async def test_unicast3_scenario_capped_xmit_reqs_every_other_unicast_lost(
    autojump_clock: Any,
) -> None:
    """Issue 12 item 3: 50,000 unicasts with every other one dropped, requests capped
    by an 8 KB bundle. No XMIT_REQ is empty, each asks for a full cap while 25,000
    gaps wait, and everything is delivered, in order."""
    n, bundle = 50_000, 8192
    stack = StackConfig.of(
        ("SIM", {"max_bundle_size": bundle}), "TEST_U3_DROP_EVERY_OTHER", "UNICAST3"
    )
    async with open_cluster(2, stack, seed=12) as cluster:
        a, b = cluster.members
        for i in range(0, n, 1000):
            await a.send_many(_payloads("u", 1000, i), b.address)
        await _settle(cluster, timeout=600)
        cluster.check_contract()
        assert _received_from(b, a) == _payloads("u", n)
        sizes = b.protocol("TEST_U3_DROP_EVERY_OTHER").xmit_req_sizes
        cap = _u3(b).request_cap(a.address)
        assert 0 not in sizes
        assert sizes[: (n // 2) // cap] == [cap] * ((n // 2) // cap)
        assert sum(sizes) == _u3(b).stats()["xmit_reqs_sent"] >= n // 2 - 1


async def test_unicast3_scenario_oob_is_reliable_and_may_overtake(autojump_clock: Any) -> None:
    async with open_cluster(2, _stack(), seed=3, loss=0.25, max_delay=0.02) as cluster:
        a, b = cluster.members
        for i in range(200):
            await a.send(f"m{i}".encode(), b.address, flags=Flag.OOB if i % 3 == 0 else 0)
        await _settle(cluster)
        cluster.check_contract()  # OOB: exactly once, any order; regular: in order
        got = _received_from(b, a)
        regular = [p for p in got if int(p[1:]) % 3]
        assert regular == sorted(regular, key=lambda p: int(p[1:])) and len(got) == 200


async def test_unicast3_scenario_unicast_to_self_is_local_and_in_order(
    autojump_clock: Any,
) -> None:
    async with open_cluster(2, _stack(), seed=1, loss=0.3) as cluster:
        a, b = cluster.members
        for i in range(50):
            await a.send(f"s{i}".encode(), a.address, flags=Flag.OOB if i % 5 == 0 else 0)
            await a.send(f"b{i}".encode(), b.address)
        await _settle(cluster)
        cluster.check_contract()
        assert _received_from(a, a) == _payloads("s", 50)  # local: even OOB stays in order
        assert _u3(a).stats()["loopbacks"] == 50 and "A" not in _u3(a).stats()["send_conns"]


async def test_unicast3_scenario_idle_connection_closes_and_reopens(autojump_clock: Any) -> None:
    """Seed 001 connection states end to end: OPEN -> CLOSING -> CLOSED (CLOSE sent) -> new."""
    props = {"conn_expiry_timeout": 1.0, "conn_close_timeout": 2.0}
    async with open_cluster(2, _stack(**props), seed=5, loss=0.1) as cluster:
        a, b = cluster.members
        await a.send_many(_payloads("x", 20), b.address)
        await _settle(cluster)
        await trio.sleep(5.0)
        assert _u3(a).stats()["closes_sent"] == 1 and _u3(a).stats()["send_conns"] == {}
        assert _u3(b).stats()["recv_conns"] == {}
        await a.send_many(_payloads("y", 20), b.address)
        await _settle(cluster)
        cluster.check_contract()
        assert _u3(a).stats()["send_conns"]["B"]["conn_id"] == 1


async def test_unicast3_scenario_member_that_never_answers_is_given_up(
    autojump_clock: Any,
) -> None:
    """The rule "messages to a member that never answers are given up after
    max_retransmit_time, and the connection is removed", where it applies: C was a
    member, died, and is no longer in A's view (what failure detection leads to), so it
    is a peer outside the view. As in JGroups, max_retransmit_time is the timeout of
    UNICAST3's age-out cache, which holds only peers outside the view; a silent view
    member is never given up by UNICAST3 (test_messages_to_a_member_are_never_given_up).
    A's messages to C are kept and resent for 60 s (the default), then given up and the
    connection removed, without a CLOSE to C."""
    async with open_cluster(3, _stack(), seed=2) as cluster:
        a, b, c = cluster.members
        c.kill()
        view = await cluster.install_view([a, b])
        assert c.address not in view
        await a.send_many(_payloads("c", 10), c.address)
        await trio.sleep(59.0)
        assert _u3(a).stats()["send_conns"]["C"]["window"] == 10
        assert _u3(a).max_retransmit_time == 60.0
        await trio.sleep(2.0)
        st = _u3(a).stats()
        assert st["msgs_given_up"] == 10 and "C" not in st["send_conns"]
        assert st["send_conns_removed"] == 1 and st["closes_sent"] == 0


async def _split_and_forget(cluster: SimCluster, a: SimMember, b: SimMember) -> None:
    """Seed 000's asymmetric split: B drops A from its view (A keeps B), A cannot reach B.

    B's window for A goes CLOSING, is removed after conn_close_timeout, and
    (A being a non-member) forgotten after another; then the network heals
    and a view with both is installed again.
    """
    await cluster.install_view([b])
    cluster.network.block(a.address, b.address)
    await trio.sleep(5.0)
    assert _u3(b).stats()["recv_conns"] == {} and _u3(b).stats()["floors"] == 0
    cluster.network.heal()
    await cluster.install_view([a, b])


async def test_unicast3_scenario_jgrp1873_delayed_ack_cannot_purge_unseen_messages(
    autojump_clock: Any,
) -> None:
    """Seed 000 bug #2, whole stack: all messages delivered, retransmission stops.

    B's acks for #1-#5 are held back at A until B's SEND_FIRST_SEQNO arrives
    after the split, then handed to A right after it. A drops them (older
    timestamps) and keeps #2-#5, which B's new window asks for. B, having
    forgotten A's window, delivers #1-#5 again: that is what dropping A from
    its view meant, as in JGroups.
    """
    async with open_cluster(2, _stack(conn_close_timeout=2.0), seed=11) as cluster:
        a, b = cluster.members
        a.protocol("TEST_U3_TAP").hold_acks = True
        await a.send_many(_payloads("m", 5, 1), b.address)
        await trio.sleep(1.0)
        assert _received_from(b, a) == _payloads("m", 5, 1)
        await _split_and_forget(cluster, a, b)
        await a.send_many(_payloads("m", 3, 6), b.address)
        await trio.sleep(5.0)
        assert _received_from(b, a) == _payloads("m", 5, 1) + _payloads("m", 8, 1)
        st_a = _u3(a).stats()
        assert st_a["acks_dropped_stale"] >= 1 and st_a["unacked"] == 0
        before = (_retransmitted(cluster), _u3(b).stats()["xmit_reqs_sent"])
        await trio.sleep(10.0)
        assert (_retransmitted(cluster), _u3(b).stats()["xmit_reqs_sent"]) == before


async def test_unicast3_scenario_jgrp1874_one_sync_per_interval_after_split(
    autojump_clock: Any,
) -> None:
    """Seed 000 bug #1: after the split heals, a 1,000-message burst from A reaches B, which
    has no window for A. B's SEND_FIRST_SEQNOs go out at most once per sync_min_interval
    (here the first two answers are lost, so B has to ask three times), counted in stats().
    """
    async with open_cluster(2, _stack(conn_close_timeout=2.0), seed=13) as cluster:
        a, b = cluster.members
        await a.send_many(_payloads("w", 10), b.address)
        await _settle(cluster)
        await _split_and_forget(cluster, a, b)

        def answer(m: Message) -> bool:
            hdr = m.headers.get(ID)
            return hdr is not None and hdr.type == DATA and hdr.first

        a.protocol("DISCARD").drop_if(answer, count=2)
        await a.send_many(_payloads("burst", 1000), b.address)
        await _settle(cluster)
        cluster.check_contract()
        times = b.protocol("TEST_U3_TAP").times_sent(SEND_FIRST_SEQNO)
        assert len(times) == 3 == _u3(b).stats()["send_first_seqno_sent"]
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert all(g >= _u3(b).sync_min_interval for g in gaps), gaps
        assert _u3(a).stats()["send_first_seqno_received"] == 3


# --- the delivery contract under faults (Hypothesis) -----------------------------------------

_OPS = st.one_of(
    st.tuples(
        st.just("send"), st.integers(0, 2), st.integers(0, 2), st.integers(1, 40), st.booleans()
    ),
    st.tuples(st.just("block"), st.integers(0, 2), st.integers(0, 2), st.floats(0.5, 8.0)),
    st.tuples(st.just("close"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("delay_acks"), st.integers(0, 2), st.floats(0.5, 5.0)),
    st.tuples(st.just("idle"), st.floats(0.1, 6.0)),
)


async def _drive(seed: int, loss: float, faults: dict[str, Any], ops: list[Any]) -> None:
    """Run ``ops`` on 3 members; loss and one-way partitions are made per message by DISCARD
    (so what was lost is counted exactly), duplication and reordering by the network, delayed
    ACKs by the tap."""
    props = {"conn_expiry_timeout": 1.5, "conn_close_timeout": 2.0}
    stack = StackConfig.of(
        "SIM", "TEST_U3_TAP", ("DISCARD", {"down_loss": loss, "seed": seed}), ("UNICAST3", props)
    )
    async with open_cluster(3, stack, seed=seed, **faults) as cluster:
        members = cluster.members
        counter = 0
        delayed = 0.0  # seconds of delayed ACKs, all senders together
        for op in ops:
            if op[0] == "send":
                _, s, d, n, oob = op
                flags = Flag.OOB if oob else 0
                payloads = _payloads(f"{s}>{d}:", n, counter)
                await members[s].send_many(payloads, members[d].address, flags=flags)
                counter += n
            elif op[0] == "block":  # a one-way partition that heals
                _, s, d, secs = op
                members[s].protocol("DISCARD").drop_to(members[d].address)
                await trio.sleep(secs)
                members[s].protocol("DISCARD").reset()
            elif op[0] == "close":
                _, s, d = op
                _u3(members[s]).close_connection(members[d].address, trio.current_time())
            elif op[0] == "delay_acks":  # ACKs reach this sender late (and reordered with data)
                _, s, secs = op
                members[s].protocol("TEST_U3_TAP").delay_acks(trio.current_time() + secs)
                delayed += secs
            else:
                await trio.sleep(op[1])
        await _settle(cluster, timeout=120.0)
        cluster.check_contract()
        stats = [_u3(m).stats() for m in members]
        assert all(s["undelivered"] == 0 and s["msgs_given_up"] == 0 for s in stats)
        lost = sum(m.protocol("DISCARD").counters["dropped_down"] for m in members)
        # No storms: retransmissions in proportion to the messages that were lost. While a
        # sender's ACKs are delayed it resends HS once per run to each of its two peers.
        allowance = 2 * (delayed / _u3(members[0]).xmit_interval + 2)
        assert _retransmitted(cluster) <= 3 * lost + allowance + 10, (lost, delayed, stats)
        await trio.sleep(10.0)  # idle: caches and last-sync entries age out
        assert all(_u3(m).stats()["cache_size"] == 0 for m in members)


@settings(max_examples=examples(40), deadline=None)
@given(
    seed=st.integers(0, 2**16),
    loss=st.floats(0.0, 0.3),
    duplicate=st.floats(0.0, 0.2),
    max_delay=st.floats(0.001, 0.05),
    ops=st.lists(_OPS, min_size=1, max_size=12),
)
def test_unicast3_property_delivery_contract_under_faults(
    seed: int, loss: float, duplicate: float, max_delay: float, ops: list[Any]
) -> None:
    faults = {"duplicate": duplicate, "min_delay": 0.001, "max_delay": max_delay}
    clock = trio.testing.MockClock(autojump_threshold=0)
    trio.run(_drive, seed, loss, faults, ops, clock=clock)


async def test_unicast3_scenario_graceful_leave_ends_retransmission_to_the_leaver(
    autojump_clock: Any,
) -> None:
    """Issue 38, in a whole GMS stack: A has five unicasts to C that C never got (A -> C is
    blocked) when C leaves gracefully. The view without C drops A's send connection to C
    with the five (given up, counted): none of them is resent afterwards (before the fix
    they were, every xmit_interval for max_retransmit_time, 60 s, which the inspector
    showed as an xmit warning on the coordinator), and A's unicasts to B still get
    through. (What A sends C after that view, here MERGE3's probe of the lone C, is a
    connection to a non-member, under max_retransmit_time as before.)"""
    async with open_cluster(3, "udp", seed=4) as cluster:
        a, b, c = cluster.members
        cluster.network.block(a.address, c.address)
        await a.send_many(_payloads("c", 5), c.address)
        old = _u3(a).stats()["send_conns"]["C"]["conn_id"]
        await c.disconnect()
        await cluster.wait_for_view([a, b])
        st = _u3(a).stats()
        assert st["send_conns_departed"] == 1
        assert st["msgs_given_up"] == 6  # the five and the LEAVE_RSP (C never got it)
        for _ in range(60):
            await trio.sleep(0.5)
            conns = _u3(a).stats()["send_conns"]
            assert "C" not in conns or conns["C"]["conn_id"] != old
        await a.send(b"to b", to=b.address)
        await wait_until(lambda: b"to b" in _received_from(b, a), timeout=10, interval=0.1)


async def test_unicast3_scenario_excluded_member_merged_back_gets_unicasts_again(
    autojump_clock: Any,
) -> None:
    """A member excluded and merged back: C is cut off with unicasts from A in flight, A and
    B's view drops it (and A's window to it), the network heals and MERGE3 brings C back.
    A's next unicasts to C open a new connection that C delivers in order, and A's send
    windows drain (every unicast acked)."""
    async with open_cluster(3, "udp", seed=5) as cluster:
        a, b, c = cluster.members
        cluster.partition([a, b], [c])
        await a.send_many(_payloads("lost", 3), c.address)
        await cluster.wait_for_view([a, b], timeout=120)
        assert "C" not in _u3(a).stats()["send_conns"]
        cluster.heal()
        await cluster.wait_for_view(timeout=300)
        await a.send_many(_payloads("back", 5), c.address)
        await wait_until(
            lambda: len([p for p in _received_from(c, a) if p.startswith(b"back")]) >= 5,
            interval=0.1,
        )
        assert [p for p in _received_from(c, a) if p.startswith(b"back")] == _payloads("back", 5)
        await wait_until(lambda: not _u3(a).stats()["unacked"], interval=0.1)
