"""The real demo's checker (`_demo_check.check_logs`): what it accepts and what it refuses."""

from __future__ import annotations

from triogroups.supervisor._demo_check import MemberLog, check_logs

A, B, C = "a" * 32, "b" * 32, "c" * 32


def log(uuid: str, name: str, delivered: dict[str, list[int]], survived: bool = True) -> MemberLog:
    """A sent 6 messages, B joining A's view from seqno 2 on; B sent 4 with both in view."""
    sent = {A: 6, B: 4, C: 3}[uuid]
    views = {A: [(0, [A]), (2, [A, B])], B: [(0, [A, B])], C: [(0, [A, B, C])]}[uuid]
    return MemberLog(uuid, name, sent, views, delivered, survived)


def test_sent_to_counts_only_messages_sent_while_the_receiver_was_in_the_view() -> None:
    assert log(A, "A", {}).sent_to(B) == [2, 3, 4, 5]
    assert log(A, "A", {}).sent_to(A) == [0, 1, 2, 3, 4, 5]


def test_a_joiner_may_deliver_more_than_its_views_but_as_one_run() -> None:
    """B delivers A's 1..5 (its digest started before A installed the view): accepted."""
    logs = [
        log(A, "A", {A: list(range(6)), B: [0, 1, 2, 3]}),
        log(B, "B", {A: [1, 2, 3, 4, 5], B: [0, 1, 2, 3]}),
    ]
    assert check_logs(logs) == []


def test_duplicates_gaps_disorder_and_missing_messages_are_each_reported() -> None:
    logs = [
        log(A, "A", {A: [0, 1, 2, 2, 3, 4, 5], B: [0, 1, 3]}),
        log(B, "B", {A: [2, 3, 5, 4], B: [0, 1, 2]}),
    ]
    problems = check_logs(logs)
    assert len(problems) == 4, problems
    assert "A (aaaaaa) from A (aaaaaa): not one in-order run" in problems[0]
    assert "A (aaaaaa) from B (bbbbbb): not one in-order run" in problems[1]
    assert "B (bbbbbb) from A (aaaaaa): not one in-order run" in problems[2]
    assert problems[3] == "B (bbbbbb) from B (bbbbbb): missing 1 messages, first [3]"


def test_a_crashed_sender_or_receiver_needs_one_run_but_not_every_message() -> None:
    """C crashed: survivors got a prefix of its messages, it got part of theirs: accepted;
    a gap in what survivors got from it is still refused."""
    crashed = log(C, "C", {A: [0, 1]}, survived=False)
    good = [log(A, "A", {A: list(range(6)), C: [0, 1]}), crashed]
    assert check_logs(good) == []
    bad = [log(A, "A", {A: list(range(6)), C: [0, 2]}), crashed]
    assert check_logs(bad) == [
        "A (aaaaaa) from C (cccccc): not one in-order run without duplicates: [0, 2]"
    ]
