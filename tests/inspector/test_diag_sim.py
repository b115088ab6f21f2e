"""DIAG's request handling (`Responder`) on the simulated network, on virtual time: what is
answered, what is dropped and counted, reset and run-time set (issue 16)."""

from __future__ import annotations

from typing import Any

import trio

from triogroups import Address, Message, Stack, StackConfig
from triogroups._diagnostics import Responder
from triogroups._diagnostics._messages import decode_map, encode_map
from triogroups._keyring import Keyring
from triogroups.inspector import ANY_CLUSTER, build_report
from triogroups.protocols import PassThrough
from triogroups.testing import SimMember, open_cluster, wait_until
from triogroups.transports.sim import open_sim_network
from triogroups.wire import MAX_DATAGRAM, WireCodec

PROBE = Address.random("probe")


def _request(cluster: str, **body: Any) -> bytes:
    return encode_map(WireCodec(cluster), None, PROBE, {"op": "report", "id": 7, **body})


async def _ask(responder: Responder, data: bytes) -> dict[str, Any] | None:
    answer = await responder.answer(data, MAX_DATAGRAM)
    if answer is None:
        return None
    src, body = decode_map(WireCodec(responder.stack.cluster, max_size=1 << 24), answer)
    assert src == responder.stack.address
    return body


async def test_responder_answers_its_cluster_and_any_cluster_and_drops_the_rest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request for this cluster or for any cluster is answered with the report; one for
    another cluster, garbage, a bundle that is not a request, and an unknown op are not,
    and each is counted by its reason; a request naming another member is not for it."""
    async with open_cluster(2, "udp", cluster="diag") as cluster:
        responder = Responder(cluster[0].stack)
        answer = await _ask(responder, _request("diag"))
        assert answer is not None and answer["probe_id"] == 7 and answer["name"] == "A"
        assert answer["view"]["members"] == ["A", "B"]
        assert await _ask(responder, _request(ANY_CLUSTER)) is not None
        codec = WireCodec("diag")
        not_a_map = codec.encode(None, PROBE, [Message(None, b"\x01", src=PROBE)])
        for data in (
            _request("other"),
            b"\x00garbage",
            b"TG\x01",
            not_a_map,
            _request("diag", op="shutdown"),
        ):
            assert await responder.answer(data, MAX_DATAGRAM) is None
        assert await _ask(responder, _request("diag", members=["B"])) is None
        assert (await _ask(responder, _request("diag", members=["A"]))) is not None
    assert responder.stats()["dropped"] == {
        "foreign_cluster": 1,
        "bad_magic": 1,
        "truncated": 1,
        "malformed": 1,
        "bad_request": 1,
    }
    assert responder.counters["requests"] == 4 and responder.counters["answers"] == 3
    assert responder.counters["not_for_me"] == 1


async def test_reliable_protocols_report_the_shared_counters_and_reset_zeroes_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After multicasts and unicasts, NAKACK2 and UNICAST3 report sent, received, delivered
    and per-peer windows under the shared keys; the transport bytes and bundle sizes; a
    reset request zeroes every counter and the answer already shows it."""
    async with open_cluster(3, "udp", cluster="counts") as cluster:
        a, b, _ = cluster.members
        for i in range(20):
            await a.send(f"m{i}".encode())
            await a.send(f"u{i}".encode(), to=b.address)
        await cluster.wait_until_delivered()
        report = build_report(b.stack)
        nak, uni, sim = (report["stats"][p] for p in ("NAKACK2", "UNICAST3", "SIM"))
        assert nak["received"] >= 20 and nak["delivered"] >= 20
        assert nak["peer_windows"]["A"]["highest_delivered"] >= 20
        assert uni["received"] >= 20 and uni["delivered"] >= 20  # and GMS's unicasts
        assert uni["peer_windows"]["A"]["highest_received"] >= 20
        assert build_report(a.stack)["stats"]["UNICAST3"]["sent"] >= 20
        assert build_report(a.stack)["stats"]["NAKACK2"]["sent"] >= 20
        assert sim["bundles_received"] > 0
        assert report["host"]["layers"]["NAKACK2"]["msgs_up"] > 0
        reset = await _ask(Responder(b.stack), _request("counts", op="reset"))
        assert reset is not None
    for name in ("NAKACK2", "UNICAST3"):
        stats = reset["stats"][name]
        assert stats["sent"] == stats["received"] == stats["delivered"] == 0
        assert stats["peer_windows"]["A"]["highest_delivered"] >= 20  # gauges stay
    assert reset["stats"]["SIM"]["bundles_received"] == 0
    assert reset["host"]["layers"]["NAKACK2"]["msgs_up"] == 0


