"""MCAST (seed 004) scenarios on the simulated network, in virtual time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from triogroups import Digest, Flag, Message, StackConfig
from triogroups.events import DigestReply, GetDigest, SetDigest, ViewChange
from triogroups.protocols import ids
from triogroups.protocols.mcast import ACK, as_header
from triogroups.testing import SimCluster, SimMember, open_cluster, wait_until

#: Virtual seconds a scenario may take: a stuck stack fails the test instead of hanging it.
_GUARD = 120


def _stack(**props: Any) -> StackConfig:
    return StackConfig.of("SIM", "DISCARD", ("MCAST", {"xmit_interval": 0.1, **props}))


def _payloads(member: SimMember) -> list[bytes]:
    return [m.payload for m in member.delivered]


def _mcast_stats(cluster: SimCluster, key: str) -> int:
    return sum(m.protocol("MCAST").stats()[key] for m in cluster.members)


def _is(payload: bytes) -> Callable[[Message], bool]:
    return lambda m: m.payload == payload


def _is_ack(msg: Message) -> bool:
    hdr = as_header(msg.headers.get(ids.MCAST))
    return hdr is not None and hdr.type == ACK


async def test_mcast_eight_concurrent_senders_on_a_lossless_network_cause_zero_xmit_reqs(
    autojump_clock: Any,
) -> None:
    """Seed "Misc": seqno, window and send are one step, so no gap is ever seen."""
    with trio.fail_after(20):
        stack = _stack(capacity=32, xmit_interval=0.002)
        async with open_cluster(3, stack, seed=1, min_delay=0.002, max_delay=0.002) as cluster:
            a = cluster[0]

            async def sender(task: int) -> None:
                for i in range(0, 60, 3):
                    await a.send_many([f"{task}-{j}".encode() for j in range(i, i + 3)])
                    await trio.sleep(0.0005 * (task % 3))

            async with trio.open_nursery() as nursery:
                for task in range(8):
                    nursery.start_soon(sender, task)
            await cluster.wait_until_delivered(timeout=30)
            assert a.protocol("MCAST").stats()["blockings"] > 0  # the window filled: senders waited
            assert _mcast_stats(cluster, "xmit_reqs_sent") == 0
            assert _mcast_stats(cluster, "retransmissions") == 0
            assert len(cluster[1].delivered) == 480


async def test_mcast_full_window_blocks_the_sender_until_the_partition_heals(
    autojump_clock: Any,
) -> None:
    """A receiver that stops acking fills the window: Stack.send awaits, nothing is lost."""
    with trio.fail_after(_GUARD):
        async with open_cluster(3, _stack(capacity=16), seed=2) as cluster:
            a, b, c = cluster.members
            cluster.network.partition([a.address, c.address], [b.address])
            sent = 0

            async def sender() -> None:
                nonlocal sent
                for i in range(60):
                    await a.send(f"a{i}".encode())
                    sent += 1

            async with trio.open_nursery() as nursery:
                nursery.start_soon(sender)
                await trio.sleep(10)
                mcast = a.protocol("MCAST")
                stats = mcast.stats()
                assert mcast.blocks_down() and stats["parked_messages"] > 0
                assert stats["send_window"]["size"] == 15  # capacity - 1, as the seed's rule gives
                assert sent < 60  # the sending task is parked, not dropping
                assert len(_payloads(c)) == 15 and _payloads(b) == []
                cluster.network.heal()
            assert sent == 60
            await cluster.wait_until_delivered(timeout=30)
            cluster.check_contract()


async def test_mcast_view_change_dropping_a_silent_member_releases_the_blocked_sender(
    autojump_clock: Any,
) -> None:
    """A dead member cannot block senders forever: the next view recomputes the minimum."""
    with trio.fail_after(_GUARD):
        async with open_cluster(3, _stack(capacity=8), seed=3) as cluster:
            a, b, c = cluster.members
            cluster.network.partition([a.address, b.address], [c.address])
            done = trio.Event()

            async def sender() -> None:
                await a.send_many([f"a{i}".encode() for i in range(30)])
                for i in range(30, 80):
                    await a.send(f"a{i}".encode())
                done.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(sender)
                await trio.sleep(5)
                assert a.protocol("MCAST").blocks_down() and not done.is_set()
                with trio.fail_after(10):
                    await cluster.install_view([a, b])
                    await done.wait()
            await wait_until(lambda: len(_payloads(b)) >= 80, timeout=30, interval=0.1)
            cluster.check_contract([a, b])
            await trio.sleep(1)
            assert a.protocol("MCAST").stats()["ack_map"] == {"B": 80}


async def test_mcast_oob_overtakes_a_regular_message_blocked_behind_a_gap(
    autojump_clock: Any,
) -> None:
    """OOB multicasts are reliable and may overtake; a gap does not hold them up."""
    with trio.fail_after(_GUARD):
        async with open_cluster(2, _stack(xmit_interval=1.0), seed=4) as cluster:
            a, b = cluster.members
            a.protocol("DISCARD").drop_if(_is(b"r1"))
            await a.send(b"r1")
            await a.send(b"r2")
            await a.send(b"o3", flags=Flag.OOB)
            await trio.sleep(0.5)
            assert _payloads(b) == [b"o3"]  # r2 waits for r1, o3 does not
            await trio.sleep(2)
            assert _payloads(b) == [b"o3", b"r1", b"r2"]
            assert _payloads(a) == [b"r1", b"r2", b"o3"]  # the local delivery was never at risk
            cluster.check_contract()


async def test_mcast_own_multicasts_are_delivered_once_and_dont_loopback_is_honoured(
    autojump_clock: Any,
) -> None:
    with trio.fail_after(_GUARD):
        async with open_cluster(2, _stack(), seed=5) as cluster:
            a, b = cluster.members
            await a.send(b"m1")
            await a.send(b"m2", flags=Flag.DONT_LOOPBACK)
            await a.send(b"m3")
            await trio.sleep(2)
            assert _payloads(a) == [b"m1", b"m3"]
            assert _payloads(b) == [b"m1", b"m2", b"m3"]
            # sent down with DONT_LOOPBACK: the transport copied nothing back up to drop
            assert a.protocol("MCAST").stats()["loopbacks_dropped"] == 0


async def test_mcast_lost_last_message_is_recovered_by_resending_the_highest(
    autojump_clock: Any,
) -> None:
    """Tail loss: no later message reveals the gap, so the sender resends its highest."""
    with trio.fail_after(_GUARD):
        async with open_cluster(3, _stack(xmit_interval=0.2), seed=6) as cluster:
            a, b, c = cluster.members
            a.protocol("DISCARD").drop_if(_is(b"last"))
            await a.send_many([b"first", b"last"])
            await trio.sleep(2)
            assert _payloads(b) == _payloads(c) == [b"first", b"last"]
            stats = a.protocol("MCAST").stats()
            assert stats["last_seqno_resends"] >= 2 and stats["send_window"]["size"] == 0
            assert _mcast_stats(cluster, "xmit_reqs_sent") == 0


async def test_mcast_lost_acks_are_repaired_and_the_window_empties(autojump_clock: Any) -> None:
    """B loses its acks for a while; the sender's last-seqno resend draws a fresh ACK."""
    with trio.fail_after(_GUARD):
        async with open_cluster(2, _stack(capacity=8, xmit_interval=0.2), seed=7) as cluster:
            a, b = cluster.members
            b.protocol("DISCARD").drop_if(_is_ack, count=None)
            await a.send_many([f"a{i}".encode() for i in range(5)])
            await trio.sleep(2)
            assert a.protocol("MCAST").stats()["send_window"]["size"] == 5
            b.protocol("DISCARD").reset()
            await trio.sleep(1)
            assert a.protocol("MCAST").stats()["send_window"] == {"low": 5, "high": 5, "size": 0}
            assert len(_payloads(b)) == 5 and b.protocol("MCAST").stats()["duplicates"] >= 1


