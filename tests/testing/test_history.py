"""The history checker: hand-made histories that break each rule must fail, and a
simulated run with partitions and heals, recorded by open_cluster, must pass."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from triogroups import Address, MergeView, View, ViewId
from triogroups.testing import (
    HistoryError,
    HistoryWriter,
    assert_histories,
    check_histories,
    open_cluster,
    read_histories,
)
from triogroups.testing._outages import Outages

A, B, C = Address(0xA, "A"), Address(0xB, "B"), Address(0xC, "C")
D = Address(0xD, "D")
V1 = View.create(A, 1, [A, B])


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Run:
    """Hand-made histories: one writer per member plus a fault log, on one clock."""

    def __init__(self, root: Path, *members: Address) -> None:
        self.root = root
        self.clock = Clock()
        self.w = {m: HistoryWriter(root / f"{m.name}.jsonl", m, self.clock) for m in members}
        self.faults = HistoryWriter(root / "faults.jsonl", None, self.clock)

    def at(self, t: float) -> Run:
        self.clock.t = t
        return self

    def view(self, view: View, *members: Address) -> None:
        for m in members or view.members:
            self.w[m].view(view)

    def mcast(self, src: Address, msg_id: str, *receivers: Address) -> None:
        self.w[src].send(msg_id)
        for r in receivers:
            self.w[r].deliver(src, msg_id)

    def end(self, t: float) -> list[str]:
        """Close every file with a last sample at ``t``; the rules each violation broke."""
        self.at(t)
        for w in self.w.values():
            w.sample(1000, {"NAKACK2": 3})
            w.close()
        self.faults.close()
        return [v.rule for v in check_histories(read_histories(self.root), settle=5.0)]


def _good(root: Path) -> Run:
    run = Run(root, A, B)
    run.at(1).view(V1)
    run.at(2).mcast(A, "a1", A, B)
    run.at(3).mcast(A, "a2", A, B)
    run.w[B].send("b1", A)
    run.w[A].deliver(B, "b1")
    return run


def test_history_of_a_run_that_keeps_the_contract_has_no_violations(tmp_path: Path) -> None:
    assert _good(tmp_path).end(20) == []


def test_history_fifo_two_multicasts_delivered_in_the_wrong_order(tmp_path: Path) -> None:
    run = Run(tmp_path, A, B)
    run.at(1).view(V1)
    run.at(2).mcast(A, "a1", A)
    run.mcast(A, "a2", A, B)
    run.w[B].deliver(A, "a1")
    assert run.end(20) == ["fifo"]
    (v,) = check_histories(read_histories(tmp_path))
    assert [line.record["k"] for line in v.excerpt] == ["send", "send", "deliver", "deliver"]
    assert "a1" in str(v) and "a2" in str(v)


def test_history_duplicate_delivery_is_a_violation_oob_included(tmp_path: Path) -> None:
    run = _good(tmp_path)
    run.w[B].deliver(A, "a2")
    run.w[A].send("oob", oob=True)
    run.w[B].deliver(A, "oob")
    run.w[B].deliver(A, "oob")
    assert run.end(20) == ["duplicate", "duplicate"]


def test_history_delivery_of_a_message_never_sent_is_a_violation(tmp_path: Path) -> None:
    run = _good(tmp_path)
    run.w[B].deliver(A, "never")
    run.w[A].send("for-a-only", A)
    run.w[A].deliver(A, "for-a-only")
    run.w[B].deliver(A, "for-a-only")  # a unicast to A, delivered by B too
    assert run.end(20) == ["unknown", "unknown"]


def test_history_missing_message_between_members_that_stayed_together(tmp_path: Path) -> None:
    run = Run(tmp_path, A, B)
    run.at(1).view(V1)
    run.at(2).mcast(A, "a1", A)  # B never delivers it, and both stay 18 s more
    assert run.end(20) == ["missing"]
    (v,) = check_histories(read_histories(tmp_path), settle=5.0)
    kinds = [line.record["k"] for line in v.excerpt]
    assert kinds == ["view", "send", "view", "sample"]


def test_history_send_taken_back_as_unsent_is_owed_to_nobody(tmp_path: Path) -> None:
    """A send cancelled before the stack took it is recorded, then taken back (``unsent``):
    nothing was sent, so it is not missing (campaign udp-mcast 2204)."""
    run = Run(tmp_path, A, B)
    run.at(1).view(V1)
    run.at(2).mcast(A, "a1", A, B)
    run.w[A].send("a2")
    run.at(3).w[A].unsent("a2")
    assert run.end(20) == []


def _held_back(root: Path, taken_at: float | None) -> list[str]:
    """A sends a1 at 2 s; its stack takes it at ``taken_at`` (flow control held it back)
    or at once (None); B stays in A's view until its history ends at 10 s."""
    root.mkdir()
    run = Run(root, A, B)
    run.at(1).view(V1)
    run.at(2).mcast(A, "a1", A)  # B never delivers it
    if taken_at is not None:
        run.at(taken_at).w[A].taken("a1")
    run.at(10).w[B].sample(1000, {"MCAST": 3})  # B's history ends here
    run.w.pop(B).close()
    return run.end(20)


def test_history_settle_runs_from_when_the_stack_took_a_held_back_send(tmp_path: Path) -> None:
    """A send that waited while flow control held senders back is owed ``settle`` seconds
    after the stack took it (``taken``), not after the call: until then no layer had it to
    deliver or retransmit (campaign udp-mcast 21144: D's multicast waited 7.4 s behind an
    MCAST window a killed member kept full; E left 7.3 s after the stack took it)."""
    assert _held_back(tmp_path / "late", taken_at=6.0) == []
    assert _held_back(tmp_path / "early", taken_at=4.0) == ["missing"]
    assert _held_back(tmp_path / "at-once", taken_at=None) == ["missing"]


def _parked(root: Path, own_at: float, *, total: bool = False) -> list[str]:
    """A sends a1 at 2 s and delivers it itself at ``own_at``; B stays in A's view until
    its history ends at 10 s and never delivers it."""
    root.mkdir()
    run = Run(root, A, B)
    run.at(1).view(V1)
    run.at(2).w[A].send("a1", total=total)
    run.at(own_at).w[A].deliver(A, "a1")
    run.at(10).w[B].sample(1000, {"MCAST": 3})  # B's history ends here
    run.w.pop(B).close()
    return run.end(20)


def test_history_settle_runs_from_when_the_sender_delivered_its_own_multicast(
    tmp_path: Path,
) -> None:
    """A sender delivers its own multicast when the reliability layer numbers and sends
    it; MCAST keeps the first sends after its window filled until there is room, so a
    multicast the sender delivered late is owed ``settle`` seconds after that (campaign
    udp-mcast 60185: I1-32 waited 19 s in I's full window; D, killed 10.9 s after the
    send, was held to it). Not for the total order, where the sender delivers its own
    only when the sequencer's order comes back."""
    assert _parked(tmp_path / "late", own_at=6.0) == []
    assert _parked(tmp_path / "early", own_at=4.0) == ["missing"]
    assert _parked(tmp_path / "at-once", own_at=2.0) == ["missing"]
    assert _parked(tmp_path / "total", own_at=6.0, total=True) == ["missing"]


def test_history_no_missing_message_when_they_parted_or_ended_before_settle(tmp_path: Path) -> None:
    """No FLUSH: nothing is promised to a member that leaves the sender's view next,
    nor within ``settle`` seconds of the send."""
    run = Run(tmp_path, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).mcast(A, "a1", A)  # neither B nor C delivers it
    run.at(3).view(View.create(A, 2, [A, C]), A, C)  # B is gone from A's next view
    run.view(View.create(B, 2, [B]), B)
    run.at(4).view(View.create(A, 3, [A]), A)  # C is gone as well, 2 s after the send
    run.view(View.create(C, 3, [C]), C)
    assert run.end(20) == []


