"""triogroups: reliable group communication for Python on Trio.

JGroups-style protocols (UNICAST3, NAKACK2, MCAST, ...) as sans-IO state
machines, each hosted as a supervised Trio actor; members are OS processes
talking over UDP multicast or TCP. Everything public is importable from here;
the test kit lives in `triogroups.testing`.
"""

from triogroups import protocols as _protocols  # noqa: F401  (registers protocols)
from triogroups._layer import StartupError
from triogroups.actors import (
    Actor,
    ActorCrashed,
    ActorGone,
    ActorRef,
    ChildSpec,
    CrashReport,
    MailboxFull,
    PermanentError,
    Restart,
    RestartIntensityExceeded,
    Strategy,
    Supervisor,
    spawn,
)
from triogroups.address import Address
from triogroups.config import LayerConfig, StackConfig, preset_names
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
from triogroups.message import Flag, Message
from triogroups.properties import PropertyError
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
from triogroups.stack import Stack
from triogroups.transports import (
    SendToHosts,
    SimNetwork,
    SimTransport,
    TcpTransport,
    Transport,
    UdpTransport,
    open_sim_network,
)
from triogroups.view import Digest, MergeView, View, ViewId
from triogroups.wire import Authenticator, Bundle, WireCodec, WireError, register_header

__version__ = "0.1.0"

__all__ = [
    "Actor",
    "ActorCrashed",
    "ActorGone",
    "ActorRef",
    "Address",
    "Authenticator",
    "BecomeServer",
    "Bundle",
    "ChildSpec",
    "Connect",
    "CrashReport",
    "Digest",
    "Discard",
    "Disconnect",
    "Disconnected",
    "Event",
    "FdAll3",
    "FindMembers",
    "Flag",
    "Frag",
    "Gms",
    "InjectView",
    "LayerConfig",
    "MailboxFull",
    "Mcast",
    "MembersFound",
    "Merge3",
    "MergeView",
    "Message",
    "Mfc",
    "Nakack2",
    "PassThrough",
    "PermanentError",
    "Ping",
    "PingData",
    "PropertyError",
    "Protocol",
    "Restart",
    "RestartIntensityExceeded",
    "SendToHosts",
    "SetDigest",
    "SetPhysicalAddresses",
    "SimNetwork",
    "SimTransport",
    "Stable",
    "Stack",
    "StackConfig",
    "StartupError",
    "Strategy",
    "Supervisor",
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
    "View",
    "ViewChange",
    "ViewId",
    "WireCodec",
    "WireError",
    "open_sim_network",
    "preset_names",
    "protocol_class",
    "protocol_names",
    "register_header",
    "spawn",
]

# The application API: channels, group RPC, actors in a group.
from triogroups._channel import (
    Channel,
    ChannelClosed,
    ChannelError,
    Interrupted,
    JoinFailed,
    MemberGone,
    MessageTooLarge,
    NotAMember,
    Received,
    SignalExit,
    StateProvider,
    StateTransferFailed,
    ViewIterator,
    open_channel,
)
from triogroups._group_actor import GroupActor
from triogroups._rpc import (
    NotExecuted,
    RemoteError,
    RpcDispatcher,
    RpcTimeout,
    Rsp,
    RspList,
    UnknownMethod,
)

# Diagnostics: one member's answer to a probe, and the probe client.
from triogroups.inspector import build_report, probe

# Member processes: launch, watch and restart an application's members.
from triogroups.supervisor import (
    AppError,
    GroupEvent,
    MemberCommands,
    MemberCrashed,
    MemberExited,
    MemberInfo,
    MemberJoined,
    MemberRestarted,
    MemberView,
    ProcessGroup,
    ProcessGroupFailed,
    member_commands,
    open_process_group,
)

__all__ += [
    "Channel",
    "ChannelClosed",
    "ChannelError",
    "GroupActor",
    "Interrupted",
    "JoinFailed",
    "MemberGone",
    "MessageTooLarge",
    "NotAMember",
    "NotExecuted",
    "Received",
    "RemoteError",
    "RpcDispatcher",
    "RpcTimeout",
    "Rsp",
    "RspList",
    "SignalExit",
    "StateProvider",
    "StateTransferFailed",
    "UnknownMethod",
    "ViewIterator",
    "open_channel",
]

__all__ += [
    "AppError",
    "GroupEvent",
    "MemberCommands",
    "MemberCrashed",
    "MemberExited",
    "MemberInfo",
    "MemberJoined",
    "MemberRestarted",
    "MemberView",
    "ProcessGroup",
    "ProcessGroupFailed",
    "member_commands",
    "open_process_group",
]

__all__ += ["build_report", "probe"]

# Public names say they live here, so help() and reprs point at `triogroups`, not at the
# private module that defines them (as trio does). Pickling and RPC error types still
# resolve, since every one of these names is an attribute of this package.
from triogroups._public import set_public_module  # noqa: E402

set_public_module(__name__, {name: globals()[name] for name in __all__})
del set_public_module