async def test_mcast_joiner_creates_windows_at_the_digest_offset(autojump_clock: Any) -> None:
    """Seed: on a digest, windows for the members start at the digest's offset."""
    with trio.fail_after(_GUARD):
        async with open_cluster(3, _stack(), seed=8, view=False) as cluster:
            a, b, c = cluster.members
            await cluster.install_view([a, b])
            await a.send_many([b"old1", b"old2"])
            await trio.sleep(1)
            await a.stack.send(GetDigest("TEST"))
            await wait_until(
                lambda: any(isinstance(e, DigestReply) for e in a.events), timeout=5, interval=0.01
            )
            (reply,) = [e for e in a.events if isinstance(e, DigestReply)]
            assert reply.requester == "TEST" and reply.digest[a.address] == (2, 2)
            await c.stack.send(SetDigest(reply.digest))
            await cluster.install_view([a, b, c])
            await a.send_many([b"new1", b"new2"])
            await trio.sleep(2)
            assert _payloads(c) == [b"new1", b"new2"]
            assert _payloads(b) == [b"old1", b"old2", b"new1", b"new2"]
            assert c.protocol("MCAST").stats()["xmit_reqs_sent"] == 0
            assert a.protocol("MCAST").stats()["send_window"]["size"] == 0


async def test_mcast_retransmissions_answer_xmit_reqs_under_loss(autojump_clock: Any) -> None:
    """Lost multicasts are asked for (XMIT_REQ) and answered with the original message."""
    with trio.fail_after(_GUARD):
        async with open_cluster(3, _stack(), seed=9, loss=0.2) as cluster:
            for member in cluster.members:
                await member.send_many([f"{member.name}{i}".encode() for i in range(30)])
            await cluster.wait_until_delivered(timeout=60)
            assert _mcast_stats(cluster, "xmit_reqs_sent") > 0
            assert _mcast_stats(cluster, "retransmissions") > 0
            assert _mcast_stats(cluster, "xmit_rsps_received") > 0


