"""The udp and tcp presets build, with the transports and discovery this issue adds."""

from __future__ import annotations

import pytest

from triogroups import StackConfig
from triogroups.extend import Ping, TcpPing, TcpTransport, UdpTransport


@pytest.mark.parametrize(
    ("preset", "transport", "discovery"),
    [("udp", UdpTransport, Ping), ("tcp", TcpTransport, TcpPing)],
)
def test_preset_starts_with_its_transport_and_discovery(
    preset: str, transport: type, discovery: type
) -> None:
    layers = StackConfig.preset(preset).build()
    assert isinstance(layers[0], transport) and isinstance(layers[1], discovery)


def test_udp_preset_keeps_traffic_on_this_host_by_default() -> None:
    udp = StackConfig.preset("udp").build()[0]
    assert isinstance(udp, UdpTransport)
    assert (udp.bind_addr, udp.ip_ttl, udp.mcast_addr) == ("127.0.0.1", 0, "228.8.8.8")
