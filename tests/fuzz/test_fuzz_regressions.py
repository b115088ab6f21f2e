"""What the fuzz targets found, each kept as a named scenario (issue 17).

1. A forged GMS VIEW with view id 2**64 - 1 (the largest msgpack int) was decoded
   and installed by the member it named; its next view (id 2**64) could not be
   encoded, so the coordinator's layer crashed at its next view change. The codec
   now refuses view ids outside 0..2**63 - 1 as malformed.
2. Hostile headers some layers dropped without counting them (principle 7:
   dropped *and counted*): unknown message types at MERGE3, UFC, MFC, PING and
   TCPPING, an INFO without a view at MERGE3, negative credits at UFC and MFC, a
   PURGED from a stranger or a late one at MCAST, an XMIT_REQ asking for no seqnos
   at UNICAST3 (never sent by a member). Each is now counted (``malformed``,
   ``purged_ignored``).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from triogroups import Address, Digest, Flag, Message, View
from triogroups.extend import ViewChange
from triogroups.protocol import protocol_class
from triogroups.protocols import ids
from triogroups.protocols._discovery import DiscoveryHeader
from triogroups.protocols._flow import FcHeader
from triogroups.protocols.gms._header import VIEW, GmsHeader
from triogroups.protocols.mcast import PURGED, McastHeader
from triogroups.protocols.merge3 import INFO, Merge3Header
from triogroups.protocols.stable import StableHeader
from triogroups.protocols.unicast3 import XMIT_REQ, Unicast3Header
from triogroups.testing import SimCluster, open_cluster
from triogroups.view import ViewId
from triogroups.wire import WireCodec, WireError

A = Address(1, "A")
X = Address(3, "X")
N = Address(4, "N")


def _codec() -> WireCodec:
    return WireCodec("test")


def _forged_view(counter: int, members: list[Address], dest: Address | None = None) -> Message:
    view = View(ViewId(counter, members[0]), members)
    return Message(
        dest, b"", flags=Flag.OOB | Flag.NO_RELIABILITY, headers={ids.GMS: GmsHeader(VIEW, view)}
    )


# --- 1. view ids beyond 63 bits ------------------------------------------------------------


def test_fuzz_forged_view_id_2_64_minus_1_is_malformed_on_the_wire() -> None:
    """A view id the next view could not exceed on the wire never reaches GMS."""
    codec = _codec()
    with pytest.raises(WireError) as err:
        codec.decode(codec.encode(A, X, [_forged_view(2**64 - 1, [A, X], A)]))
    assert err.value.reason == "malformed"
    stable = Message(None, headers={ids.STABLE: StableHeader(1, ViewId(2**63, A), Digest())})
    with pytest.raises(WireError):  # a bare ViewId field (STABLE's) is held to the same range
        codec.decode(codec.encode(None, X, [stable]))


def test_fuzz_view_id_2_63_minus_1_is_accepted_and_its_successor_encodes() -> None:
    codec = _codec()
    (msg,) = codec.decode(codec.encode(A, X, [_forged_view(2**63 - 1, [A, X], A)])).messages
    view = msg.headers[ids.GMS].view
    assert view.view_id.id == 2**63 - 1
    codec.encode(None, A, [_forged_view(view.view_id.id + 1, [A])])


async def _send_raw(cluster: SimCluster, src: Address, dest: Address | None, msg: Message) -> None:
    data = WireCodec(cluster.cluster).encode(dest, src, [msg])
    cluster.network.transmit(src, dest, data)
    await trio.sleep(1)


async def test_fuzz_coordinator_survives_a_forged_view_with_the_largest_wire_id(
    autojump_clock: Any,
) -> None:
    """Seen by the fuzzer: X, a stranger, unicasts A a VIEW [A|2**64-1] {A, X}. Before the
    fix A installed it and crashed building its next view (id 2**64 cannot be encoded);
    now the bundle is dropped as malformed, A keeps its view, and C still joins."""
    async with open_cluster(2, "udp", seed=3) as cluster:
        a, b = cluster.members
        stranger = Address(99, "X")
        await _send_raw(
            cluster, stranger, a.address, _forged_view(2**64 - 1, [a.address, stranger], a.address)
        )
        c = await cluster.add_member()
        await cluster.join(c)
        view = await cluster.wait_for_view()
        assert view.members == (a.address, b.address, c.address)
        assert a.stack.crash_reports == []
        assert a.protocol("SIM").stats()["decode_errors"].get("malformed", 0) == 1


# --- 2. hostile headers dropped without a count ---------------------------------------------

#: (protocol, props, hostile header, multicast?, the stats key that must count it)
_UNCOUNTED: list[tuple[str, dict[str, Any], Any, bool, str]] = [
    ("MERGE3", {}, Merge3Header(99, None), True, "malformed"),
    ("MERGE3", {}, Merge3Header(INFO, None), True, "malformed"),
    ("UFC", {}, FcHeader(99, 5), False, "malformed"),
    ("UFC", {}, FcHeader(1, -5), False, "malformed"),
    ("MFC", {}, FcHeader(99, 5), True, "malformed"),
    ("MFC", {}, FcHeader(1, -5), True, "malformed"),
    ("PING", {}, DiscoveryHeader(99, "127.0.0.1", 7800, True), True, "malformed"),
    (
        "TCPPING",
        {"initial_hosts": "127.0.0.1[7800]"},
        DiscoveryHeader(0, "", 0, False),
        False,
        "malformed",
    ),
    ("MCAST", {}, McastHeader(PURGED, 5), False, "purged_ignored"),
    ("UNICAST3", {}, Unicast3Header(XMIT_REQ), False, "malformed"),
]


@pytest.mark.parametrize(("name", "props", "header", "multicast", "key"), _UNCOUNTED)
def test_fuzz_hostile_header_from_a_stranger_is_dropped_and_counted(
    name: str, props: dict[str, Any], header: Any, multicast: bool, key: str
) -> None:
    """Seen by the fuzzer: these headers left no trace at all; a drop must be counted."""
    proto = protocol_class(name)(**props)
    proto.start(A, "test", 0.0)
    proto.down_event(ViewChange(View.create(A, 1, [A, X])), 0.0)
    proto.take_down()
    proto.take_up()
    codec = _codec()
    dest = None if multicast else A
    msg = Message(dest, b"xy", headers={getattr(ids, name): header})
    before = proto.stats()[key]
    proto.up(codec.decode(codec.encode(dest, N, [msg])).messages, 1.0)
    assert proto.stats()[key] == before + 1
    assert proto.take_up() == []


@pytest.mark.parametrize("preset", ["udp", "udp-mcast", "tcp"])
async def test_fuzz_cluster_counts_hostile_headers_of_every_layer_and_keeps_delivering(
    autojump_clock: Any, preset: str
) -> None:
    """The same headers as datagrams from a stranger into a running cluster: each layer
    that has the protocol counts its drop, and the members still deliver to each other."""
    async with open_cluster(3, preset, seed=5) as cluster:
        a, b, c = cluster.members
        stranger = Address(99, "S")
        names = set(cluster.config.names())
        chosen = [row for row in _UNCOUNTED if row[0] in names]
        assert chosen
        before = {(n, k): a.protocol(n).stats()[k] for n, _, _, _, k in chosen}
        for name, _, header, multicast, _ in chosen:
            dest = None if multicast else a.address
            msg = Message(dest, b"xy", flags=Flag.OOB, headers={getattr(ids, name): header})
            await _send_raw(cluster, stranger, dest, msg)
        for name, _, _, _, key in chosen:
            want = before[(name, key)] + sum(1 for r in chosen if r[0] == name)
            assert a.protocol(name).stats()[key] >= want, (name, key)
        for i, member in enumerate((a, b, c)):
            await member.send(f"{member.name}-{i}".encode())
        await cluster.wait_until_delivered()
        assert a.stack.crash_reports == []