async def test_mcast_window_is_the_flow_control_no_mfc_needed(autojump_clock: Any) -> None:
    """Seed 004: "flow control is built in, and MFC is not required anymore".

    A stack with MCAST and no MFC. C receives and delivers everything but its
    acks are lost for a while (a receiver that does not ack, then acks late),
    B acks as usual. A's sender stops at the window's limit (``S - low >=
    capacity``: ``capacity - 1`` unacked) and stays there, holding no more
    however long C is silent; once C's acks arrive the sender resumes and
    every message arrives, in order.
    """
    total, capacity = 200, 16
    with trio.fail_after(_GUARD):
        async with open_cluster(3, _stack(capacity=capacity), seed=10) as cluster:
            a, b, c = cluster.members
            layers = [layer["protocol"] for layer in a.stack.stats()["layers"]]
            assert "MCAST" in layers and "MFC" not in layers
            c.protocol("DISCARD").drop_if(_is_ack, count=None)
            sent = 0

            async def sender() -> None:
                nonlocal sent
                for i in range(total):
                    await a.send(f"a{i}".encode())
                    sent += 1

            mcast = a.protocol("MCAST")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sender)
                await trio.sleep(5)
                held = mcast.stats()
                assert mcast.blocks_down() and held["send_window"]["size"] == capacity - 1
                stuck_at = sent  # all MCAST holds: the window, and a few that wait in order
                assert stuck_at == capacity - 1 + held["parked_messages"] < 2 * capacity
                await trio.sleep(20)  # C stays silent: the sender waits, nothing piles up
                assert sent == stuck_at
                later = mcast.stats()
                assert later["send_window"] == held["send_window"]
                assert later["parked_messages"] == held["parked_messages"]
                assert len(_payloads(c)) == len(_payloads(b)) == capacity - 1  # C only lags in acks
                c.protocol("DISCARD").reset()  # C's acks arrive late
            assert sent == total
            await cluster.wait_until_delivered(timeout=60)
            assert _payloads(c) == [f"a{i}".encode() for i in range(total)]
            cluster.check_contract()


