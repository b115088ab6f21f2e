"""The delivery-contract checker catches each kind of violation (so it can fail)."""

from __future__ import annotations

import pytest

from triogroups import Address
from triogroups.testing import ContractViolation, DeliveryLog, open_cluster

A = Address.random("A")
B = Address.random("B")


def _log(delivered: list[bytes], *, oob: list[bytes] | None = None) -> DeliveryLog:
    log = DeliveryLog()
    for p in (b"1", b"2", b"3"):
        log.record_send(A, None, p, oob=False)
    for p in oob or []:
        log.record_send(A, None, p, oob=True)
    for p in delivered:
        log.record_delivery(B, A, p)
    return log


def test_complete_in_order_delivery_passes() -> None:
    _log([b"1", b"2", b"3"]).check([B], [A])


def test_duplicate_delivery_is_a_violation() -> None:
    with pytest.raises(ContractViolation, match="more than once"):
        _log([b"1", b"1", b"2", b"3"]).check([B], [A])


def test_out_of_order_delivery_is_a_violation() -> None:
    with pytest.raises(ContractViolation, match="out of order at position 1"):
        _log([b"1", b"3", b"2"]).check([B], [A])


def test_missing_message_is_a_violation_only_when_complete() -> None:
    _log([b"1", b"2"]).check([B], [A], complete=False)
    with pytest.raises(ContractViolation, match=r"missing 1 multicast\(s\).*b'3'"):
        _log([b"1", b"2"]).check([B], [A])


def test_unknown_message_is_a_violation() -> None:
    with pytest.raises(ContractViolation, match="never sent"):
        _log([b"1", b"x"]).check([B], [A], complete=False)


def test_oob_may_overtake_but_must_arrive_exactly_once() -> None:
    _log([b"o2", b"1", b"o1", b"2", b"3"], oob=[b"o1", b"o2"]).check([B], [A])
    with pytest.raises(ContractViolation, match="missing 1 OOB"):
        _log([b"1", b"o1", b"2", b"3"], oob=[b"o1", b"o2"]).check([B], [A])


def test_unicasts_and_multicasts_are_separate_fifo_streams() -> None:
    log = _log([b"u1", b"1", b"2", b"u2", b"3"])
    log.record_send(A, B, b"u1", oob=False)
    log.record_send(A, B, b"u2", oob=False)
    log.check([B], [A])


def test_gaps_allow_a_subsequence_in_send_order_but_not_disorder() -> None:
    _log([b"1", b"3"]).check([B], [A], gaps=True)
    with pytest.raises(ContractViolation, match=r"out of order: b'1' after b'3'"):
        _log([b"3", b"1"]).check([B], [A], gaps=True)
    with pytest.raises(ContractViolation, match="more than once"):
        _log([b"1", b"3", b"3"]).check([B], [A], gaps=True)


def test_a_payload_repeated_by_one_sender_is_refused_by_name() -> None:
    """Test-kit gap (issue 12): messages are identified by sender and payload, so a sender
    that repeats a payload makes the check meaningless; it says so instead of reporting a
    duplicate delivery."""
    log = _log([b"1", b"2", b"3", b"1"])
    log.record_send(A, B, b"1", oob=False)
    with pytest.raises(ContractViolation, match=rf"^{A} sent payload b'1' more than once: "):
        log.check([B], [A], complete=False)


def test_the_same_payload_from_two_senders_or_to_two_receivers_is_two_messages() -> None:
    log = _log([b"1", b"2", b"3"])
    log.record_send(B, None, b"1", oob=False)
    log.record_delivery(B, B, b"1")
    log.record_send(A, B, b"u", oob=False)
    log.record_send(A, A, b"u", oob=False)
    log.check([B], [A, B], complete=False)


def test_a_multicast_repeating_a_unicast_payload_is_refused() -> None:
    log = _log([])
    log.record_send(A, B, b"u", oob=False)
    log.record_send(A, None, b"u", oob=True)
    with pytest.raises(ContractViolation, match="sent payload b'u' more than once"):
        log.check([B], [A], complete=False)


async def test_check_contract_on_a_cluster_refuses_repeated_payloads(
    autojump_clock: object,
) -> None:
    async with open_cluster(2, "sim", seed=3) as cluster:
        a = cluster.members[0]
        await a.send(b"hi")
        await a.send(b"hi")
        with pytest.raises(ContractViolation, match="sent payload b'hi' more than once"):
            await cluster.wait_until_delivered(timeout=5)
