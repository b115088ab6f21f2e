"""The real demo's checker (`_demo._check.check_logs`): what it accepts and what it refuses."""

from __future__ import annotations

from triogroups._demo._check import MemberLog, check_logs

A, B, C = "a" * 32, "b" * 32, "c" * 32


def log(uuid: str, name: str, delivered: dict[str, list[int]], survived: bool = True) -> MemberLog:
    """A sent 6 messages, B joining A's view from seqno 2 on; B sent 4 with both in view."""
    sent = {A: 6, B: 4, C: 3}[uuid]
    views = {
        A: [(0, "1:a", [A]), (2, "2:a", [A, B])],
        B: [(0, "2:a", [A, B])],
        C: [(0, "3:a", [A, B, C])],
    }[uuid]
    return MemberLog(uuid, name, sent, views, delivered, survived)


def test_sent_to_counts_only_messages_sent_while_the_receiver_was_in_the_view() -> None:
    assert log(A, "A", {}).sent_to(B, {"2:a"}) == [2, 3, 4, 5]
    assert log(A, "A", {}).sent_to(A, {"1:a", "2:a"}) == [0, 1, 2, 3, 4, 5]


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
    assert "A (aaaaaa) from A (aaaaaa): duplicates or out of order" in problems[0]
    assert problems[1] == "A (aaaaaa) from B (bbbbbb): missing 1 messages, first [2]"
    assert "B (bbbbbb) from A (aaaaaa): duplicates or out of order" in problems[2]
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


def test_a_receiver_excluded_in_the_senders_next_view_need_not_get_that_views_messages() -> None:
    """A sent 0-1 with B in view, then excluded B (false suspicion), sent 2-3, merged B back
    and sent 4-5: B needs 4-5 only; the gap 0-1 / 4-5 is accepted, a missing 4 is not."""
    views = [(0, "2:a", [A, B]), (2, "3:a", [A]), (4, "4:a", [A, B])]
    sender = MemberLog(A, "A", 6, views, {A: list(range(6))}, True)
    b_views = [(0, "2:a", [A, B]), (0, "4:a", [A, B])]
    assert sender.sent_to(B, {"2:a", "4:a"}) == [4, 5]
    fine = MemberLog(B, "B", 0, b_views, {A: [0, 4, 5]}, True)
    assert check_logs([sender, fine]) == []
    short = MemberLog(B, "B", 0, b_views, {A: [0, 5]}, True)
    assert check_logs([sender, short]) == [
        "B (bbbbbb) from A (aaaaaa): missing 1 messages, first [4]"
    ]
    twice = MemberLog(B, "B", 0, b_views, {A: [4, 4, 5]}, True)
    assert check_logs([sender, twice]) == [
        "B (bbbbbb) from A (aaaaaa): duplicates or out of order: [4, 4, 5]"
    ]


def test_views_installed_after_the_last_message_still_decide_what_was_due() -> None:
    """A sent everything in [A, B]; its next view (no messages in it) left B out: nothing was
    due to B. Had the next view kept B, all of it would be."""
    gone = MemberLog(A, "A", 3, [(0, "2:a", [A, B]), (3, "3:a", [A])], {}, True)
    assert gone.sent_to(B, {"2:a"}) == []
    kept = MemberLog(A, "A", 3, [(0, "2:a", [A, B]), (3, "3:a", [A, B, C])], {}, True)
    assert kept.sent_to(B, {"2:a", "3:a"}) == [0, 1, 2]


def test_a_view_listing_the_receiver_that_it_never_installed_promises_it_nothing() -> None:
    """A's views 2 and 3 list B, but B gave up joining before A's JOIN_RSP came and started
    its own group (view 1:b); the merge view 4:b unites them. B needs A's messages of 4:b
    only, not the 0-4 that A sent in views B never installed."""
    a_views = [(0, "2:a", [A, B]), (3, "3:a", [A, B, C]), (5, "4:b", [B, A, C])]
    sender = MemberLog(A, "A", 7, a_views, {A: list(range(7))}, True)
    b_views = [(0, "1:b", [B]), (0, "4:b", [B, A, C])]
    receiver = MemberLog(B, "B", 0, b_views, {A: [5, 6]}, True)
    assert check_logs([sender, receiver]) == []
    assert check_logs([sender, MemberLog(B, "B", 0, b_views, {A: [6]}, True)]) == [
        "B (bbbbbb) from A (aaaaaa): missing 1 messages, first [5]"
    ]
