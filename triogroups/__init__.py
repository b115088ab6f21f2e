"""triogroups: reliable group communication for Python on Trio.

JGroups-style protocols (UNICAST3, NAKACK2, MCAST, ...) as sans-IO state
machines, each hosted as a supervised Trio actor; members are OS processes
talking over UDP multicast or TCP. Everything an application uses is importable
from here; what protocol authors need (the sans-IO contract, events, layers,
transports, the wire codec) from `triogroups.extend`; the test kit lives in
`triogroups.testing`.
"""

from triogroups import protocols as _protocols  # noqa: F401  (registers protocols)
from triogroups._error_root import TriogroupsError
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
from triogroups.message import Flag, Message
from triogroups.properties import PropertyError
from triogroups.stack import Stack
from triogroups.transports import SimNetwork, open_sim_network
from triogroups.view import Digest, MergeView, View, ViewId

__version__ = "0.1.0"

__all__ = [
    "Actor",
    "ActorCrashed",
    "ActorGone",
    "ActorRef",
    "Address",
    "ChildSpec",
    "CrashReport",
    "Digest",
    "Flag",
    "LayerConfig",
    "MailboxFull",
    "MergeView",
    "Message",
    "PermanentError",
    "PropertyError",
    "Restart",
    "RestartIntensityExceeded",
    "SimNetwork",
    "Stack",
    "StackConfig",
    "StartupError",
    "Strategy",
    "Supervisor",
    "TriogroupsError",
    "View",
    "ViewId",
    "open_sim_network",
    "preset_names",
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
from triogroups.blocks import (
    Counter,
    CounterService,
    LocationIterator,
    Lock,
    LockService,
    ReplicatedDict,
    Singleton,
    open_counter_service,
    open_lock_service,
    open_replicated_dict,
    open_singleton,
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

# Building blocks over a channel: cluster-wide locks with fencing tokens, counters, a
# cluster singleton, a replicated dictionary that converges.
__all__ += [
    "Counter",
    "CounterService",
    "LocationIterator",
    "Lock",
    "LockService",
    "ReplicatedDict",
    "Singleton",
    "open_counter_service",
    "open_lock_service",
    "open_replicated_dict",
    "open_singleton",
]

# Public names say they live here, so help() and reprs point at `triogroups`, not at the
# private module that defines them (as trio does). Pickling and RPC error types still
# resolve, since every one of these names is an attribute of this package.
from triogroups._public import set_public_module  # noqa: E402

set_public_module(__name__, {name: globals()[name] for name in __all__})
del set_public_module
