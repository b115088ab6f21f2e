"""The inspector's model (`step`) on real answers from simulated clusters (issue 16)."""

from __future__ import annotations

import pytest
import trio
from inspect_kit import answers

from triogroups.config import StackConfig
from triogroups.inspector._model import Display, step
from triogroups.testing import open_cluster


async def test_inspect_model_finds_members_and_their_common_view(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Three members answering with the same view: one cluster, three rows in name order, one
    view held by all, no split, and each member's layers bottom first."""
    async with open_cluster(3, "udp", cluster="model") as cluster:
        display = step(None, answers(cluster.members), trio.current_time())
        ids = [f"{m.address.uuid:032x}" for m in cluster.members]
    assert [c.name for c in display.clusters] == ["model"]
    (model,) = display.clusters
    assert [display.members[a].name for a in model.members] == ["A", "B", "C"]
    assert not model.split and model.disagreeing == frozenset()
    (group,) = model.views
    assert group.view.members == ("A", "B", "C") and group.view.coord == "A"
    assert set(group.holders) == set(ids)
    first = display.members[ids[0]]
    assert [p.name for p in first.protocols][:2] == ["SIM", "PING"]
    assert first.protocols[-1].name == "FRAG" and not first.silent


async def test_inspect_model_rates_are_counter_changes_over_answer_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A sends 40 multicasts in 4 s between two rounds: NAKACK2's msgs_sent rate at A is the
    change over the answers' time difference, and the throughput sparkline gets a value."""
    async with open_cluster(3, "udp") as cluster:
        first = step(None, answers(cluster.members), trio.current_time())
        a = cluster[0]
        sent = a.protocol("NAKACK2").stats()["msgs_sent"]
        start = trio.current_time()
        for i in range(40):
            await a.send(b"m%d" % i)
            await trio.sleep(0.1)
        await cluster.wait_until_delivered()
        elapsed = trio.current_time() - start
        second = step(first, answers(cluster.members), trio.current_time())
        now_sent = a.protocol("NAKACK2").stats()["msgs_sent"]
    member = second.members[f"{a.address.uuid:032x}"]
    nakack = member.protocol("NAKACK2")
    assert nakack is not None
    (counter,) = [c for c in nakack.counters if c.name == "msgs_sent"]
    assert counter.value == now_sent
    assert counter.rate == pytest.approx((now_sent - sent) / elapsed)
    assert first.members[member.address].throughput == ()
    assert len(member.throughput) == 1 and member.throughput[0] > 0


async def test_inspect_model_partition_shows_split_and_disagreeing_member(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A partition of {A, B} from {C}: FD_ALL3 or GMS suspicion shows as a warning on some
    round before the views part; the cluster is split as soon as A and B installed their view
    (C still holds the old one), and once C installed its own, A and B's view is the main one
    and C, alone in its view, disagrees."""
    async with open_cluster(3, "udp", seed=3) as cluster:
        a, b, c = cluster.members
        display = step(None, answers(cluster.members), trio.current_time())
        cluster.partition([a, b], [c])
        suspicions: set[str] = set()
        with trio.fail_after(60):
            splits = []
            while {g.view.members for g in display.clusters[0].views} != {("A", "B"), ("C",)}:
                await trio.sleep(0.5)
                display = step(display, answers(cluster.members), trio.current_time())
                suspicions |= {w for m in display.ordered() for w in m.warnings if "suspect" in w}
                splits.append(display.clusters[0].split)
        ids = [f"{m.address.uuid:032x}" for m in (a, b, c)]
    assert any(w.startswith(("FD_ALL3: suspected_members", "GMS: suspected")) for w in suspicions)
    assert splits[-1] and not splits[0]
    (model,) = display.clusters
    main, other = model.views
    assert set(main.holders) == set(ids[:2]) and main.view.members == ("A", "B")
    assert other.holders == (ids[2],) and other.view.members == ("C",)
    assert model.disagreeing == frozenset({ids[2]})


async def test_inspect_model_silent_member_then_removed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C dies and stops answering: after silent_after it is shown silent with its last answer
    (and no longer counts for the views), after forget_after it is gone."""
    async with open_cluster(3, "udp") as cluster:
        display = step(None, answers(cluster.members), trio.current_time())
        c = cluster[2]
        gone = f"{c.address.uuid:032x}"
        c.kill()
        rounds: list[Display] = []
        for _ in range(12):
            await trio.sleep(1.0)
            display = step(
                display,
                answers(cluster.members[:2]),
                trio.current_time(),
                silent_after=2.5,
                forget_after=10.0,
            )
            rounds.append(display)
    assert not rounds[0].members[gone].silent
    assert rounds[2].members[gone].silent and rounds[2].members[gone].name == "C"
    assert all(gone not in g.holders for g in rounds[2].clusters[0].views)
    assert gone in rounds[8].members and gone not in rounds[9].members
    assert len(rounds[-1].members) == 2


async def test_inspect_model_warns_of_retransmissions_on_a_lossy_network(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With 20% loss, repairing members show a retransmission warning naming the counter and
    its rate; on the lossless network nobody does."""
    warned = {}
    for loss in (0.0, 0.2):
        async with open_cluster(3, "udp", seed=5, loss=loss) as cluster:
            display = step(None, answers(cluster.members), trio.current_time())
            for i in range(50):
                await cluster[i % 3].send(b"m%d" % i)
            await trio.sleep(2.0)
            await cluster.wait_until_delivered()
            display = step(display, answers(cluster.members), trio.current_time())
        warned[loss] = [w for m in display.ordered() for w in m.warnings if "xmit" in w]
    assert warned[0.0] == []
    assert warned[0.2] and all(w.endswith("/s") for w in warned[0.2])


async def test_inspect_model_credit_bars_show_what_a_sender_has_left(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """MFC with max_credits 100 KB: after A multicasts 29,960 bytes, its credits bar towards each
    member is filled to what it has left over max_credits; NAKACK2 has a window bar per peer
    (its shared peer_windows only) over max_receive_window."""
    config = StackConfig.preset("udp").configure("MFC", max_credits=100_000, min_threshold=0.1)
    async with open_cluster(3, config) as cluster:
        a = cluster[0]
        left = a.protocol("MFC").stats()["sender_credits"]
        await a.send_many([b"%d" % i + b"x" * 2_995 for i in range(10)])  # 29,960 bytes
        await cluster.wait_until_delivered()
        display = step(None, answers(cluster.members), trio.current_time())
        now_left = a.protocol("MFC").stats()["sender_credits"]
        windows = a.protocol("NAKACK2").stats()["peer_windows"]
    member = display.members[f"{a.address.uuid:032x}"]
    mfc, nakack = member.protocol("MFC"), member.protocol("NAKACK2")
    assert mfc is not None and nakack is not None
    assert {b.label: b.fill for b in mfc.credits} == {
        f"credits {peer}": credits / 100_000 for peer, credits in now_left.items()
    }
    assert all(now_left[p] == left[p] - 29_960 for p in left)  # 10 payloads of 2,996 bytes
    assert {b.label: b.text for b in nakack.windows} == {
        f"peer_windows {peer}": f"{w['highest_received'] - w['low']}/100000"
        for peer, w in windows.items()
    }
    assert set(windows) == {"B", "C"}


async def test_inspect_model_a_reset_counter_has_no_rate_for_that_round(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After a probe's reset (`Stack.reset_stats`) NAKACK2's msgs_sent went down: that round
    shows the new value without a rate (never a negative one); the round after has a rate."""
    async with open_cluster(3, "udp") as cluster:
        a = cluster[0]
        for i in range(5):
            await a.send(b"before %d" % i)
        await cluster.wait_until_delivered()
        display = step(None, answers(cluster.members), trio.current_time())
        a.stack.reset_stats()
        await trio.sleep(1.0)
        after_reset = step(display, answers(cluster.members), trio.current_time())
        await a.send(b"after")
        await cluster.wait_until_delivered()
        await trio.sleep(1.0)
        later = step(after_reset, answers(cluster.members), trio.current_time())
    address = f"{a.address.uuid:032x}"

    def sent(d: Display) -> tuple[float, float | None]:
        nakack = d.members[address].protocol("NAKACK2")
        assert nakack is not None
        (counter,) = [c for c in nakack.counters if c.name == "msgs_sent"]
        return counter.value, counter.rate

    assert sent(display)[0] >= 5
    assert sent(after_reset) == (0, None)
    value, rate = sent(later)
    assert value == 1 and rate is not None and rate > 0