def _kept_apart(root: Path, split_ends: float, pause: bool) -> list[str]:
    """A sends a1 at 2; B's views hold A until the end (20), but B cannot hear A from 1.5
    until ``split_ends``, and A is paused from 11.5 to 19 if ``pause``."""
    root.mkdir()
    run = Run(root, A, B)
    run.at(1).view(V1)
    run.at(1.5).faults.fault("oneway", f"oneway B stop hearing A until {split_ends:.2f}")
    run.at(2).mcast(A, "a1", A)
    run.at(split_ends).faults.fault("end", f"oneway B stop hearing A until {split_ends:.2f}")
    if pause:
        run.at(11.5).faults.fault("pause", "A")
        run.at(19).faults.fault("resume", "A")
    return run.end(20)


def test_history_message_lost_while_faults_kept_them_apart_is_not_owed(tmp_path: Path) -> None:
    """Campaign unicast2 seed 2190: G could not hear D for all but 0.07 s of the 11.3 s
    after D's send that their views held both (a one-way split, then pauses: failure
    detection lags behind them). ``settle`` counts only the seconds the fault log let
    them talk both ways."""
    # seconds they could talk within the 18 s after the send: 4, 18 - 6 - 7.5, 12 (settle 5)
    assert _kept_apart(tmp_path / "a", split_ends=16.0, pause=False) == []
    assert _kept_apart(tmp_path / "b", split_ends=8.0, pause=True) == []
    assert _kept_apart(tmp_path / "c", split_ends=8.0, pause=False) == ["missing"]


def _behind_a_deaf_coordinator(root: Path, *, total: bool, deaf: bool) -> list[str]:
    """A (coordinator), B and C share view 1 to the end (20); B sends b1 at 2, which only
    B delivers; A cannot hear B from 1.5 until 19 (with ``deaf``); B and C talk all along."""
    root.mkdir()
    run = Run(root, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    if deaf:
        run.at(1.5).faults.fault("oneway", "oneway A stop hearing B until 19.00")
        run.at(19).faults.fault("end", "oneway A stop hearing B until 19.00")
    run.at(2).w[B].send("b1", total=total)
    if not total:
        run.w[B].deliver(B, "b1")
    return run.end(20)


def test_history_total_order_multicast_is_owed_only_while_the_coordinator_could_relay_it(
    tmp_path: Path,
) -> None:
    """Campaign udp-total-blocks seed 70074: F's totally ordered F1-13 reached C, the
    coordinator nobody could hear, and A, which took over, could not hear F, then was
    paused, so it waited for the merge though F and G talked for 11.1 s. A totally
    ordered multicast reaches a member only through the coordinator of its view, so the
    seconds that count are those in which sender, coordinator and receiver all could
    talk; a per-sender FIFO multicast goes straight from the sender, so C stays owed it."""
    assert _behind_a_deaf_coordinator(tmp_path / "total-deaf", total=True, deaf=True) == []
    assert _behind_a_deaf_coordinator(tmp_path / "fifo-deaf", total=False, deaf=True) == ["missing"]
    assert _behind_a_deaf_coordinator(tmp_path / "total", total=True, deaf=False) == ["missing"] * 3


def _cut_off_sender(root: Path, *, total: bool, b_hears_a_from: float) -> list[str]:
    """A (coordinator) and B share view 1 to the end (20); B sends b1 at 2 and never
    delivers it, nor does A; A cannot hear B from 1.5 until ``b_hears_a_from``."""
    root.mkdir()
    run = Run(root, A, B)
    run.at(1).view(V1)
    split = f"oneway A stop hearing B until {b_hears_a_from:.2f}"
    run.at(1.5).faults.fault("oneway", split)
    run.at(2).w[B].send("b1", total=total)
    run.at(b_hears_a_from).faults.fault("end", split)
    return run.end(20)


def test_history_total_order_multicast_is_owed_to_its_sender_when_owed_to_another(
    tmp_path: Path,
) -> None:
    """Campaign udp-total 92 and 178: a member the coordinator could not hear, left out of
    the coordinator's view while its own view kept everyone, never delivered its own
    totally ordered multicasts. They come back to the sender through the coordinator's
    order, as to everyone else, so the sender is owed one only when another member is;
    a per-sender FIFO multicast is delivered at once by its sender, so it stays owed."""
    assert _cut_off_sender(tmp_path / "total-cut", total=True, b_hears_a_from=19.0) == []
    assert _cut_off_sender(tmp_path / "fifo-cut", total=False, b_hears_a_from=19.0) == ["missing"]
    # A could hear B for 15 s of the 18: A is owed b1, and so is B
    assert _cut_off_sender(tmp_path / "total", total=True, b_hears_a_from=5.0) == [
        "missing",
        "missing",
    ]
    (tmp_path / "alone").mkdir()
    alone = Run(tmp_path / "alone", A)  # its own coordinator: owed its own at once
    alone.at(1).view(View.create(A, 1, [A]))
    alone.at(2).w[A].send("a1", total=True)
    assert alone.end(20) == ["missing"]


def _fault(t: float, kind: str, detail: str = "") -> Any:
    """A fault-log line as `Outages` reads it."""
    return type("L", (), {"record": {"k": "fault", "t": t, "kind": kind, "detail": detail}})


def test_history_outages_apart_since_is_the_start_of_the_outage_holding_at_a_time() -> None:
    """`Outages.apart_since`: a pause and a split that meet end to end are one outage,
    which began at the pause; at a time they could talk, infinity."""
    outages = Outages(
        [
            _fault(1, "pause", "C"),
            _fault(3, "resume", "C"),
            _fault(3, "oneway", "oneway A stop hearing C until 8.00"),
            _fault(8, "end", "oneway A stop hearing C until 8.00"),
        ]
    )
    assert outages.apart_since("A", "C", 7) == outages.apart_since("C", "A", 2) == 1
    assert outages.apart_since("A", "C", 8) == outages.apart_since("A", "C", 0.5) == float("inf")
    assert outages.apart_since("A", "B", 2) == float("inf")


def test_history_outages_count_splits_both_ways_pauses_and_heals() -> None:
    """`Outages.connected`: a partition cuts both ways, a one-way split cuts the pair in
    either direction, a pause cuts every pair of its member, a heal ends them all, and an
    unreadable detail cuts nothing."""

    outages = Outages(
        [
            _fault(1, "partition", "partition A,B | C until 3.00"),
            _fault(3, "end", "partition A,B | C until 3.00"),
            _fault(4, "oneway", "oneway C stop hearing A until 9.00"),
            _fault(5, "pause", "B"),
            _fault(6, "resume", "B"),
            _fault(7, "partition", "something else"),
            _fault(8, "heal"),
        ]
    )
    assert outages.connected("A", "C", 0, 10) == 10 - 2 - 4
    assert outages.connected("C", "A", 0, 10) == 10 - 2 - 4
    assert outages.connected("A", "B", 0, 10) == 10 - 1
    assert outages.connected("B", "C", 0, 10) == 10 - 2 - 1
    assert outages.connected("A", "C", 2, 5) == 1
    assert outages.connected("A", "C", 5, 2) == 0


def test_history_outages_count_a_leave_from_its_start_until_the_next_incarnation() -> None:
    """Campaign udp-mcast 10001: F began to leave 8 s after G's multicast (which waited in
    G's full MCAST window for acks from the other side of a partition) and left unflushed
    6 s later. A member that leaves is promised nothing: from the leave (or restart) step
    on it is cut off from everyone, until its name's next incarnation starts; the record
    that ends a leave (``"F flushed=False"``) starts nothing, and a heal ends no leave."""

    outages = Outages(
        [
            _fault(2, "restart", "C"),
            _fault(3, "leave", "C flushed=True"),
            _fault(4, "start", "C"),
            _fault(11.7, "leave", "F"),
            _fault(14, "heal"),
            _fault(17.76, "leave", "F flushed=False"),
        ]
    )
    assert outages.connected("G", "F", 3.72, 17.76) == 11.7 - 3.72
    assert outages.connected("F", "G", 12, 20) == 0
    assert outages.connected("A", "C", 0, 10) == 10 - 2
    assert outages.connected("A", "G", 0, 20) == 20


def test_history_outages_of_a_real_chaos_run_name_incarnations_and_heal_one_split() -> None:
    """Real chaos udp seed 7001 reported 48 false ``missing``: its fault log names members
    "D" and "F" while their histories are "D.a2106f" and "F.d5f8c9", and it ends each split
    with a ``heal`` that carries the split's detail. F could not hear D from 49.81 (a one-way
    split) to 56.33 and was paused from 56.02 to 61.83, so the pair could talk for none of
    that; the split's heal ends neither F's pause nor the other split; a graceful restart
    lasts until its ``start``."""

    outages = Outages(
        [
            _fault(40.0, "partition", "A | B,C,D,E,F,G"),
            _fault(49.81, "oneway", "A,B,C,E,F,G stop hearing D"),
            _fault(56.02, "pause", "F"),
            _fault(56.33, "heal", "A,B,C,E,F,G stop hearing D"),
            _fault(58.0, "heal", "A | B,C,D,E,F,G"),
            _fault(61.83, "resume", "F"),
            _fault(62.0, "restart", "G"),
            _fault(66.0, "start", "G"),
        ]
    )
    for a, b in (("D.a2106f", "F.d5f8c9"), ("F.d5f8c9", "D.a2106f")):
        assert outages.connected(a, b, 49.7, 61.9) == pytest.approx(0.11 + 0.07)
    assert outages.connected("B.fe5a39", "C.64b985", 45, 70) == 25
    assert outages.connected("A.49bda9", "B.fe5a39", 45, 70) == 12
    assert outages.connected("G.906b94", "B.fe5a39", 60, 70) == 6


def test_history_members_that_stayed_together_but_installed_different_next_views(
    tmp_path: Path,
) -> None:
    """Each installed a view 2 of its own with the other in it and none newer for 18 s:
    both are left behind the other's view."""
    run = Run(tmp_path, A, B)
    run.at(1).view(V1)
    run.at(2).view(View.create(A, 2, [A, B]), A)
    run.view(View.create(B, 3, [B, A]), B)
    assert run.end(20) == ["view_order"]


def test_history_view_ids_must_grow_at_each_member(tmp_path: Path) -> None:
    run = Run(tmp_path, A, B)
    run.at(1).view(View.create(A, 3, [A, B]))
    run.at(2).view(V1)
    assert run.end(20) == ["view_id", "view_id"]


def test_history_one_view_id_with_two_memberships_is_a_violation(tmp_path: Path) -> None:
    run = Run(tmp_path, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]), A, C)
    run.view(V1, B)
    assert run.end(20) == ["view_members"]