# --- issue 12: joins, leaves and merges with GMS (the udp-mcast preset) ---------------------


def _udp_mcast(**mcast: Any) -> StackConfig:
    """The udp-mcast preset (UDP becomes a simulated lossy endpoint), with quick merges."""
    config = StackConfig.preset("udp-mcast")
    config = config.configure("MERGE3", min_interval=0.2, max_interval=0.5, check_interval=1.0)
    config = config.configure("GMS", merge_timeout=2.0, join_timeout=0.5)
    return config.configure("MCAST", **mcast) if mcast else config


def _check_gaps(cluster: SimCluster) -> None:
    """Exactly once and in each sender's order, allowing what was sent in views without us."""
    addresses = [m.address for m in cluster.members]
    cluster.log.check(addresses, addresses, gaps=True)


async def _join_one_at_a_time(cluster: SimCluster, members: list[SimMember]) -> None:
    for member in members:
        await cluster.join(member)
        await cluster.wait_for_view(members[: members.index(member) + 1])


def _assert_nothing_asked_for_in_vain(cluster: SimCluster) -> None:
    """No window waits for a seqno its sender no longer holds."""
    for member in cluster.members:
        stats = member.protocol("MCAST").stats()
        assert stats["xmit_not_found"] == 0, member
        for sender, win in stats["receive_windows"].items():
            assert win["size"] == 0, (member, sender, win)


async def test_mcast_udp_mcast_joiners_one_at_a_time_all_deliver_the_coordinators_multicasts(
    autojump_clock: Any,
) -> None:
    """Issue 12: the first joiner's window for the coordinator started below what the
    coordinator still held (its VIEW, multicast while alone, was purged at once)."""
    with trio.fail_after(_GUARD):
        async with open_cluster(3, "udp-mcast", seed=1, view=False) as cluster:
            a, b, c = cluster.members
            await _join_one_at_a_time(cluster, [a, b, c])
            await a.send_many([b"a1", b"a2"])
            await b.send(b"b1")
            await c.send(b"c1")
            await cluster.wait_until_delivered(timeout=30)  # and the contract holds
            _assert_nothing_asked_for_in_vain(cluster)


async def test_mcast_udp_mcast_four_members_joining_one_at_a_time_settle_on_one_view(
    autojump_clock: Any,
) -> None:
    """Issue 12: a member that misses the coordinator's VIEW multicasts lags views behind."""
    with trio.fail_after(_GUARD):
        async with open_cluster(4, "udp-mcast", seed=1, view=False) as cluster:
            await _join_one_at_a_time(cluster, cluster.members)
            await trio.sleep(5)  # every view ack and retransmission settled
            assert len({m.protocol("GMS").view for m in cluster.members}) == 1
            for member in cluster.members:
                await member.send(f"{member.name}1".encode())
            await cluster.wait_until_delivered(timeout=30)
            _assert_nothing_asked_for_in_vain(cluster)


async def test_mcast_udp_mcast_member_that_leaves_and_rejoins_catches_up(
    autojump_clock: Any,
) -> None:
    """B leaves (A is alone again and goes on multicasting), B rejoins as a new member:
    it delivers what A and C multicast after its join, and nothing from before."""
    with trio.fail_after(_GUARD):
        async with open_cluster(2, "udp-mcast", seed=3, view=False) as cluster:
            a, b = cluster.members
            await _join_one_at_a_time(cluster, [a, b])
            await a.send(b"before-leave")
            await b.disconnect()
            await cluster.wait_for_view([a])
            await a.send(b"while-alone")
            b2 = await cluster.add_member("B2")
            await cluster.join(b2)
            await cluster.wait_for_view([a, b2])
            await a.send_many([b"after-1", b"after-2"])
            await b2.send(b"from-b2")
            await wait_until(
                lambda: len(_payloads(b2)) >= 3 and len(_payloads(a)) >= 5, timeout=30, interval=0.1
            )
            assert [m.payload for m in b2.delivered if m.src == a.address] == [
                b"after-1",
                b"after-2",
            ]
            _check_gaps(cluster)
            for member in (a, b2):
                assert member.protocol("MCAST").stats()["xmit_not_found"] == 0


