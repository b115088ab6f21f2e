"""VERIFY_SUSPECT: suspicions are double-checked; a sign of life cancels them."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Address, Flag, Message, PropertyError, StackConfig, View, ViewId
from triogroups.events import Disconnect, Suspect, Unsuspect, ViewChange
from triogroups.protocols import ids
from triogroups.protocols.verify_suspect import (
    ARE_YOU_DEAD,
    I_AM_NOT_DEAD,
    VerifyHeader,
    VerifySuspect,
)
from triogroups.testing import SimCluster, SimMember, down_messages, open_cluster, split

A, B, C, D = (Address(i, n) for i, n in enumerate("ABCD", start=1))
VS = ids.VERIFY_SUSPECT


def _vs(me: Address = A, **props: Any) -> VerifySuspect:
    vs = VerifySuspect(**{"timeout": 2.0, **props})
    vs.start(me, "test", 0.0)
    vs.down_event(ViewChange(View(ViewId(1, A), [A, B, C, D])), 0.0)
    vs.take_down()
    return vs


def _answer(src: Address, kind: int = I_AM_NOT_DEAD) -> Message:
    return Message(A, src=src, flags=Flag.OOB, headers={VS: VerifyHeader(kind)})


# --- properties ---------------------------------------------------------------------------


def test_verify_suspect_defaults_are_timeout_1s_one_message() -> None:
    """Issue 12 item 10: a live member on a host, a LAN or a Spark cluster answers within
    milliseconds, so 1 s (not 2 s) keeps a killed member's exclusion short."""
    vs = VerifySuspect()
    assert (vs.timeout, vs.num_msgs) == (1.0, 1)
    with pytest.raises(PropertyError, match=r"VERIFY_SUSPECT\.num_msgs must be >= 1, got 0"):
        VerifySuspect(num_msgs=0)
    with pytest.raises(PropertyError, match=r"VERIFY_SUSPECT\.timeout must be > 0, got -1"):
        VerifySuspect(timeout=-1)


# --- the rules, on the sans-IO object ----------------------------------------------------------


def test_verify_suspect_sends_num_msgs_are_you_dead_unicasts_and_holds_the_suspicion() -> None:
    vs = _vs(num_msgs=3)
    vs.up_event(Suspect((C,)), 1.0)
    sent = down_messages(vs)
    assert [m.dest for m in sent] == [C, C, C]
    for msg in sent:
        assert msg.headers[VS] == VerifyHeader(ARE_YOU_DEAD)
        wanted = Flag.OOB | Flag.INTERNAL | Flag.NO_RELIABILITY | Flag.DONT_BUNDLE
        assert msg.flags & wanted == wanted  # copies in separate datagrams, never retransmitted
    assert vs.take_up() == [] and vs.next_deadline() == 3.0


def test_verify_suspect_unanswered_suspect_goes_up_after_timeout_not_before() -> None:
    vs = _vs()
    vs.up_event(Suspect((C,)), 1.0)
    vs.tick(2.999)
    assert vs.take_up() == []
    vs.tick(3.0)
    assert vs.take_up() == [Suspect((C,))]
    assert vs.next_deadline() == float("inf") and vs.stats()["confirmed"] == 1


def test_verify_suspect_i_am_not_dead_cancels_and_unsuspects_up_and_down() -> None:
    vs = _vs()
    vs.up_event(Suspect((C,)), 1.0)
    vs.take_down()
    vs.up([_answer(C)], 1.5)
    assert vs.take_up() == [Unsuspect(C)]  # the answer itself is consumed
    assert vs.take_down() == [Unsuspect(C)]  # the failure detector refills C's slots
    vs.tick(3.0)
    assert vs.take_up() == [] and vs.next_deadline() == float("inf")


def test_verify_suspect_any_message_from_the_suspect_cancels_and_is_passed_up() -> None:
    vs = _vs()
    vs.up_event(Suspect((C,)), 1.0)
    data = Message(A, b"still here", src=C)
    vs.up([data], 2.0)
    assert vs.take_up() == [Unsuspect(C), [data]]
    vs.tick(3.0)
    assert vs.take_up() == [] and vs.stats()["cleared"] == 1