def test_history_memory_above_its_bounds_is_a_violation(tmp_path: Path) -> None:
    run = _good(tmp_path)
    run.at(5).w[A].sample(10_000, {"NAKACK2": 3})
    run.w[B].sample(10, {"NAKACK2": 900})
    run.end(20)
    found = check_histories(read_histories(tmp_path), max_rss=5000, max_window=100)
    assert [(v.rule, v.excerpt[0].record["t"]) for v in found] == [("memory", 5), ("memory", 5)]


def test_history_traffic_must_resume_after_a_heal(tmp_path: Path) -> None:
    run = _good(tmp_path)
    run.at(10).faults.fault("heal")
    run.at(12).mcast(A, "a3", A)  # B gets nothing sent after the heal, up to t = 50
    run.mcast(B, "b3", B, A)
    rules = [
        v.rule
        for v in check_histories(read_histories(tmp_path), settle=100.0, resume_within=30)
        if v.rule != "missing"
    ]
    assert rules == []  # files not closed yet: both still at t = 12
    run.end(50)
    found = check_histories(read_histories(tmp_path), settle=100.0, resume_within=30)
    assert [v.rule for v in found] == ["no_traffic_after_heal"]
    assert found[0].excerpt[0].record == {"k": "fault", "t": 10, "kind": "heal", "detail": ""}


def test_history_traffic_resumed_after_a_heal_passes(tmp_path: Path) -> None:
    run = _good(tmp_path)
    run.at(10).faults.fault("heal")
    run.at(12).mcast(A, "a3", A, B)
    run.at(13).mcast(B, "b3", A, B)
    assert run.end(50) == []


def _heal_then(run: Run, fault: tuple[str, str] | None) -> list[str]:
    """A heal at 10 after which A and B each deliver only their own multicasts up to t = 50,
    with ``fault`` (kind, detail) starting at 15: the rules the run broke with
    ``resume_within`` 30."""
    run.at(10).faults.fault("heal", "C stop hearing A,B")
    if fault is not None:
        run.at(15).faults.fault(*fault)
    for t in (12, 20, 40):
        run.at(t).mcast(A, f"a{t}", A)
        run.mcast(B, f"b{t}", B)
    run.end(50)
    found = check_histories(read_histories(run.root), settle=100.0, resume_within=30)
    return [v.rule for v in found if v.rule == "no_traffic_after_heal"]


def test_history_heal_asks_nothing_of_members_cut_off_again_within_resume_within_chaos_5005(
    tmp_path: Path,
) -> None:
    """chaos udp-mcast seed 5005: the real runner records every split's end as a heal; E's
    ("A stop hearing B,..." healed) was followed 8.6 s later by "E stop hearing A,...", so
    it had no 20 s to merge. A heal asks nothing of a member a later fault cuts off (either
    side of a split), pauses or kills within resume_within; names in the fault log are the
    histories' names without the incarnation suffix ("E" for "E.936cd6")."""
    a, b = Address(0xA, "A.00000a"), Address(0xB, "B.00000b")
    run = Run(tmp_path, a, b)
    run.at(1).view(View.create(a, 1, [a]), a)
    run.view(View.create(b, 1, [b]), b)
    assert _heal_then(run, ("oneway", "B stop hearing A")) == []


@pytest.mark.parametrize("kind", ["pause", "kill", "restart"])
def test_history_heal_asks_nothing_of_a_member_paused_or_killed_within_resume_within(
    tmp_path: Path, kind: str
) -> None:
    """A pause, kill or restart of B within resume_within of the heal excuses B, not A."""
    run = Run(tmp_path, A, B)
    run.at(1).view(View.create(A, 1, [A]), A)
    run.view(View.create(B, 1, [B]), B)
    assert _heal_then(run, (kind, "B")) == ["no_traffic_after_heal"]
    (v,) = [
        v
        for v in check_histories(read_histories(tmp_path), settle=100.0, resume_within=30)
        if v.rule == "no_traffic_after_heal"
    ]
    assert v.text.startswith("A ")


def test_history_heal_still_reports_a_member_that_never_resumes(tmp_path: Path) -> None:
    """Two singletons that hear each other after the heal and never merge are both reported,
    though faults follow that cut off neither (a split of C, a loss) or come too late."""
    run = Run(tmp_path, A, B, C)
    run.at(1).view(View.create(A, 1, [A]), A)
    run.view(View.create(B, 1, [B]), B)
    run.view(View.create(C, 1, [C]), C)
    run.at(11).faults.fault("loss", "A,B loss 0.10")
    run.at(45).faults.fault("kill", "B")
    assert _heal_then(run, ("oneway", "C stop hearing D")) == ["no_traffic_after_heal"] * 2


def test_history_heal_asks_nothing_when_no_other_member_sent_anything(tmp_path: Path) -> None:
    """chaos udp-mcast seed 5005: from the heal until it was killed 23.6 s later E was the only
    member alive (the others were killed and waited their turn to be restarted), so no
    message of another member existed for it to deliver. B alone sends after the heal here:
    B is owed nothing, A still is."""
    run = Run(tmp_path, A, B)
    run.at(1).view(View.create(A, 1, [A]), A)
    run.view(View.create(B, 1, [B]), B)
    run.at(10).faults.fault("heal", "C stop hearing A,B")
    for t in (12, 20, 40):
        run.at(t).mcast(B, f"b{t}", B)
    run.end(50)
    found = check_histories(read_histories(tmp_path), settle=100.0, resume_within=30)
    assert [(v.rule, v.text.split()[0]) for v in found] == [("no_traffic_after_heal", "A")]