async def test_mcast_udp_mcast_joiner_catches_up_with_a_member_multicasting_during_the_join(
    autojump_clock: Any,
) -> None:
    """B streams multicasts while D joins: the digest's entry for B (what A had delivered)
    lies below what B still holds once B installs the view with D, as A and C acked more
    meanwhile (every message: ``ack_threshold`` 1); D's window must not wait for those
    seqnos for ever: B answers PURGED and D's window moves on. (D keeps what it receives
    before its digest: with room for only one, it misses what B purged meanwhile.)"""
    stack = _udp_mcast(ack_threshold=1, become_server_queue_size=1)
    with trio.fail_after(_GUARD):
        async with open_cluster(4, stack, seed=15, view=False, max_delay=0.02) as cluster:
            a, b, c, d = cluster.members
            await _join_one_at_a_time(cluster, [a, b, c])
            streaming = True

            async def stream() -> None:
                i = 0
                while streaming:
                    await b.send(f"b{i}".encode())
                    i += 1
                    await trio.sleep(0.005)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(stream)
                await trio.sleep(0.5)
                await cluster.join(d)
                await cluster.wait_for_view()
                await trio.sleep(0.5)
                streaming = False
            await b.send(b"b-last")
            await wait_until(lambda: b"b-last" in _payloads(d), timeout=30, interval=0.1)
            assert b.protocol("MCAST").stats()["purged_sent"] >= 1  # the race this seed plays
            _check_gaps(cluster)
            _assert_nothing_asked_for_in_vain(cluster)


async def test_mcast_udp_mcast_after_a_merge_every_member_delivers_from_every_member(
    autojump_clock: Any,
) -> None:
    """Issue 12 (merge digest): {A,B} and {C,D} multicast apart, heal and merge; the
    windows for the other subgroup start at the merge digest, not at 0, so what each
    member multicasts after the merge reaches everyone."""
    with trio.fail_after(_GUARD):
        async with open_cluster(4, _udp_mcast(xmit_interval=0.2), seed=4, view=False) as cluster:
            a, b, c, d = cluster.members
            cluster.network.partition([a.address, b.address], [c.address, d.address])
            await _join_one_at_a_time(cluster, [a, b])
            await _join_one_at_a_time(cluster, [c, d])
            for member in cluster.members:
                await member.send_many([f"{member.name}-apart{i}".encode() for i in range(5)])
            await trio.sleep(2)
            cluster.network.heal()
            await cluster.wait_for_view(timeout=60)
            for member in cluster.members:
                await member.send(f"{member.name}-merged".encode())
            merged = {f"{m.name}-merged".encode() for m in cluster.members}
            await wait_until(
                lambda: all(merged <= set(_payloads(m)) for m in cluster.members),
                timeout=30,
                interval=0.1,
            )
            _check_gaps(cluster)
            _assert_nothing_asked_for_in_vain(cluster)


# --- a joiner's early multicasts, control traffic past a full window, leaving blocked -----


