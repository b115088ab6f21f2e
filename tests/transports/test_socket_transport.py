"""UDP and TCP declare their shared socket properties once, in `SocketTransport` (issue 40
item 8; JGroups keeps them in TP, the transport configuration both extend)."""

from __future__ import annotations

import pytest

from triogroups.properties import PropertyError
from triogroups.transports import TcpTransport, UdpTransport
from triogroups.transports._socket_transport import SocketTransport

_SHARED = ("bind_addr", "port_range", "logical_addr_cache_max_size")


@pytest.mark.parametrize("name", _SHARED)
def test_socket_transport_udp_and_tcp_share_one_declaration(name: str) -> None:
    """The same declaration object (default, doc, rule) in both transports."""
    udp, tcp = UdpTransport.declared_properties(), TcpTransport.declared_properties()
    assert udp[name] is tcp[name] is SocketTransport.declared_properties()[name]


def test_socket_transport_bind_port_has_one_rule_and_each_transports_default() -> None:
    """``bind_port``: UDP binds any free port, TCP starts at 7800 (where TCPPING looks);
    both refuse the same values with the same words."""
    assert UdpTransport().bind_port == 0 and TcpTransport().bind_port == 7800
    for cls in (UdpTransport, TcpTransport):
        with pytest.raises(PropertyError, match=r"bind_port must be in 0\.\.65535"):
            cls(bind_port=70000)


def test_socket_transport_stats_have_the_shared_keys() -> None:
    """Both report the shared gauges (bound address, buffers, address table, drops)."""
    shared = {"physical", "buffers", "dropped_no_physical", "decode_errors", "avg_bundle_msgs_sent"}
    for transport in (UdpTransport(), TcpTransport()):
        assert shared <= transport.stats().keys()
