"""One counters convention (issue 40 item 5): every protocol and transport counts in its
`Protocol.counters` (and `Protocol.durations`), `stats` reports them, `reset_stats` zeroes
them; both methods live in the base class only."""

from __future__ import annotations

import pytest
import trio

import triogroups.protocols
import triogroups.transports
from triogroups import Address, Message, StackConfig
from triogroups.config import preset_names
from triogroups.protocol import Protocol, protocol_class, protocol_names
from triogroups.testing import open_cluster
from triogroups.transports.base import Transport
from triogroups.wire import MAX_DATAGRAM

assert triogroups.protocols and triogroups.transports  # every protocol registered

_PACKAGE = [
    protocol_class(name)
    for name in protocol_names()
    if protocol_class(name).__module__.startswith("triogroups.")
]


def _hidden_counters(proto: Protocol) -> list[str]:
    """Stats keys backed by an int attribute of the protocol: counters kept beside
    `counters` (the old plain-attribute way), which `reset_stats` would not see."""
    declared = type(proto).declared_properties()
    return [
        key
        for key, value in proto.stats().items()
        if key not in declared and type(value) is int and type(getattr(proto, key, None)) is int
    ]


@pytest.mark.parametrize("cls", _PACKAGE, ids=lambda c: c.name)
def test_counters_no_protocol_writes_its_own_stats_or_reset_stats(cls: type[Protocol]) -> None:
    """`stats` and `reset_stats` are the base class's (a transport's `reset_stats` also
    clears its two drop logs); a protocol adds gauges through `gauges` only."""
    assert cls.stats is Protocol.stats, f"{cls.name} overrides stats"
    assert cls.reset_stats in (Protocol.reset_stats, Transport.reset_stats), cls.name


@pytest.mark.parametrize("cls", _PACKAGE, ids=lambda c: c.name)
def test_counters_every_declared_counter_is_in_stats_from_the_start(
    cls: type[Protocol],
) -> None:
    """A fresh instance reports each of its `COUNTERS` as 0 and each `DURATIONS` as 0.0."""
    proto = cls()
    stats = proto.stats()
    assert set(cls.COUNTERS) <= set(stats), cls.name
    assert all(stats[key] == 0 for key in cls.COUNTERS)
    assert all(stats[key] == 0.0 for key in cls.DURATIONS)
    assert proto.counters.keys() == set(cls.COUNTERS)


#: The spark preset's members find nobody outside a Spark stage (empty ``initial_hosts``,
#: filled in by the group's runner): it forms no cluster here. Its layers are those of tcp.
_PRESETS = [p for p in preset_names() if p != "spark"]


@pytest.mark.parametrize("preset", _PRESETS)
async def test_counters_reset_stats_zeroes_every_counter_in_every_preset(
    autojump_clock: trio.testing.MockClock, preset: str
) -> None:
    """On each preset's stack (on the simulated network), after multicasts and unicasts
    every layer's stats include its counters, no counter lives outside `counters`, and
    the stack's `reset_stats` zeroes every counter and duration of every layer while the
    gauges stay."""
    config = StackConfig.preset(preset)
    config = config.insert_above(config.names()[0], "PASS")
    async with open_cluster(3, config, cluster=f"counters-{preset}") as cluster:
        a, b, _ = cluster.members
        for i in range(10):
            await a.send(f"m{i}".encode())
            await a.send(f"u{i}".encode(), to=b.address)
        await cluster.wait_until_delivered()
        stack = b.stack
        counted: dict[str, int] = {}
        for proto in stack.protocols:
            stats = proto.stats()
            assert {k: stats[k] for k in proto.counters} == proto.counters, proto.name
            assert {k: stats[k] for k in proto.durations} == proto.durations, proto.name
            assert _hidden_counters(proto) == [], proto.name
            counted[proto.name] = sum(proto.counters.values())
        assert all(counted[name] > 0 for name in ("PASS", "GMS", "UNICAST3") if name in counted)
        stack.reset_stats()
        for proto in stack.protocols:
            stats = proto.stats()
            assert set(proto.counters.values()) <= {0}, proto.name
            assert set(proto.durations.values()) <= {0.0}, proto.name
            assert all(stats[k] == 0 for k in proto.counters), proto.name


def test_counters_a_transports_drops_by_reason_are_reset_with_its_counters() -> None:
    """The simulated transport counts what it cannot decode by reason in its drop log, which
    `reset_stats` clears with the counters (it kept a dict of its own that no reset saw)."""
    transport = protocol_class("SIM")()
    assert isinstance(transport, Transport)
    transport.drops.count("truncated", 2)
    transport.counters["bundles_received"] += 1
    assert transport.stats()["decode_errors"] == {"truncated": 2}
    transport.reset_stats()
    assert transport.stats()["decode_errors"] == {}
    assert transport.stats()["bundles_received"] == 0


@pytest.mark.parametrize(
    ("name", "props", "key"),
    [
        ("PASS", {}, "msgs_up"),
        ("DELAY", {"in_delay": 1.0}, "delayed"),
        ("DUPL", {"incoming_copies": 1}, "copies"),
    ],
)
def test_counters_a_probe_reset_zeroes_what_pass_delay_and_dupl_counted(
    name: str, props: dict[str, object], key: str
) -> None:
    """PASS, DELAY and DUPL kept their counters as plain attributes, which the base
    `reset_stats` never saw: a probe's reset left them counting on."""
    proto = protocol_class(name)(**props)
    proto.start(Address.random("A"), "c", 0.0)
    proto.up([Message(None, b"x", src=Address.random("B"))], 0.0)
    assert proto.stats()[key] == 1
    proto.reset_stats()
    assert proto.stats()[key] == 0


async def test_counters_a_transports_shared_secret_counters_are_reset_and_its_nonces_go_on() -> (
    None
):
    """The keyring's counters (``shared_secret`` in the transport's stats) were left out of
    a probe's reset; they are zeroed now, while the nonce counter, which must never repeat,
    goes on."""
    transport = protocol_class("SIM")()
    assert isinstance(transport, Transport)
    transport.give_secret(b"a test secret of enough bytes")
    transport.start(Address.random("A"), "c", 0.0)
    codec = transport.make_codec(MAX_DATAGRAM)
    first = codec.encode(None, transport.local_address, [Message(None, b"x")])
    assert transport.stats()["shared_secret"]["sealed"] == 1
    transport.reset_stats()
    assert transport.stats()["shared_secret"]["sealed"] == 0
    second = codec.encode(None, transport.local_address, [Message(None, b"x")])
    assert first != second  # a fresh nonce: the same message seals differently
    assert transport.stats()["shared_secret"]["sealed"] == 1