async def test_mcast_joiner_keeps_the_coordinators_first_multicast_that_came_before_the_digest(
    autojump_clock: Any,
) -> None:
    """udp-mcast: A's VIEW for B's join (its first multicast after B's digest) reaches B
    before the JOIN_RSP with that digest. B dropped it (``dropped_no_window``) and every
    later multicast of A waited behind the gap; A multicast 20 more, left a moment later
    and its process exited, before B ever asked: B delivered none of them. B now keeps
    what comes before its digest and receives it after."""
    with trio.fail_after(_GUARD):
        async with open_cluster(2, "udp-mcast", seed=153, view=False) as cluster:
            a, b = cluster.members
            await cluster.join(a)
            await trio.sleep(1.5)
            await cluster.join(b)
            await cluster.wait_for_view()
            await trio.sleep(1.0)
            sent = [b"A-%d" % i for i in range(20)]
            for payload in sent:
                await a.send(payload)
            await trio.sleep(0.1)
            await a.disconnect()
            with trio.move_on_after(1.0):
                while not a.left:
                    await trio.sleep(0.01)
            a.kill()  # the process exits once it has left, as a channel owner's would
            await trio.sleep(15)
            assert [m.payload for m in b.delivered if m.src == a.address] == sent
            stats = b.protocol("MCAST").stats()
            assert stats["dropped_no_window"] == 0 and stats["become_server_queue_replayed"] >= 1


def _never_acks(member: SimMember) -> None:
    member.protocol("DISCARD").drop_if(_is_ack, direction="down", count=None)


async def test_mcast_coordinator_with_a_full_window_leaves_gracefully_its_view_passes_the_window(
    autojump_clock: Any,
) -> None:
    """C never acks, so A's window fills and its sender blocks; A leaves. Its leave VIEW
    waited behind the parked multicasts, and B and C moved on only by suspecting A (B
    took over: [B|4]). Control traffic never waits behind the application's multicasts:
    the VIEW goes past the full window and B installs A's view of B and C."""
    stack = StackConfig.of(
        "SIM",
        "PING",
        ("FD_ALL3", {"timeout": 2.0, "interval": 0.5}),
        ("VERIFY_SUSPECT", {"timeout": 0.5}),
        "DISCARD",
        ("MCAST", {"capacity": 8, "xmit_interval": 0.5}),
        "UNICAST3",
        ("GMS", {"join_timeout": 1.0, "leave_timeout": 1.0, "view_ack_collection_timeout": 1.0}),
    )
    with trio.fail_after(_GUARD):
        async with open_cluster(3, stack, seed=448) as cluster, trio.open_nursery() as nursery:
            a, b, c = cluster.members
            _never_acks(c)

            async def sender() -> None:
                for i in range(30):
                    await a.send(b"%d" % i)

            nursery.start_soon(sender)
            await trio.sleep(3)
            assert a.protocol("MCAST").stats()["blocked"]
            await a.disconnect()
            await wait_until(
                lambda: b.view is not None and a.address not in b.view, timeout=5, interval=0.01
            )
            assert b.view.view_id.coord == a.address and list(b.view.members) == [
                b.address,
                c.address,
            ]
            assert b.protocol("GMS").stats().get("coordinator_takeovers", 0) == 0
            assert a.protocol("MCAST").stats()["controls_past_capacity"] >= 1
            nursery.cancel_scope.cancel()


async def test_mcast_send_blocked_on_a_full_window_returns_once_its_member_left(
    autojump_clock: Any,
) -> None:
    """C never acks, B's window fills and its sends block; B leaves. Its blocked sends
    never returned and MCAST stayed blocked with its parked multicasts. Now the leave's
    flush sends what was parked at once, past ``capacity`` (campaign udp-mcast 5135), and
    every sender is released."""
    stack = StackConfig.of("SIM", "PING", "DISCARD", ("MCAST", {"capacity": 8}), "UNICAST3", "GMS")
    with trio.fail_after(_GUARD):
        async with open_cluster(3, stack, seed=348) as cluster, trio.open_nursery() as nursery:
            _, b, c = cluster.members
            _never_acks(c)
            returned = 0

            async def sender() -> None:
                nonlocal returned
                for i in range(30):
                    await b.send(b"%d" % i, wait_accepted=True)
                    returned += 1

            nursery.start_soon(sender)
            await trio.sleep(3)
            assert returned < 30 and b.protocol("MCAST").stats()["blocked"]
            await b.disconnect()
            await wait_until(
                lambda: returned >= 30 and not b.stack.sends_pending(), timeout=2, interval=0.01
            )
            assert b.left
            stats = b.protocol("MCAST").stats()
            assert not stats["blocked"] and stats["parked_messages"] == 0
            assert stats["sent_past_capacity_at_flush"] > 0
            nursery.cancel_scope.cancel()