def test_history_torn_last_line_of_a_killed_member_is_ignored(tmp_path: Path) -> None:
    _good(tmp_path).end(20)
    with (tmp_path / "B.jsonl").open("a") as f:
        f.write('{"k":"deliver","t":21,"fr')
    assert check_histories(read_histories(tmp_path)) == []
    first = json.loads((tmp_path / "A.jsonl").read_text().splitlines()[0])
    assert first == {"k": "start", "t": 0, "member": f"{0xA:032x}", "name": "A"}


def test_history_assert_histories_raises_with_the_excerpt(tmp_path: Path) -> None:
    run = _good(tmp_path)
    run.w[B].deliver(A, "a2")
    run.end(20)
    with pytest.raises(
        HistoryError, match=r"1 violation.*\n.*duplicate.*\n  A\(A.jsonl\):5: .*send"
    ):
        assert_histories(read_histories(tmp_path))


async def test_history_of_a_simulated_run_with_partitions_and_heals_passes(
    autojump_clock: Any, tmp_path: Path
) -> None:
    """open_cluster(history=...) records every member; the protocols' own output, through
    a partition, a heal and the merge that follows, keeps every rule the checker proves."""
    async with open_cluster(4, "udp", seed=11, loss=0.05, history=tmp_path) as cluster:
        a, b, c, d = cluster.members

        async def traffic(tag: str, rounds: int) -> None:
            for i in range(rounds):
                for member in cluster.members:
                    await member.send(f"{tag}-{member.name}{i}".encode())
                    peer = cluster.members[(cluster.members.index(member) + 1) % 4]
                    await member.send(f"{tag}-{member.name}u{i}".encode(), to=peer.address)
                await trio.sleep(0.5)

        async def sample() -> None:  # what each member's NAKACK2 holds, once a second
            while True:
                for member in cluster.members:
                    assert member.history is not None
                    held = member.protocol("NAKACK2").retained()
                    member.history.sample(
                        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, {"NAKACK2": held}
                    )
                await trio.sleep(1)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sample)
            await traffic("first", 10)
            cluster.partition([a, b], [c, d])
            await traffic("split", 30)
            cluster.heal()
            await cluster.wait_for_view(timeout=120)
            await traffic("healed", 20)
            await trio.sleep(20)
            nursery.cancel_scope.cancel()
    histories = read_histories(tmp_path)
    assert len(histories) == 5  # four members and the fault log
    views = [line for h in histories for line in h.of("view")]
    assert any(len(v.record["members"]) == 2 for v in views)  # the partition showed
    assert any(line.record["windows"]["NAKACK2"] for h in histories for line in h.of("sample"))
    assert_histories(histories, settle=10.0, resume_within=30.0, max_window=2000)
    # the same run with one delivery taken out of B's history must fail, naming it
    (path,) = tmp_path.glob("B-*.jsonl")
    lines = path.read_text().splitlines()
    lost = next(i for i, text in enumerate(lines) if '"id":"healed-A3"' in text)
    path.write_text("\n".join(lines[:lost] + lines[lost + 1 :]) + "\n")
    found = check_histories(read_histories(tmp_path), settle=10.0, resume_within=30.0)
    assert [(v.rule, v.excerpt[1].record["id"]) for v in found] == [("missing", "healed-A3")]


