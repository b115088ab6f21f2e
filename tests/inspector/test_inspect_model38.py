"""The inspector's model on what a new user met (issue 38): leaves, restarts, rates.

Real answers from simulated clusters on virtual time, and for the rate rules
answers written by hand (the model is a pure function of answers).
"""

from __future__ import annotations

from typing import Any

import trio
from inspect_kit import answers

from triogroups.inspector._model import Display, step
from triogroups.testing import open_cluster


def uuid_of(member: Any) -> str:
    return f"{member.address.uuid:032x}"


async def test_inspect_model_graceful_leave_shows_left_never_a_split(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """C leaves gracefully while every member keeps answering (rounds every 0.1 s): no round
    shows a split, and once out C is shown left (it reports no view: its lower layers' last
    view is not its own). Then C stops answering, as its process exits: its last answer is
    kept but it holds no view, so the cluster is still one view (the old model showed the
    last answer's view as a split until silent_after), and it is gone after forget_after."""
    async with open_cluster(3, "udp") as cluster:
        a, b, c = cluster.members
        display = step(None, answers(cluster.members), trio.current_time())
        rounds: list[Display] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.disconnect)
            while not c.left or len(rounds) < 5:
                await trio.sleep(0.1)
                display = step(display, answers(cluster.members), trio.current_time())
                rounds.append(display)
        assert not any(r.clusters[0].split for r in rounds)
        assert display.members[uuid_of(c)].left and display.members[uuid_of(c)].view is None
        assert [g.view.members for g in display.clusters[0].views] == [("A", "B")]
        # C answered last while still a participant of the old view, then its process ends
        before_leave = step(None, answers(cluster.members), trio.current_time())
    async with open_cluster(3, "udp", seed=1) as cluster:
        a, b, c = cluster.members
        display = step(None, answers(cluster.members), trio.current_time())
        await c.disconnect()
        c.kill()
        later = []
        for _ in range(12):
            await trio.sleep(1.0)
            display = step(display, answers([a, b]), trio.current_time(), forget_after=10.0)
            later.append(display)
    gone = uuid_of(c)
    assert not any(r.clusters[0].split for r in later)
    assert later[0].members[gone].left and not later[0].members[gone].answered
    assert later[0].clusters[0].views[0].holders == (uuid_of(a), uuid_of(b))
    assert gone in later[8].members and gone not in later[9].members
    assert not before_leave.clusters[0].split


async def test_inspect_model_restarted_member_is_one_row_labelled_with_its_incarnation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """B dies and a new B (a new address) joins: while the old one is only missing, both
    rows exist, told apart as B and B#2; once the new B answers and the old one does not,
    the old row is dropped at once (not after forget_after): one row, labelled B#2."""
    async with open_cluster(3, "udp") as cluster:
        a, b, c = cluster.members
        display = step(None, answers(cluster.members), trio.current_time())
        b.kill()
        await trio.sleep(1.0)
        display = step(display, answers([a, c]), trio.current_time())
        assert [m.label for m in display.ordered()] == ["A", "B", "C"]
        new_b = await cluster.add_member("B")
        await cluster.join(new_b)
        display = step(display, answers([a, c, new_b]), trio.current_time())
    labels = [(m.label, m.address) for m in display.ordered()]
    assert labels == [("A", uuid_of(a)), ("B#2", uuid_of(new_b)), ("C", uuid_of(c))]
    assert display.incarnations["test", "B"] == (uuid_of(b), uuid_of(new_b))


def _answer(address: str, time: float, **stats: Any) -> dict[str, Any]:
    return {
        "address": address,
        "name": address.upper(),
        "cluster": "rates",
        "time": time,
        "stack": [{"protocol": "UDP", "properties": {}}, {"protocol": "UNICAST3"}],
        "stats": {"UDP": {"msgs_sent": 10 * time}, "UNICAST3": stats},
    }


