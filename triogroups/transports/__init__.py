"""Transports: the bottom layer of a stack, the only one that does I/O."""

from triogroups.transports.base import Transport
from triogroups.transports.sim import SimNetwork, SimTransport, open_sim_network

__all__ = ["SimNetwork", "SimTransport", "Transport", "open_sim_network"]