def test_history_writer_loses_nothing_when_its_process_is_killed(tmp_path: Path) -> None:
    """Every record is on disk as soon as it is written: SIGKILL right after loses none."""
    program = (
        "import os, signal, time\n"
        "from triogroups import Address, View\n"
        "from triogroups.testing import HistoryWriter\n"
        "me = Address(0xA, 'A')\n"
        f"w = HistoryWriter({str(tmp_path / 'A.jsonl')!r}, me, time.time)\n"
        "w.view(View.create(me, 1, [me]))\n"
        "for i in range(500):\n"
        "    w.send(f'a{i}')\n"
        "    w.deliver(me, f'a{i}')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    result = subprocess.run([sys.executable, "-c", program], timeout=300, check=False)
    assert result.returncode == -signal.SIGKILL
    (history,) = read_histories(tmp_path)
    assert len(list(history.of("deliver"))) == 500
    assert check_histories([history]) == []


def test_history_view_missed_because_its_coordinator_was_killed_is_no_violation(
    tmp_path: Path,
) -> None:
    """Chaos run udp seed 6: coordinator A multicast view 2 and was killed 0.3 s later;
    C never got it and went on with the view of the new coordinator B. No FLUSH: a
    view only its crashed coordinator could retransmit may be missed."""
    run = Run(tmp_path, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).view(View.create(A, 2, [A, B, C]), A, B)
    run.w[A].close()  # killed at t = 2.3
    run.w.pop(A)
    run.at(5).view(View.create(B, 3, [B, C]), B, C)
    assert run.end(20) == []


def test_history_member_left_behind_without_a_view_its_peers_installed_is_a_violation(
    tmp_path: Path,
) -> None:
    """As above, but A lives on, and C gets no newer view for 13 s: left behind."""
    run = Run(tmp_path, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).view(View.create(A, 2, [A, B, C]), A, B)
    run.at(15).view(View.create(A, 3, [A, B, C]))
    assert run.end(20) == ["view_order", "view_order"]  # C against A, and against B


def test_history_message_undelivered_at_a_merge_view_is_not_owed(tmp_path: Path) -> None:
    """Chaos run udp seed 11: A's multicast sent 4 s before a merge view never reached B
    (a one-way partition stopped retransmission); the merge moved B's window forward. No
    FLUSH: what is undelivered at a merge may be lost. Sent ``settle`` s before it, it is
    owed."""
    run = Run(tmp_path, A, B)
    run.at(1).view(V1)
    run.at(10).mcast(A, "late", A)  # 4 s before the merge: not owed
    run.at(2).mcast(A, "early", A)  # 12 s before the merge: owed
    merge = MergeView(ViewId(2, A), [A, B], [V1, View.create(B, 1, [B])])
    run.at(14).view(merge)
    found = run.end(30)
    assert found == ["missing"]
    (v,) = check_histories(read_histories(tmp_path), settle=5.0)
    assert "'early'" in v.text


def test_history_view_missed_by_a_member_that_ended_soon_after_is_no_violation(
    tmp_path: Path,
) -> None:
    """Chaos run udp seed 11: B left (graceful restart) just before C's view 3 that
    still listed it; A and B stayed together after view 1 but B never got view 3."""
    run = Run(tmp_path, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).view(View.create(A, 2, [A, B, C]), A, B)  # C misses it: A dies
    run.w[A].close()
    run.w.pop(A)
    run.at(3).w[B].close()
    run.w.pop(B)
    run.at(4).view(View.create(C, 3, [C, B]), C)
    assert run.end(20) == []


def _missed_removed_merged(
    root: Path, removed_at: float, merged_at: float, heal_at: float | None = None
) -> list[str]:
    """C's view 2 at t = 2 lists A, which never gets it; C's view 3 removes A at
    ``removed_at``, the merge view 4 takes it back at ``merged_at`` (``settle`` 5 s);
    a ``heal`` fault at ``heal_at``, if given."""
    root.mkdir(exist_ok=True)
    run = Run(root, A, B, C)
    if heal_at is not None:
        run.at(heal_at).faults.fault("heal")
    run.at(1).view(View.create(C, 1, [C, A, B]))
    run.at(2).view(View.create(C, 2, [C, A, B]), C, B)
    run.at(removed_at).view(View.create(C, 3, [C, B]), C, B)
    subgroups = [View.create(C, 3, [C, B]), View.create(C, 1, [C, A, B])]
    run.at(merged_at).view(MergeView(ViewId(4, C), [C, B, A], subgroups))
    return run.end(30)


def test_history_view_missed_by_a_member_removed_soon_after_and_merged_back_is_no_violation(
    tmp_path: Path,
) -> None:
    """Chaos run udp-mcast seed 1015048817: C's view 81 still listed A, but loss, a one-way
    partition (nobody heard A's retransmission requests) and a pause kept it from A; view
    82 removed A 5 s later, and the merge view 83 took A back 7 s after that, 12 s after
    view 81 (``settle`` 10 s). A was unreachable, not left behind."""
    assert _missed_removed_merged(tmp_path, removed_at=5, merged_at=9) == []


def test_history_member_removed_but_not_merged_back_within_settle_is_a_violation(
    tmp_path: Path,
) -> None:
    """As above, but the merge comes 6 s after the view that removed A, more than
    ``settle``: A was left out too long. So is a member removed more than ``settle``
    after the view it missed."""
    found = _missed_removed_merged(tmp_path / "slow merge", removed_at=5, merged_at=11)
    assert found == ["view_order", "view_order"]  # A against C, and against B
    found = _missed_removed_merged(tmp_path / "late removal", removed_at=8, merged_at=10)
    assert found == ["view_order", "view_order"]


def test_history_member_removed_and_merged_back_soon_after_a_heal_is_no_violation(
    tmp_path: Path,
) -> None:
    """Campaign udp seed 2281: pauses and partitions kept B apart from 5.4 s to 19.7 s; the
    merge view took it back 0.1 s after the last heal, 10.2 s after the view that removed
    it (``settle`` 10 s). While the network keeps a member apart no merge can take it
    back, so ``settle`` runs from the heal too; but not from a heal before the removal."""
    assert _missed_removed_merged(tmp_path / "a", removed_at=5, merged_at=13, heal_at=9) == []
    found = _missed_removed_merged(tmp_path / "b", removed_at=5, merged_at=13, heal_at=4)
    assert found == ["view_order", "view_order"]
    found = _missed_removed_merged(tmp_path / "c", removed_at=5, merged_at=15, heal_at=9)
    assert found == ["view_order", "view_order"]


def _peer_gone_before_the_removal(
    root: Path, removed_at: float, merged_at: float, heal_at: float | None = None
) -> list[str]:
    """C's view 2 at t = 2 reaches B, not A; B leaves at t = 3, before C's view 3 removes
    A at ``removed_at``; the merge view 4, built from C's view 3 and A's view 1 (which
    still lists B), takes A back at ``merged_at`` (``settle`` 5 s); a ``heal`` at
    ``heal_at``, if given."""
    root.mkdir(exist_ok=True)
    run = Run(root, A, B, C)
    if heal_at is not None:
        run.at(heal_at).faults.fault("heal")
    run.at(1).view(View.create(C, 1, [C, A, B]))
    run.at(2).view(View.create(C, 2, [C, A, B]), C, B)
    run.at(3).w[B].leave(False)
    run.w.pop(B).close()
    run.at(removed_at).view(View.create(C, 3, [C]), C)
    subgroups = [View.create(C, 3, [C]), View.create(C, 1, [C, A, B])]
    run.at(merged_at).view(MergeView(ViewId(4, C), [C, A, B], subgroups), C, A)
    return run.end(30)


def test_history_member_removed_after_its_peer_left_and_merged_back_is_no_violation(
    tmp_path: Path,
) -> None:
    """Campaign udp-mcast seed 2200 (and udp 5197, udp-mcast 1267, 2096): a partition kept
    B's view 3 from D; A, which had it, left 0.4 s before B's view 4 removed D, and the
    merge view took D back 3.1 s after the heal. Only the histories that go on show the
    removal, so a view installed by any member that had the missed view counts."""
    assert _peer_gone_before_the_removal(tmp_path / "a", removed_at=4, merged_at=8) == []
    found = _peer_gone_before_the_removal(tmp_path / "b", removed_at=4, merged_at=13, heal_at=10)
    assert found == []


def test_history_member_removed_after_its_peer_left_but_merged_back_late_is_a_violation(
    tmp_path: Path,
) -> None:
    """As above, but the merge view comes 6 s after the removal with no heal between, or
    6 s after a heal: A was left out too long, against B (gone) and C alike."""
    found = _peer_gone_before_the_removal(tmp_path / "a", removed_at=4, merged_at=10)
    assert found == ["view_order", "view_order"]
    found = _peer_gone_before_the_removal(tmp_path / "b", removed_at=4, merged_at=16, heal_at=10)
    assert found == ["view_order", "view_order"]


def _coordinator_gone_after_its_view(root: Path, gone_at: float, next_at: float) -> list[str]:
    """A's view 2 at t = 2 reaches B, not C; A's history ends at ``gone_at`` (it crashed
    or left, and could retransmit no more); C, the heir, installs view 3 with B at
    ``next_at`` (``settle`` 5 s)."""
    root.mkdir(exist_ok=True)
    run = Run(root, A, B, C)
    run.at(1).view(View.create(A, 1, [A, C, B]))
    run.at(2).view(View.create(A, 2, [A, C, B]), A, B)
    run.at(gone_at).w[A].sample(1000, {"MCAST": 3})  # its last record
    run.w.pop(A).close()
    run.at(next_at).view(View.create(C, 3, [C, B]), C, B)
    return run.end(30)


def test_history_view_missed_when_its_coordinator_went_soon_after_counts_from_then(
    tmp_path: Path,
) -> None:
    """Chaos run udp-mcast seed 1633779744: loss kept view 51 from C; its coordinator D
    left 2.4 s later, before it retransmitted it, and C, D's heir, installed a newer
    view 9.8 s after D left, 12.2 s after view 51 (``settle`` 10 s). Only failure
    detection tells C that D is gone: the ``settle`` seconds run from D's end."""
    assert _coordinator_gone_after_its_view(tmp_path, gone_at=4, next_at=8.5) == []


def test_history_view_missed_is_owed_from_a_late_coordinator_end_or_too_slow_a_takeover(
    tmp_path: Path,
) -> None:
    """As above, but C takes over more than ``settle`` after A went; or A went more
    than ``settle`` after its view, which it could have retransmitted meanwhile."""
    assert _coordinator_gone_after_its_view(tmp_path / "slow", gone_at=4, next_at=9.5) == [
        "view_order"
    ]
    assert _coordinator_gone_after_its_view(tmp_path / "late", gone_at=8, next_at=12) == [
        "view_order"
    ]


def _missed_while_apart(root: Path, next_at: float, faults: bool = True) -> list[str]:
    """A's view 2 at t = 2 reaches B, not C: C cannot hear A or B until t = 4, then B is
    paused until the heal at t = 9 (with ``faults``); B installs view 3 with C at
    ``next_at`` (``settle`` 5 s). A's history goes on."""
    root.mkdir(exist_ok=True)
    run = Run(root, A, B, C)
    if faults:
        run.at(1.5).faults.fault("oneway", "oneway C stop hearing A,B until 4.00")
        run.at(4).faults.fault("end", "oneway C stop hearing A,B until 4.00")
        run.at(4).faults.fault("pause", "B")
        run.at(9).faults.fault("heal")
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).view(View.create(A, 2, [A, B, C]), A, B)
    run.at(next_at).view(View.create(B, 3, [B, C]), B, C)
    return run.end(30)


def test_history_view_missed_while_the_faults_kept_the_pair_apart_is_no_violation(
    tmp_path: Path,
) -> None:
    """Campaign udp-mcast seed 10357: a one-way split kept A's view 8 from G; 0.06 s after
    it ended, D, the heir on G's side (B, the next coordinator, was partitioned off), was
    paused until the quiet heal, and D's view 9 reached G 5 s after it, 10.1 s after A
    went (``settle`` 10 s). Only the seconds in which the pair could talk count, as for
    **missing**: here 4 s of the 11 s, against a ``settle`` of 5 s."""
    assert _missed_while_apart(tmp_path, next_at=13) == []


