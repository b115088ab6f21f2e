"""The application's channel (see `_channel`). Import the public names from `triogroups`."""

from triogroups._channel._facade import Channel
from triogroups._channel._inbox import Received, Sink
from triogroups._channel._open import open_channel
from triogroups._channel._signals import Interrupted, SignalExit
from triogroups._channel._state import StateProvider
from triogroups._channel._views import ViewIterator
from triogroups._errors import (
    ChannelClosed,
    ChannelError,
    JoinFailed,
    MemberGone,
    MessageTooLarge,
    NotAMember,
    StateTransferFailed,
)

__all__ = [
    "Channel",
    "ChannelClosed",
    "ChannelError",
    "Interrupted",
    "JoinFailed",
    "MemberGone",
    "MessageTooLarge",
    "NotAMember",
    "Received",
    "SignalExit",
    "Sink",
    "StateProvider",
    "StateTransferFailed",
    "ViewIterator",
    "open_channel",
]
