"""The protocol layers, one sans-IO module each; importing registers them by name."""

from triogroups.protocols.discard import Discard
from triogroups.protocols.passthrough import PassThrough
from triogroups.protocols.ping import Ping
from triogroups.protocols.tcpping import TcpPing

__all__ = ["Discard", "PassThrough", "Ping", "TcpPing"]
