"""What protocol authors need: the sans-IO contract, events, the layers, transports, the codec.

An application needs none of this: it imports `triogroups` (channels, group RPC, actors, the
supervisor, stacks by preset or TOML). Code that writes a protocol of its own, drives one in a
test, hosts a `Stack` by hand or adds a transport imports these names from here:

- the contract: `Protocol` (handlers, outboxes, typed properties, `counters` and `gauges()`
  behind `stats()`), `protocol_class` and `protocol_names` (the registry behind stack files);
- the wire: `register_header` (a protocol's header NamedTuple), `WireCodec`, `Bundle`,
  `WireError`, `Authenticator` (the shared-secret seal);
- the events that travel between layers: `Event` and the concrete ones (`ViewChange`,
  `Connect`, `Disconnect`, `SetDigest`, `Suspect`, ...);
- the built-in layers (`Gms`, `Nakack2`, `Unicast3`, ...) and transports (`UdpTransport`,
  `TcpTransport`, `SimTransport`, the `Transport` base, `SendToHosts`).
"""

from triogroups.events import (
    BecomeServer,
    Connect,
    Disconnect,
    Disconnected,
    Event,
    FindMembers,
    InjectView,
    MembersFound,
    PingData,
    SetDigest,
    SetPhysicalAddresses,
    Suspect,
    Unsuspect,
    ViewChange,
)
from triogroups.protocol import Protocol, protocol_class, protocol_names
from triogroups.protocols import (
    Discard,
    FdAll3,
    Frag,
    Gms,
    Mcast,
    Merge3,
    Mfc,
    Nakack2,
    PassThrough,
    Ping,
    Stable,
    TcpPing,
    Ufc,
    Unicast2,
    Unicast3,
    VerifySuspect,
)
from triogroups.transports import (
    SendToHosts,
    SimTransport,
    TcpTransport,
    Transport,
    UdpTransport,
)
from triogroups.wire import Authenticator, Bundle, WireCodec, WireError, register_header

__all__ = [
    "Authenticator",
    "BecomeServer",
    "Bundle",
    "Connect",
    "Discard",
    "Disconnect",
    "Disconnected",
    "Event",
    "FdAll3",
    "FindMembers",
    "Frag",
    "Gms",
    "InjectView",
    "Mcast",
    "MembersFound",
    "Merge3",
    "Mfc",
    "Nakack2",
    "PassThrough",
    "Ping",
    "PingData",
    "Protocol",
    "SendToHosts",
    "SetDigest",
    "SetPhysicalAddresses",
    "SimTransport",
    "Stable",
    "Suspect",
    "TcpPing",
    "TcpTransport",
    "Transport",
    "UdpTransport",
    "Ufc",
    "Unicast2",
    "Unicast3",
    "Unsuspect",
    "VerifySuspect",
    "ViewChange",
    "WireCodec",
    "WireError",
    "protocol_class",
    "protocol_names",
    "register_header",
]

# Layers defined in private modules (``triogroups.protocols.unicast2._protocol``) say they live
# here, so help() and pickles name a module users can import.
from triogroups._public import set_public_module

set_public_module(
    __name__,
    {n: globals()[n] for n in __all__ if "._" in getattr(globals()[n], "__module__", "")},
    root="triogroups",
)
del set_public_module