def test_history_view_missed_is_owed_once_the_pair_could_talk_for_settle_seconds(
    tmp_path: Path,
) -> None:
    """As above, but view 3 comes 6 s after the heal, or 11 s after view 2 with no fault
    at all: C stayed behind while it could talk with B."""
    assert _missed_while_apart(tmp_path / "late", next_at=15) == ["view_order"]
    assert _missed_while_apart(tmp_path / "no faults", next_at=13, faults=False) == ["view_order"]


def _coordinator_deaf(root: Path, *, deaf: bool) -> list[str]:
    """A's view 2 at t = 2 reaches B, not C (a partition until 3); from then on B and C
    talk, but A cannot hear C until 12 (with ``deaf``); A's view 3 takes C in at 13
    (``settle`` 5 s)."""
    root.mkdir()
    run = Run(root, A, B, C)
    run.at(1.5).faults.fault("partition", "partition C | A,B until 3.00")
    run.at(3).faults.fault("end", "partition C | A,B until 3.00")
    if deaf:
        run.faults.fault("oneway", "oneway A stop hearing C until 12.00")
        run.at(12).faults.fault("end", "oneway A stop hearing C until 12.00")
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).view(View.create(A, 2, [A, B, C]), A, B)
    run.at(13).view(View.create(A, 3, [A, B, C]))
    return run.end(30)


def test_history_view_missed_while_the_peer_s_coordinator_could_not_hear_it_is_no_violation(
    tmp_path: Path,
) -> None:
    """Campaign udp-mcast seed 61399: a view comes from a coordinator, so the seconds that
    count for a member that missed one are those in which it could talk with the
    coordinator of the view its peer had, not only with the peer: F, coordinator of the
    merge view that kept C, heard nobody, then not C, then was paused. Here C talks with
    B for 10 s but with A, who alone can take it in, for 1 s; with A hearing C the
    whole time, C stayed behind."""
    assert _coordinator_deaf(tmp_path / "deaf", deaf=True) == []
    assert _coordinator_deaf(tmp_path / "hearing", deaf=False) == ["view_order", "view_order"]


def _heir_paused(root: Path, *, paused: bool) -> list[str]:
    """A's view 2 at t = 2 reaches B and C, not D; A is killed at 2.5; B, A's heir, is
    paused from 3 to 9 (with ``paused``) and installs view 3 with C and D at 13
    (``settle`` 5 s). C, the peer, and D talk the whole time."""
    root.mkdir()
    run = Run(root, A, B, C, D)
    run.at(1).view(View.create(A, 1, [A, B, C, D]))
    run.at(2).view(View.create(A, 2, [A, B, C, D]), A, B, C)
    run.at(2.5).w[A].sample(1000, {})
    run.w.pop(A).close()
    if paused:
        run.at(3).faults.fault("pause", "B")
        run.at(9).faults.fault("resume", "B")
    run.at(13).view(View.create(B, 3, [B, C, D]))
    return run.end(30)


def test_history_view_missed_while_the_dead_coordinator_s_heir_was_paused_is_no_violation(
    tmp_path: Path,
) -> None:
    """Campaign udp-total seed 70033: loss kept B's view 8 from D, and B was killed 0.24 s
    later, before it could send it again. E, B's heir, who alone could take D on, was
    paused for 5.2 of the 10.8 s until its own view did. Once a coordinator is gone, the
    seconds in which its heir could not talk with the skipper do not count either: here
    D can talk with C, its peer, for all of the 10.5 s, but with B, A's heir, for 4.5 s;
    with B never paused, D stayed behind (beside C and B)."""
    assert _heir_paused(tmp_path / "paused", paused=True) == []
    assert _heir_paused(tmp_path / "running", paused=False) == ["view_order"] * 2


def test_history_two_coordinators_installing_the_same_counter_is_no_view_order_violation(
    tmp_path: Path,
) -> None:
    """Chaos run udp seed 17: A installed view 3 with B and C; C, not hearing A, took over
    and installed its own view 3 with B. B had A's view 3 and can never install C's: a
    split brain with one counter, which MERGE3 heals."""
    run = Run(tmp_path, A, B, C)
    run.at(1).view(View.create(A, 2, [A, B, C]))
    run.at(2).view(View.create(A, 3, [A, B, C]), A, B)
    run.at(3).view(View.create(C, 3, [C, B]), C)
    assert run.end(20) == []


def test_history_merge_view_overtaken_by_the_coordinators_next_view_is_no_violation(
    tmp_path: Path,
) -> None:
    """Chaos run udp seed 6 (second run): A merged {A,B} with {C} while B was paused; B's
    VIEW_ACK timed out, A installed view 4, and B, resumed, got view 4 before the OOB
    INSTALL_MERGE_VIEW of view 3. A regular view skipped that way would still count."""
    run = Run(tmp_path, A, B, C)
    left = View.create(A, 2, [A, B])
    run.at(1).view(left, A, B)
    run.view(View.create(C, 2, [C]), C)
    run.at(2).view(MergeView(ViewId(3, A), [A, B, C], [left, View.create(C, 2, [C])]), A, C)
    run.at(4).view(View.create(A, 4, [A, B, C]))
    assert run.end(20) == []


def _left(root: Path, *, flushed: bool | None, delivered_at_c: bool, c_goes_on: float) -> list[str]:
    """A multicasts a1 in view 1 {A, B, C}, leaves with ``flushed``; B and C install view 2
    {B, C} at t = 4. B delivered a1; C did if ``delivered_at_c``; C's history ends
    ``c_goes_on`` seconds after view 2."""
    root.mkdir(exist_ok=True)
    v1 = View.create(A, 1, [A, B, C])
    v2 = View.create(B, 2, [B, C])
    run = Run(root, A, B, C)
    run.at(1).view(v1)
    run.at(2).mcast(A, "a1", A, B, *([C] if delivered_at_c else []))
    run.at(3).w[A].leave(flushed)
    run.at(4).view(v2)
    run.at(4).w[A].close()
    run.w.pop(A)
    run.at(4 + c_goes_on).w[C].sample(1000, {})
    return run.end(4 + c_goes_on)


def test_history_flushed_leave_owes_its_multicasts_to_the_members_that_stayed(
    tmp_path: Path,
) -> None:
    """A member that left with flushed true and whose multicast never reached C, which
    stayed in the next view for settle, broke its promise: a flushed_leave violation."""
    assert _left(tmp_path, flushed=True, delivered_at_c=False, c_goes_on=10) == ["flushed_leave"]


def test_history_flushed_leave_delivered_everywhere_passes(tmp_path: Path) -> None:
    """The same leave passes once C delivered the multicast."""
    assert _left(tmp_path, flushed=True, delivered_at_c=True, c_goes_on=10) == []


def test_history_a_leave_without_the_flushed_promise_owes_nothing(tmp_path: Path) -> None:
    """flushed False (and None, what today's disconnect returns) promises nothing: the
    sender left, so missing does not ask for a1 either."""
    assert _left(tmp_path / "f", flushed=False, delivered_at_c=False, c_goes_on=10) == []
    assert _left(tmp_path / "n", flushed=None, delivered_at_c=False, c_goes_on=10) == []


def test_history_flushed_leave_is_not_owed_to_a_member_that_ended_within_settle(
    tmp_path: Path,
) -> None:
    """C's history ends 2 s after the view without A (settle 5): it did not stay."""
    assert _left(tmp_path, flushed=True, delivered_at_c=False, c_goes_on=2) == []


