"""The errors an application sees from a channel, an RPC call or a state transfer.

Data only. A closed channel (`ChannelClosed`: misuse, after the fact), an
address that is not in the view (`NotAMember`) and a member that went away
while we waited for it (`MemberGone`) are different failures with different
remedies, so they are different classes.
"""

from __future__ import annotations

from triogroups._error_root import TriogroupsError
from triogroups.address import Address

__all__ = [
    "ChannelClosed",
    "ChannelError",
    "JoinFailed",
    "MemberGone",
    "MessageTooLarge",
    "NotAMember",
    "StateTransferFailed",
]


class ChannelError(TriogroupsError):
    """Base class of the channel's own errors."""


class ChannelClosed(ChannelError):
    """The channel was closed (the member left the group); it sends and receives no more."""


class NotAMember(ChannelError):
    """A message or call was addressed to a member that is not in the current view."""

    def __init__(self, member: Address, message: str) -> None:
        super().__init__(message)
        self.member = member


class MemberGone(ChannelError):
    """A member left the view or was suspected while we waited for its answer."""

    def __init__(self, member: Address, message: str) -> None:
        super().__init__(message)
        self.member = member


class MessageTooLarge(ChannelError, ValueError):
    """A payload is larger than the stack can carry (FRAG's max_message_size, or a bundle)."""

    def __init__(self, size: int, limit: int, message: str) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class JoinFailed(ChannelError):
    """No view including this member was installed in time."""


class StateTransferFailed(ChannelError):
    """A joiner did not get the group's state in time."""
