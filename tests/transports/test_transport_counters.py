"""UDP and TCP on 127.0.0.1 keep the counters convention (issue 40 item 5): what they count
is in `counters` and in `stats`, and `reset_stats` zeroes it with the drops by reason."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from triogroups import Address, Message
from triogroups.events import AddPhysicalAddress
from triogroups.transports import TcpTransport, UdpTransport


@pytest.mark.parametrize("cls", [UdpTransport, TcpTransport], ids=["UDP", "TCP"])
async def test_counters_a_socket_transport_resets_its_counters_and_drops(
    open_endpoint: Any, mcast_port: int, cls: type[UdpTransport | TcpTransport]
) -> None:
    """After traffic and a unicast to an unknown member (dropped: no physical address),
    the counters are in `stats`; `reset_stats` zeroes every counter and the drops."""
    props: dict[str, Any] = {"bind_port": 0} if cls is TcpTransport else {"mcast_port": mcast_port}
    a = await open_endpoint(cls, "A", **props)
    b = await open_endpoint(cls, "B", **props)
    await a.down.send(AddPhysicalAddress(b.address, b.physical))
    await a.down.send([Message(b.address, b"%d" % i) for i in range(10)])
    await b.receive(10)
    await a.down.send([Message(Address.random("gone"), b"nowhere")])
    with trio.fail_after(20):
        while not a.transport.stats().get("dropped_no_physical"):
            await trio.sleep(0.01)
    for end in (a, b):
        stats = end.transport.stats()
        assert {k: stats[k] for k in end.transport.counters} == end.transport.counters
    assert a.transport.counters["msgs_sent"] >= 10 and b.transport.counters["msgs_received"] >= 10
    a.transport.reset_stats()
    stats = a.transport.stats()
    assert set(a.transport.counters.values()) == {0}
    assert all(stats[k] == 0 for k in a.transport.counters)
    assert stats["dropped_no_physical"] == 0 and stats["decode_errors"] == {}
