"""Transports: the bottom layer of a stack, the only one that does I/O."""

from triogroups.transports._addresses import SendToHosts
from triogroups.transports.base import Transport
from triogroups.transports.sim import SimNetwork, SimTransport, open_sim_network
from triogroups.transports.tcp import TcpTransport
from triogroups.transports.udp import UdpTransport

__all__ = [
    "SendToHosts",
    "SimNetwork",
    "SimTransport",
    "TcpTransport",
    "Transport",
    "UdpTransport",
    "open_sim_network",
]