def test_verify_suspect_unsuspect_from_below_cancels_the_verification() -> None:
    vs = _vs()
    vs.up_event(Suspect((C,)), 1.0)
    vs.up_event(Unsuspect(C), 1.5)
    assert vs.take_up() == [Unsuspect(C)]
    vs.tick(3.0)
    assert vs.take_up() == []


def test_verify_suspect_answers_are_you_dead_with_i_am_not_dead_to_the_asker() -> None:
    vs = _vs(me=B)
    vs.up([_answer(A, ARE_YOU_DEAD)], 0.5)
    (reply,) = down_messages(vs)
    assert reply.dest == A and reply.headers[VS] == VerifyHeader(I_AM_NOT_DEAD)
    assert vs.take_up() == []


def test_verify_suspect_member_that_left_neither_answers_nor_verifies() -> None:
    """To the group a member that left is gone: answering ARE_YOU_DEAD would keep it in
    the view of members its leave never reached."""
    vs = _vs(me=B)
    vs.up_event(Suspect((C,)), 0.0)
    vs.take_down()
    vs.down_event(Disconnect(), 0.5)
    assert vs.take_down() == [Disconnect()] and vs.next_deadline() == float("inf")
    vs.up([_answer(A, ARE_YOU_DEAD)], 0.6)
    vs.up_event(Suspect((D,)), 0.7)
    assert vs.take_down() == [] and vs.take_up() == []


def test_verify_suspect_never_suspects_itself() -> None:
    vs = _vs()
    vs.up_event(Suspect((A,)), 1.0)
    assert vs.take_down() == [] and vs.next_deadline() == float("inf")
    vs.up_event(Suspect((A, C)), 1.0)
    assert [m.dest for m in down_messages(vs)] == [C]
    vs.tick(3.0)
    assert vs.take_up() == [Suspect((C,))]


def test_verify_suspect_repeated_suspicion_keeps_the_first_deadline() -> None:
    vs = _vs()
    vs.up_event(Suspect((C,)), 1.0)
    vs.take_down()
    vs.up_event(Suspect((C,)), 2.0)  # the detector repeats itself every interval
    assert vs.take_down() == [] and vs.next_deadline() == 3.0
    vs.tick(3.0)
    assert vs.take_up() == [Suspect((C,))]


def test_verify_suspect_passes_up_only_the_suspects_that_did_not_answer() -> None:
    vs = _vs()
    vs.up_event(Suspect((B, C, D)), 1.0)
    vs.up([_answer(C)], 1.2)
    vs.take_up()
    vs.tick(3.0)
    assert vs.take_up() == [Suspect((B, D))]


def test_verify_suspect_forgets_suspects_that_left_the_view() -> None:
    vs = _vs()
    vs.up_event(Suspect((C,)), 1.0)
    vs.down_event(ViewChange(View(ViewId(2, A), [A, B, D])), 1.5)
    assert vs.next_deadline() == float("inf")
    vs.tick(3.0)
    assert Suspect((C,)) not in vs.take_up() and vs.stats()["verifying"] == []


def test_verify_suspect_drops_unknown_header_types() -> None:
    vs = _vs()
    vs.up([_answer(C, 99)], 0.5)
    assert vs.take_up() == [] and vs.take_down() == [] and vs.stats()["malformed"] == 1