async def test_mcast_digest_past_a_gap_delivers_what_the_window_held(
    autojump_clock: Any,
) -> None:
    """B never gets C's first multicast, not even retransmitted, and holds the four after
    it behind the gap until a digest (GMS's answer to a rejoin) moves its window past them
    (a merge digest no longer moves a window of a member of our own view): they are delivered
    in order, only the gap is lost (``skipped_by_window_move``), and C's next multicast
    follows. The move dropped all five, silently."""
    with trio.fail_after(_GUARD):
        async with open_cluster(3, _stack(xmit_interval=0.2), seed=11) as cluster:
            a, b, c = cluster.members
            b.protocol("DISCARD").drop_if(_is(b"c1"), direction="up", count=None)
            await c.send_many([b"c1", b"c2", b"c3", b"c4", b"c5"])
            await trio.sleep(1)
            assert _payloads(b) == [] and _payloads(a) == [b"c1", b"c2", b"c3", b"c4", b"c5"]
            await b.stack.send(SetDigest(Digest({c.address: (5, 5)})))
            await c.send(b"c6")
            await trio.sleep(1)
            assert _payloads(b) == [b"c2", b"c3", b"c4", b"c5", b"c6"]
            assert b.protocol("MCAST").stats()["skipped_by_window_move"] == 1


# --- issue 37: a member that left is not merged back ------------------------------------------


async def test_mcast_udp_mcast_left_member_is_not_merged_back_through_a_paused_members_view(
    autojump_clock: Any,
) -> None:
    """Campaign udp-mcast 10609: C is paused and excluded; A, the coordinator, leaves
    gracefully; C resumes still holding the view with A and speaks for it in the merge.
    The merge view must not bring A back (a later view of the leader's subgroup removed
    it): otherwise C's send window, full of multicasts sent before the pause, waits for
    acks from A, who is gone, until A is suspected and excluded again, and a multicast C
    sends meanwhile is not even delivered at C."""
    with trio.fail_after(_GUARD):
        async with open_cluster(4, _udp_mcast(capacity=8), seed=5, view=False) as cluster:
            a, b, c, d = cluster.members
            await _join_one_at_a_time(cluster, [a, b, c, d])
            stale = c.protocol("GMS").view
            c.pause()
            await cluster.wait_for_view([a, b, d])
            assert await a.disconnect()
            after_leave = await cluster.wait_for_view([b, d])
            c.resume()
            sent = [f"c{i}".encode() for i in range(12)]
            await c.send_many(sent)  # past the window: the rest waits for acks
            merged = await cluster.wait_for_view([b, c, d])
            assert c.protocol("GMS").view is not stale
            for member in (b, c, d):
                views = [e.view for e in member.events if isinstance(e, ViewChange)]
                later = [v for v in views if v.view_id.id > after_leave.view_id.id]
                assert later and all(a.address not in v for v in later), (member, later)
            assert merged.view_id.id > after_leave.view_id.id
            await c.send(b"c-after-merge")
            # C's window drained: B and D acked, A is not awaited
            await wait_until(
                lambda: (
                    _payloads_from(c, c)[-1:] == [b"c-after-merge"]
                    and not any(b"c-after-merge" not in _payloads_from(m, c) for m in (b, d))
                ),
                timeout=30,
                interval=0.1,
            )
            assert _payloads_from(c, c) == [*sent, b"c-after-merge"]
            stayed = [m.address for m in (b, c, d)]
            cluster.log.check(stayed, stayed, gaps=True)


def _payloads_from(member: SimMember, sender: SimMember) -> list[bytes]:
    return [m.payload for m in member.delivered if m.src == sender.address]