def test_history_flushed_leave_is_not_owed_to_a_member_merged_back_after_the_send(
    tmp_path: Path,
) -> None:
    """Campaign udp-mcast seed 1199: A multicast a1 in view 1 {A, B, C}; a partition
    split C off (A and B went on in view 2 {A, B}), a merge brought C back (view 3),
    then A left flushed. C's window for A started at the merge digest: a1, sent while
    C was apart, was never owed to it, flushed leave or not. B was with A all along."""
    v1 = View.create(A, 1, [A, B, C])
    run = Run(tmp_path, A, B, C)
    run.at(1).view(v1)
    run.at(2).mcast(A, "a1", A, B)
    run.at(3).view(View.create(A, 2, [A, B]), A, B)
    run.view(View.create(C, 2, [C]), C)
    run.at(5).view(View.create(A, 3, [A, B, C]))
    run.at(6).w[A].leave(True)
    run.at(7).view(View.create(B, 4, [B, C]), B, C)
    run.at(7).w[A].close()
    run.w.pop(A)
    run.at(20).w[C].sample(1000, {})
    assert run.end(20) == []


def test_history_flushed_leave_is_not_owed_to_a_member_that_excluded_the_sender_after_the_send(
    tmp_path: Path,
) -> None:
    """Campaign udp-mcast seed 5013: A multicast a1 in view 1 {A, B, C}, was paused; C
    installed view 2 {B, C} without A, then the merge view 3 brought A back (A itself
    never installed view 2), and A left flushed. C was split from A after the send, so
    a1 was not owed to it (the merge digest starts its window afresh); B, which kept A
    in every view, was."""
    v1 = View.create(A, 1, [A, B, C])
    run = Run(tmp_path, A, B, C)
    run.at(1).view(v1)
    run.at(2).mcast(A, "a1", A, B)
    run.at(3).view(View.create(B, 2, [B, C]), C)
    run.at(5).view(View.create(A, 3, [A, B, C]))
    run.at(6).w[A].leave(True)
    run.at(7).view(View.create(B, 4, [B, C]), B, C)
    run.at(7).w[A].close()
    run.w.pop(A)
    run.at(20).w[C].sample(1000, {})
    assert run.end(20) == []


def _split_then_merged_back(root: Path, *, c_got_a2: bool) -> list[str]:
    """Campaign udp-mcast seed 50545: A multicast a1 in view 1 {A, B, C}; C, cut off,
    installed the singleton view 2 {C}; B merged C back in view 3 {A, B, C}, which A
    never installed (A stayed in view 1); A multicast a2 after the merge and left
    flushed from view 1; B and C went on in view 4 {B, C}. C delivered a2 if
    ``c_got_a2``, never a1."""
    root.mkdir(exist_ok=True)
    run = Run(root, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).mcast(A, "a1", A, B)
    run.at(3).view(View.create(C, 2, [C]), C)
    run.at(5).view(MergeView(ViewId(3, B), [B, C, A], []), B, C)
    run.at(6).mcast(A, "a2", A, B, *([C] if c_got_a2 else []))
    run.at(7).w[A].leave(True)
    run.at(8).view(View.create(B, 4, [B, C]), B, C)
    run.at(8).w[A].close()
    run.w.pop(A)
    run.at(20).w[C].sample(1000, {})
    return run.end(20)


def test_history_flushed_leave_is_not_owed_what_was_sent_before_a_receiver_split_and_merged_back(
    tmp_path: Path,
) -> None:
    """C's view after A's last view lacked A because C split off, not because A left;
    C was merged back before A left, its window for A starting at the merge digest: a1,
    sent before the split, was not owed to C (the contract owes a flushed leave's
    multicasts to the members that stayed, and a member cut off before retransmission
    completes may miss them); a2, sent after the merge and delivered, was."""
    assert _split_then_merged_back(tmp_path, c_got_a2=True) == []


def test_history_flushed_leave_is_owed_what_was_sent_after_the_receiver_was_merged_back(
    tmp_path: Path,
) -> None:
    """As above, but C never delivered a2, sent after the merge brought C back: owed."""
    assert _split_then_merged_back(tmp_path, c_got_a2=False) == ["flushed_leave"]


def test_history_leave_record_is_written_and_read_with_its_flushed_bool(tmp_path: Path) -> None:
    """HistoryWriter.leave writes a leave record; None is written as false."""
    with HistoryWriter(tmp_path / "A.jsonl", A, lambda: 1.0) as w:
        w.leave(None)
        w.leave(True)
    (history,) = read_histories(tmp_path)
    assert [line.record["flushed"] for line in history.of("leave")] == [False, True]


def test_history_dont_loopback_multicast_is_not_owed_to_its_sender(tmp_path: Path) -> None:
    """A DONT_LOOPBACK multicast (loopback false) is owed to the others, not to the
    sender; a regular one is owed to the sender too."""
    run = Run(tmp_path, A, B)
    run.at(1).view(V1)
    run.at(2).w[A].send("a1", loopback=False)
    run.w[B].deliver(A, "a1")
    run.at(3).w[A].send("a2")
    run.w[B].deliver(A, "a2")
    found = run.end(20)
    assert found == ["missing"]
    (violation,) = check_histories(read_histories(tmp_path), settle=5.0)
    assert violation.excerpt[1].record["id"] == "a2"


# --- total_order ---------------------------------------------------------------------


class TotalRun(Run):
    """Hand-made histories of a total-order stack: every multicast sent ``total``."""

    def tsend(self, src: Address, *ids: str) -> None:
        for msg_id in ids:
            self.w[src].send(msg_id, total=True)

    def got(self, r: Address, *msgs: tuple[Address, str]) -> None:
        for src, msg_id in msgs:
            self.w[r].deliver(src, msg_id)


def _three(root: Path) -> TotalRun:
    run = TotalRun(root, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).tsend(A, "a1")
    run.tsend(B, "b1")
    run.tsend(C, "c1")
    return run


def test_history_total_order_one_sequence_at_every_member_passes(tmp_path: Path) -> None:
    run = _three(tmp_path)
    for r in (A, B, C):
        run.got(r, (B, "b1"), (A, "a1"), (C, "c1"))
    assert run.end(20) == []


def test_history_total_order_two_members_deliver_two_messages_in_different_orders(
    tmp_path: Path,
) -> None:
    """Per-sender order holds (one message per sender), total order does not: B got a1
    and b1 the other way round."""
    run = _three(tmp_path)
    run.got(A, (A, "a1"), (B, "b1"), (C, "c1"))
    run.got(B, (B, "b1"), (A, "a1"), (C, "c1"))
    run.got(C, (A, "a1"), (B, "b1"), (C, "c1"))
    assert run.end(20) == ["total_order", "total_order"]  # B against A, B against C
    found = check_histories(read_histories(tmp_path), settle=5.0)
    kinds = [line.record["k"] for line in found[0].excerpt]
    assert kinds == ["view", "deliver", "deliver", "deliver", "deliver"]
    assert "delivered 'a1' before 'b1'" in str(found[0])


def test_history_total_order_is_compared_across_a_coordinator_change(tmp_path: Path) -> None:
    """A (the coordinator) crashes; B and C go on together into view 2: what each
    delivered in views 1 and 2 is one stretch, so b1 (view 1) and c2 (view 2) must keep
    their order too."""
    run = TotalRun(tmp_path, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).tsend(B, "b1")
    run.got(B, (B, "b1"))
    run.at(5).view(View.create(B, 2, [B, C]), B, C)
    run.tsend(C, "c2")
    run.got(B, (C, "c2"))
    run.got(C, (C, "c2"), (B, "b1"))
    assert run.end(20) == ["total_order"]


def test_history_total_order_a_duplicate_is_its_own_rule_and_counts_once(tmp_path: Path) -> None:
    run = _three(tmp_path)
    run.got(A, (A, "a1"), (B, "b1"), (C, "c1"))
    run.got(B, (A, "a1"), (B, "b1"), (A, "a1"), (C, "c1"))  # a1 again, after b1
    run.got(C, (A, "a1"), (B, "b1"), (C, "c1"))
    assert run.end(20) == ["duplicate"]


