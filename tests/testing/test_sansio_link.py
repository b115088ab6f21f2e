"""The sans-IO harness's link: routing as the transports do, the codec, seeded faults, time."""

from __future__ import annotations

import math

import pytest

from triogroups import Flag, Message
from triogroups.protocol import Protocol
from triogroups.protocols.nakack2 import Nakack2
from triogroups.protocols.passthrough import PassThrough
from triogroups.protocols.stable import Stable
from triogroups.protocols.unicast3 import Unicast3
from triogroups.testing import Livelock, SansIONetwork, addresses, view_of

A, B, C = addresses("ABC")


def _three(**link: float | int) -> SansIONetwork:
    net = SansIONetwork(**link)  # type: ignore[arg-type]
    for address in (A, B, C):
        net.add(address, PassThrough())
    return net


def _burst(net: SansIONetwork, count: int = 200) -> list[bytes]:
    """A sends ``count`` unicasts to B; returns what B delivered."""
    payloads = [str(i).encode() for i in range(count)]
    net[A].send(B, *payloads)
    net.deliver_all()
    return net[B].payloads


def test_sansio_link_is_lossless_and_fifo_by_default() -> None:
    net = _three()
    assert _burst(net) == [str(i).encode() for i in range(200)] and net.dropped == []


def test_sansio_link_routes_multicasts_to_everyone_and_loops_them_back() -> None:
    """As the transports: a multicast reaches every member, the sender too unless
    DONT_LOOPBACK; a unicast to oneself never crosses the link."""
    net = _three()
    a = net[A]
    out = a.send(None, b"all")
    out += a.send(None, b"not-me", flags=Flag.DONT_LOOPBACK)
    out += a.send(A, b"self")
    assert [m.payload for m in out] == [b"all", b"not-me"]
    net.deliver_all()
    assert a.payloads == [b"all", b"self"]
    assert net[B].payloads == net[C].payloads == [b"all", b"not-me"]


def test_sansio_link_drops_unicasts_to_addresses_without_a_member() -> None:
    net = _three()
    (ghost,) = addresses("ABCD")[3:]
    net[A].send(ghost, b"x")
    assert net.deliver_all() == 1
    assert [m.payloads for m in net.members.values()] == [[], [], []]


def test_sansio_link_every_receiver_gets_its_own_decoded_copy() -> None:
    net = _three()
    (sent,) = net[A].send(None, b"x", flags=Flag.DONT_LOOPBACK)
    net.deliver_all()
    got_b, got_c = net[B].delivered[0], net[C].delivered[0]
    assert got_b is not got_c and sent not in (got_b, got_c)
    assert (got_b.src, got_b.dest, got_b.payload) == (A, None, b"x")


def test_sansio_link_loss_is_seeded_and_repeatable() -> None:
    first = _burst(_three(seed=3, loss=0.3))
    again = _burst(_three(seed=3, loss=0.3))
    other = _burst(_three(seed=4, loss=0.3))
    assert first == again and first != other
    assert 100 < len(first) < 180  # about 70 % of 200


def test_sansio_link_duplicates_and_reorders_when_told() -> None:
    duplicated = _burst(_three(seed=1, duplicate=0.2))
    assert len(duplicated) > 220 and sorted(set(duplicated)) == sorted(set(_burst(_three())))
    reordered = _burst(_three(seed=1, reorder=0.3))
    assert reordered != sorted(reordered, key=int) and sorted(reordered, key=int) == _burst(
        _three()
    )


def test_sansio_link_fault_probabilities_are_checked() -> None:
    with pytest.raises(ValueError, match="loss must be in"):
        SansIONetwork(loss=1.0)
    with pytest.raises(ValueError, match="reorder must be in"):
        SansIONetwork(reorder=-0.1)


def test_sansio_link_drop_refuses_chosen_datagrams_and_keeps_them() -> None:
    net = _three()
    net[A].send(None, b"1", b"2")
    net.deliver_all(drop=lambda src, dest, msg: dest == C and msg.payload == b"2")
    assert net[B].payloads == [b"1", b"2"] and net[C].payloads == [b"1"]
    assert [(s, d, m.payload) for s, d, m in net.dropped] == [(A, C, b"2")]


def test_sansio_link_max_bundle_size_drops_what_does_not_encode_and_records_it() -> None:
    net = SansIONetwork(max_bundle_size=200)
    a, b = net.add(A, PassThrough()), net.add(B, PassThrough())
    assert a.send(b, b"small", b"x" * 500) != []
    net.deliver_all()
    assert b.payloads == [b"small"] and [m.payload for m in net.oversized] == [b"x" * 500]
    unlimited = SansIONetwork()
    big = unlimited.add(A, PassThrough())
    with pytest.raises(ValueError, match="exceeds max_size"):
        big.send(B, b"x" * 70_000)


def test_sansio_link_records_what_is_sent_only_when_asked() -> None:
    net = _three()
    net[A].send(B, b"quiet")
    net.record = True
    net[A].send(B, b"loud")
    assert [(src, m.payload) for src, m in net.wire] == [(A, b"loud")]


def test_sansio_step_moves_the_clock_to_the_next_deadline_and_run_to_the_end() -> None:
    """UNICAST3's retransmit task runs every xmit_interval: step lands on each, run past."""
    net = SansIONetwork()
    a, b = net.add(A, Unicast3(xmit_interval=0.5)), net.add(B, Unicast3(xmit_interval=0.5))
    a.send(b, b"1", now=0.2)
    assert net.next_deadline() == pytest.approx(0.7)
    assert net.step() == pytest.approx(0.7) and net.now == pytest.approx(0.7)
    assert b.payloads == [b"1"]
    net.run(10.0)
    assert net.now == pytest.approx(10.7) and net.next_deadline() > net.now
    assert a.stats()["unacked"] == 0


def test_sansio_step_with_nothing_armed_keeps_the_clock() -> None:
    net = _three()
    net.now = 4.0
    assert net.step() == math.inf and net.now == 4.0


class _Chatter(Protocol):
    """Answers every message with another: a livelock."""

    def up(self, batch: list[Message], now: float) -> None:
        self.send_down([Message(m.src, m.payload) for m in batch])


def test_sansio_link_calls_a_network_that_never_goes_quiet_a_livelock() -> None:
    net = SansIONetwork(max_packets=1000)
    a = net.add(A, _Chatter())
    net.add(B, _Chatter())
    a.send(B, b"ping")
    with pytest.raises(Livelock, match="more than 1000 datagrams"):
        net.deliver_all()


def test_sansio_network_stacks_deliver_in_order_through_loss_duplication_and_reordering() -> None:
    """A small stack per member (NAKACK2, UNICAST3, STABLE, bottom first) on a faulty link:
    the faults happen, and the protocols' timers, stepped by `run`, repair them."""
    net = SansIONetwork(seed=5, loss=0.1, duplicate=0.05, reorder=0.1)
    a, b, c = (net.add(x, [Nakack2(), Unicast3(), Stable()]) for x in (A, B, C))
    net.install(view_of(A, B, C))
    for i in range(20):
        a.send(None, f"m{i}".encode(), now=i * 0.05)
        b.send(a, f"u{i}".encode())
    net.run(10.0)
    mcasts = [f"m{i}".encode() for i in range(20)]
    for member in (a, b, c):
        assert [m.payload for m in member.delivered if m.src == A] == mcasts
    assert [m.payload for m in a.delivered if m.src == B] == [f"u{i}".encode() for i in range(20)]
    assert net.dropped != [] and sum(m.layers[0].stats()["duplicates"] for m in (b, c)) > 0