def test_inspect_model_rates_only_for_counters_that_grow() -> None:
    """Five rounds a second apart: a growing counter has a rate (also in a round where it did
    not move: 0/s); an average, a fixed bound, a gauge that went down and a value that never
    moved have none, whatever they did; a counter reset to 0 has none that round only."""
    rounds = [
        {"sent": 0, "avg_batch": 3.0, "max_credits": 100, "unacked": 4, "floors": 0},
        {"sent": 5, "avg_batch": 4.5, "max_credits": 100, "unacked": 9, "floors": 0},
        {"sent": 5, "avg_batch": 2.0, "max_credits": 100, "unacked": 2, "floors": 0},
        {"sent": 9, "avg_batch": 6.0, "max_credits": 100, "unacked": 7, "floors": 0},
        {"sent": 0, "avg_batch": 1.0, "max_credits": 100, "unacked": 8, "floors": 0},
        {"sent": 3, "avg_batch": 1.0, "max_credits": 100, "unacked": 9, "floors": 0},
    ]
    display = None
    rates = []
    for t, stats in enumerate(rounds):
        display = step(display, [_answer("a1", float(t), **stats)], float(t))
        proto = display.members["a1"].protocol("UNICAST3")
        assert proto is not None
        rates.append({c.name: c.rate for c in proto.counters})
    assert [r["sent"] for r in rates] == [None, 5.0, 0.0, 4.0, None, 3.0]
    for key in ("avg_batch", "max_credits", "floors"):
        assert [r[key] for r in rates] == [None] * 6, key
    assert [r["unacked"] for r in rates][3:] == [None] * 3  # a gauge once it went down


def test_inspect_model_retransmission_warning_counts_each_resend_once() -> None:
    """UNICAST3 reports its resends twice: its own ``retransmissions`` and the shared
    ``retransmitted``. Two resends a second warn ``xmit 2.0/s``, not the 4/s the sum of both
    showed after every leave."""
    display = None
    for t in range(3):
        stats = {"retransmissions": 2 * t, "retransmitted": 2 * t, "xmit_rsps_sent": 0}
        display = step(display, [_answer("a1", float(t), **stats)], float(t))
    assert display is not None
    assert display.members["a1"].warnings == ("UNICAST3: xmit 2.0/s",)


def _member_answer(address: str, view_id: int, members: str, time: float) -> dict[str, Any]:
    return {
        "address": address,
        "name": address.upper(),
        "cluster": "views",
        "time": time,
        "view": {
            "id": view_id,
            "coord": "A",
            "members": list(members.upper()),
            "member_ids": list(members),
        },
        "stack": [],
        "stats": {},
    }


def test_inspect_model_a_view_change_on_its_way_is_no_split_until_silent_after() -> None:
    """A round catches A with the new view A|5 (a, b, c) while B, C and D are still on A|4
    (a, b, c, d): a view change on its way, not a split; A is changing views. Still so
    silent_after seconds later, it disagrees and the cluster is split. A member outside
    the main view holding another view (a partition) disagrees at once."""
    display = None
    new = [_member_answer("a", 5, "abc", 0.0)]
    old = [_member_answer(x, 4, "abcd", 0.0) for x in "bcd"]
    for t in (0.0, 1.0, 2.0):
        display = step(display, new + old, t, silent_after=2.5)
        (cluster,) = display.clusters
        assert not cluster.split and [g.view.id for g in cluster.views] == [4]
        assert display.members["a"].changing_since == 0.0
    display = step(display, new + old, 3.0, silent_after=2.5)
    (cluster,) = display.clusters
    assert cluster.split and cluster.disagreeing == frozenset({"a"})
    apart = step(
        None,
        [_member_answer(x, 5, "ab", 0.0) for x in "ab"] + [_member_answer("c", 4, "abc", 0.0)],
        0.0,
    )
    assert apart.clusters[0].disagreeing == frozenset({"c"})