def test_history_total_order_messages_only_one_member_delivered_are_not_compared(
    tmp_path: Path,
) -> None:
    """C was cut off without b1 and went on alone: each pair compares what both of
    them delivered, and C's a1, c1 agrees with A's and B's a1, b1, c1."""
    run = _three(tmp_path)
    run.got(A, (A, "a1"), (B, "b1"), (C, "c1"))
    run.got(B, (A, "a1"), (B, "b1"), (C, "c1"))
    run.got(C, (A, "a1"), (C, "c1"))
    run.at(3).view(View.create(A, 2, [A, B]), A, B)
    run.view(View.create(C, 2, [C]), C)
    assert run.end(20) == []


def test_history_total_order_partitions_that_merge_keep_their_own_orders(tmp_path: Path) -> None:
    """A partition: {A, B} and {C} each order on their own, and the merge view does not
    reconcile them (SEQUENCER's written limit): only pairs that stayed together compare.
    From the merge view on, all three share one order again, and breaking it there fails."""
    run = TotalRun(tmp_path, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).view(View.create(A, 2, [A, B]), A, B)
    run.view(View.create(C, 2, [C]), C)
    run.tsend(A, "a1")
    run.tsend(C, "c1")
    run.got(A, (A, "a1"))
    run.got(B, (A, "a1"))
    run.got(C, (C, "c1"))
    merged = MergeView(ViewId(3, A), [A, B, C], [View.create(A, 2, [A, B]), View.create(C, 2, [C])])
    run.at(4).view(merged)
    run.tsend(B, "b2")
    run.tsend(C, "c2")
    run.got(A, (B, "b2"), (C, "c2"))
    run.got(B, (B, "b2"), (C, "c2"))
    run.got(C, (B, "b2"), (C, "c2"))
    assert run.end(20) == []


def _lagging_member(root: Path, *, c_delivers_at: float) -> list[str]:
    """In view 1 {A, B, C}, A and B deliver b1 before a1 at 3; view 2 {A, B} (C paused) comes
    at 4; C, still in view 1, delivers a1 before b1 (an old coordinator's order) at
    ``c_delivers_at``."""
    root.mkdir()
    run = TotalRun(root, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).tsend(A, "a1")
    run.tsend(B, "b1")
    run.at(3).got(B, (B, "b1"), (A, "a1"))
    run.got(A, (B, "b1"), (A, "a1"))
    run.at(4).view(View.create(A, 2, [A, B]), A, B)
    run.at(c_delivers_at).got(C, (A, "a1"), (B, "b1"))
    return run.end(20)


def test_history_total_order_is_not_asked_of_a_member_after_the_others_left_it_out(
    tmp_path: Path,
) -> None:
    """Campaign tcp-total-blocks seed 70046: D, paused through the coordinator's change
    and removed for it, delivered at its resume the order of B, the old coordinator
    (paused too and excluded), where the others had the new coordinator's. What a member
    delivers after the view that left it out is the order of a side split off, which a
    merge does not reconcile; what it delivered before that still counts."""
    assert _lagging_member(tmp_path / "after", c_delivers_at=6) == []
    assert _lagging_member(tmp_path / "before", c_delivers_at=3) == ["total_order"] * 2


def _cut_off_coordinator(root: Path, *, cut_until: float, b_stays: bool = True) -> list[str]:
    """In views 1 and 2 {A, B, C}, A and B cannot hear C from 2.5 until ``cut_until``; C
    delivers b1 at 3 (its own old order) and a1 at 5; A and B deliver a1 before b1 at 5
    (a new coordinator's order). View 3 {A, B} (without B: ``b_stays`` False, B's history
    ends in view 2) leaves C out at 7."""
    root.mkdir()
    run = TotalRun(root, A, B, C)
    run.at(1).view(View.create(A, 1, [A, B, C]))
    run.at(2).tsend(A, "a1")
    run.tsend(B, "b1")
    split = f"oneway A,B stop hearing C until {cut_until:.2f}"
    run.at(2.5).faults.fault("oneway", split)
    run.at(3).got(C, (B, "b1"))
    run.at(4).view(View.create(A, 2, [A, B, C]))
    run.at(5).got(A, (A, "a1"), (B, "b1"))
    run.got(B, (A, "a1"), (B, "b1"))
    run.got(C, (A, "a1"))
    if cut_until < 7:
        run.at(cut_until).faults.fault("end", split)
    if b_stays:
        run.at(7).view(View.create(A, 3, [A, B]), A, B)
    else:
        run.at(7).view(View.create(A, 3, [A]), A)
    if cut_until >= 7:
        run.at(cut_until).faults.fault("end", split)
    return run.end(20)


def test_history_total_order_is_not_asked_of_a_member_after_it_was_cut_off_until_removed(
    tmp_path: Path,
) -> None:
    """Campaign udp-total-blocks seed 507: D, the coordinator of its subgroup, ordered and
    delivered F1-16 in its old view just as a one-way split began that kept everyone from
    hearing it; its log never reached the merge view's coordinator, which ordered F1-16
    after A1-6, and the view that removed D came 3.4 s later. Cut off from then until that
    view, D split off when the split began: the view only noticed. Where the other member's
    history ends before that view (I left), the view of those that went on decides. A
    split that ended before the view does not excuse: C could have caught up."""
    assert _cut_off_coordinator(tmp_path / "cut", cut_until=9) == []
    assert _cut_off_coordinator(tmp_path / "healed", cut_until=6) == ["total_order"] * 2
    assert _cut_off_coordinator(tmp_path / "b gone", cut_until=9, b_stays=False) == []
    assert (
        _cut_off_coordinator(tmp_path / "b gone healed", cut_until=6, b_stays=False)
        == ["total_order"] * 2
    )


def test_history_total_order_after_a_merge_one_order_again(tmp_path: Path) -> None:
    run = TotalRun(tmp_path, A, B, C)
    run.at(1).view(View.create(A, 2, [A, B]), A, B)
    run.view(View.create(C, 2, [C]), C)
    merged = MergeView(ViewId(3, A), [A, B, C], [View.create(A, 2, [A, B]), View.create(C, 2, [C])])
    run.at(4).view(merged)
    run.tsend(B, "b2")
    run.tsend(C, "c2")
    run.got(A, (B, "b2"), (C, "c2"))
    run.got(B, (B, "b2"), (C, "c2"))
    run.got(C, (C, "c2"), (B, "b2"))  # C, merged in, orders otherwise
    assert run.end(20) == ["total_order", "total_order"]


def test_history_total_order_is_not_asked_of_sends_outside_the_order(tmp_path: Path) -> None:
    """Without ``total`` (a stack without SEQUENCER), two senders' multicasts may arrive
    in different orders at different members."""
    run = Run(tmp_path, A, B)
    run.at(1).view(V1)
    run.w[A].send("a1")
    run.w[B].send("b1")
    for r, order in ((A, [(A, "a1"), (B, "b1")]), (B, [(B, "b1"), (A, "a1")])):
        for src, msg_id in order:
            run.w[r].deliver(src, msg_id)
    assert run.end(20) == []


def test_history_writer_refuses_total_for_a_unicast_or_oob(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "a.jsonl", A, Clock()) as w:
        with pytest.raises(ValueError, match="total is for regular multicasts"):
            w.send("x", B, total=True)
        with pytest.raises(ValueError, match="total is for regular multicasts"):
            w.send("y", oob=True, total=True)


def test_history_total_order_a_message_sent_before_a_joiner_came_is_not_compared(
    tmp_path: Path,
) -> None:
    """C joins in view 2 and is owed nothing sent in view 1, nor its place in the order:
    a new coordinator's tail hand-over may bring it a1 late (campaign udp-total seed 20).
    Only what was sent in a view both installed is compared."""
    run = TotalRun(tmp_path, A, B, C)
    run.at(1).view(V1, A, B)
    run.at(2).tsend(A, "a1")
    run.got(B, (A, "a1"))
    run.at(3).view(View.create(A, 2, [A, B, C]))
    run.tsend(B, "b2")
    run.got(A, (A, "a1"), (B, "b2"))  # A's own a1 came back only in view 2
    run.got(B, (B, "b2"))
    run.got(C, (B, "b2"), (A, "a1"))
    assert run.end(20) == []