@settings(max_examples=examples(60), deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["suspect", "answer", "unsuspect"]),
            st.sampled_from([B, C, D]),
            st.integers(min_value=0, max_value=50),
        ),
        max_size=25,
    )
)
def test_verify_suspect_confirms_exactly_the_suspects_silent_for_timeout(
    steps: list[tuple[str, Address, int]],
) -> None:
    """Model: a suspect goes up at its first suspicion + timeout unless cleared before."""
    vs = _vs(timeout=1.0)
    deadlines: dict[Address, float] = {}
    confirmed: list[tuple[float, Address]] = []
    seen: list[tuple[float, Address]] = []
    for kind, member, tenths in sorted(steps, key=lambda s: s[2]):
        now = tenths / 10
        for m, at in sorted(deadlines.items(), key=lambda i: i[1]):
            if at <= now:
                confirmed.append((at, m))
                del deadlines[m]
        while vs.next_deadline() <= now:
            at = vs.next_deadline()
            vs.tick(at)
            seen += [
                (at, m) for e in split(vs.take_up())[1] if isinstance(e, Suspect) for m in e.members
            ]
        if kind == "suspect":
            vs.up_event(Suspect((member,)), now)
            deadlines.setdefault(member, now + 1.0)
        elif kind == "answer":
            vs.up([_answer(member)], now)
            deadlines.pop(member, None)
        else:
            vs.up_event(Unsuspect(member), now)
            deadlines.pop(member, None)
        vs.take_up()
    while vs.next_deadline() < float("inf"):
        at = vs.next_deadline()
        vs.tick(at)
        seen += [
            (at, m) for e in split(vs.take_up())[1] if isinstance(e, Suspect) for m in e.members
        ]
    confirmed += [(at, m) for m, at in deadlines.items()]
    assert sorted(seen, key=str) == sorted(confirmed, key=str)


# --- whole stacks on the simulated network ---------------------------------------------------

INTERVAL, TIMEOUT = 0.5, 2.0


def _stack(verify: float) -> StackConfig:
    return StackConfig.of(
        "SIM",
        "PING",
        "DISCARD",
        ("FD_ALL3", {"interval": INTERVAL, "timeout": TIMEOUT}),
        ("VERIFY_SUSPECT", {"timeout": verify}),
        "GMS",
    )


async def _isolate(cluster: SimCluster, loner: SimMember, seconds: float) -> None:
    rest = [m.address for m in cluster.members if m is not loner]
    cluster.network.partition(rest, [loner.address])
    await trio.sleep(seconds)
    cluster.network.heal()


def _stat(cluster: SimCluster, protocol: str, key: str) -> int:
    return sum(m.protocol(protocol).stats()[key] for m in cluster.members)


async def test_verify_suspect_brief_partition_shorter_than_timeout_excludes_nobody(
    autojump_clock: Any,
) -> None:
    async with open_cluster(4, _stack(1.0), seed=5) as cluster:
        before = await cluster.wait_for_view()
        await trio.sleep(2 * TIMEOUT)
        await _isolate(cluster, cluster.members[3], TIMEOUT - 2 * INTERVAL)
        await trio.sleep(5 * TIMEOUT)
        assert all(m.view == before for m in cluster.members)
        assert _stat(cluster, "FD_ALL3", "suspect_events") == 0


async def test_verify_suspect_partition_healed_during_verification_excludes_nobody(
    autojump_clock: Any,
) -> None:
    """Longer than timeout: the detector suspects, but life returns before verification ends."""
    async with open_cluster(4, _stack(2.0), seed=6) as cluster:
        before = await cluster.wait_for_view()
        await trio.sleep(2 * TIMEOUT)
        await _isolate(cluster, cluster.members[3], TIMEOUT + 0.6)
        await trio.sleep(5 * TIMEOUT)
        assert all(m.view == before for m in cluster.members)
        assert _stat(cluster, "FD_ALL3", "suspect_events") > 0
        assert _stat(cluster, "VERIFY_SUSPECT", "verifications") > 0
        assert _stat(cluster, "VERIFY_SUSPECT", "confirmed") == 0
        assert _stat(cluster, "VERIFY_SUSPECT", "cleared") > 0


async def test_verify_suspect_partition_longer_than_timeout_plus_verify_splits_the_view(
    autojump_clock: Any,
) -> None:
    async with open_cluster(4, _stack(1.0), seed=7) as cluster:
        a, b, c, d = cluster.members
        await cluster.wait_for_view()
        await trio.sleep(2 * TIMEOUT)
        cluster.network.partition([a.address, b.address, c.address], [d.address])
        majority = await cluster.wait_for_view([a, b, c], timeout=TIMEOUT + INTERVAL + 1.5)
        alone = await cluster.wait_for_view([d], timeout=1.0)
        assert majority.coord == a.address and alone.members == (d.address,)
        assert _stat(cluster, "VERIFY_SUSPECT", "confirmed") >= 4