async def test_set_changes_a_property_at_run_time_or_answers_why_not(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """NAKACK2's xmit_interval and DISCARD's up_loss change at run time and act at once;
    an unknown protocol or a bad value is answered with the error, nothing changes."""
    config = StackConfig.preset("udp").insert_above("FD_ALL3", "DISCARD")
    async with open_cluster(2, config, cluster="set") as cluster:
        a, b = cluster.members
        responder = Responder(b.stack)

        async def set_(protocol: str, key: str, value: Any) -> dict[str, Any]:
            body = {"protocol": protocol, "property": key, "value": value}
            answer = await _ask(responder, _request("set", op="set", **body))
            assert answer is not None
            return answer

        assert "error" not in await set_("NAKACK2", "xmit_interval", "2s")
        assert b.stack.protocol("NAKACK2").next_deadline() > trio.current_time() + 1.5
        assert "no protocol 'NOPE'" in (await set_("NOPE", "x", 1))["error"]
        bad = await set_("NAKACK2", "xmit_interval", "soon")
        assert "xmit_interval" in bad["error"]
        assert b.stack.protocol("NAKACK2").properties()["xmit_interval"] == 2.0
        assert "error" not in await set_("DISCARD", "up_loss", 1.0)
        await _sends(a, 10)
        await trio.sleep(1)
        assert b.stack.protocol("DISCARD").stats()["dropped_up"] >= 10


async def test_a_reset_or_set_answer_says_whether_it_was_applied_even_when_cut_short(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 38 item 5: ``applied`` tells a probe whether a reset or set was carried out (its
    exit status), and an answer too large for its datagram keeps the refusal beside the
    too-large note instead of replacing it; a plain report has no ``applied``."""
    async with open_cluster(1, "udp", cluster="applied") as cluster:
        responder = Responder(cluster.members[0].stack)
        body = {"op": "set", "protocol": "NAKACK2", "property": "nope", "value": 1}
        refused = await _ask(responder, _request("applied", **body))
        assert refused is not None and refused["applied"] is False
        assert "nope" in refused["error"]
        reset = await _ask(responder, _request("applied", op="reset"))
        assert reset is not None and reset["applied"] is True and "error" not in reset
        report = await _ask(responder, _request("applied"))
        assert report is not None and "applied" not in report
        whole = await responder.answer(_request("applied", **body), MAX_DATAGRAM)
        assert whole is not None
        limit = len(whole) - 1  # one byte short: the answer goes without its stats
        small = await responder.answer(_request("applied", **body), limit)
        assert small is not None
        _src, cut = decode_map(WireCodec("applied", max_size=1 << 24), small)
        assert cut["applied"] is False and "stats" not in cut
        assert "nope" in cut["error"] and f"report larger than {limit} bytes" in cut["error"]


async def _sends(member: SimMember, n: int) -> None:
    for i in range(n):
        await member.send(f"x{i}".encode())


class _BrokenStats(PassThrough):
    """A layer whose stats() fails until told otherwise."""

    name = "DIAG_TEST_BROKEN_STATS"
    broken = True

    def stats(self) -> dict[str, Any]:
        if self.broken:
            raise RuntimeError("stats failed")
        return {}


async def test_a_failing_stats_costs_that_answer_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A protocol whose stats() raises makes DIAG skip that answer (logged, counted as an
    error); the member and its diagnostics carry on and answer once stats() works."""
    config = StackConfig.of("SIM", "DIAG_TEST_BROKEN_STATS")
    async with open_cluster(1, config, cluster="broken") as cluster:
        responder = Responder(cluster[0].stack)
        assert await _ask(responder, _request("broken")) is None
        assert responder.counters["errors"] == 1
        layer = cluster[0].stack.protocol("DIAG_TEST_BROKEN_STATS")
        assert isinstance(layer, _BrokenStats)
        layer.broken = False
        assert await _ask(responder, _request("broken")) is not None


class _Crasher(PassThrough):
    """Raises when a message with payload b"boom" goes down."""

    name = "DIAG_TEST_CRASHER"

    def down(self, batch: list[Message], now: float) -> None:
        if any(m.payload == b"boom" for m in batch):
            raise RuntimeError("told to crash")
        self.send_down(batch)


async def test_answers_follow_the_incarnation_and_its_rotated_secret(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After a rotation to a new secret and a crash, the new incarnation answers as itself
    and seals with the new key only: a probe that holds just the new secret opens it."""
    old, new = b"the old secret of this cluster", b"the new secret of this cluster"
    async with open_sim_network() as net, trio.open_nursery() as nursery:
        config = StackConfig.of(("SIM", {"network": net.name}), "PASS", "DIAG_TEST_CRASHER")
        stack = Stack(config, "sealed", "A", secret=old)
        await nursery.start(stack.run)
        responder = Responder(stack)
        assert await _sealed_ask(responder, old) == f"{stack.address.uuid:032x}"
        stack.install_secret(new)
        await stack.send([Message(None, b"boom")])
        await wait_until(lambda: stack.incarnation >= 2, timeout=10, interval=0.01)
        assert await _sealed_ask(responder, new) == f"{stack.address.uuid:032x}"
        nursery.cancel_scope.cancel()


async def _sealed_ask(responder: Responder, secret: bytes) -> str | None:
    """The address in the answer to a request sealed with ``secret`` (None: no answer)."""
    keyring = Keyring("sealed", secret, clock=trio.current_time)
    codec = WireCodec("sealed", keyring=keyring)
    answer = await responder.answer(encode_map(codec, None, PROBE, {"op": "report"}), MAX_DATAGRAM)
    if answer is None:
        return None
    _src, body = decode_map(codec, answer)
    address: str = body["address"]
    return address
