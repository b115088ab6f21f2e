"""What RPC may use of its channel: the whole list, as a `typing.Protocol`.

RPC sits below the channel (the channel owns a dispatcher and feeds it what it
delivers), so it never imports the channel; the channel hands it a `ChannelLink`
(`triogroups._channel` implements one over its send path) and this is all the
dispatcher sees: who we are and the view, whether pickles are allowed, where to
start a task, the checks a call passes before it leaves, and three ways to send.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Protocol

import trio

from triogroups.address import Address
from triogroups.message import Message
from triogroups.view import View

__all__ = ["ChannelLink"]


class ChannelLink(Protocol):
    """The channel as RPC sees it."""

    @property
    def address(self) -> Address:
        """This member's address."""
        ...

    @property
    def view(self) -> View:
        """The current view (RuntimeError before the channel joined)."""
        ...

    @property
    def suspected(self) -> Set[Address]:
        """Members of the view that failure detection suspects (live, not a copy)."""
        ...

    @property
    def allow_pickle(self) -> bool:
        """Whether pickled arguments and results may be unpickled here."""
        ...

    @property
    def nursery(self) -> trio.Nursery | None:
        """Where an out-of-band request runs as a task of its own (None before the
        channel runs: then it runs in the dispatcher)."""
        ...

    def check_open(self) -> None:
        """Raise ChannelClosed once the channel is closed."""
        ...

    def check_pickle(self, to: Address | None) -> None:
        """Raise ValueError unless this channel and the receivers (``to``, None: the
        group) take pickles."""
        ...

    def check_member(self, member: Address) -> None:
        """Raise NotAMember unless ``member`` is in the view (TypeError if no Address)."""
        ...

    def check_size(self, size: int) -> None:
        """Raise MessageTooLarge (a ValueError) if a payload of ``size`` bytes cannot leave."""
        ...

    async def send(self, msg: Message, *, urgent: bool = False, join: bool = False) -> None:
        """Send one call down the channel's send path (`Channel.send`'s rules)."""
        ...

    async def send_replies(self, msgs: list[Message]) -> None:
        """Send answers down at once, as one batch, past the application's sends."""
        ...

    def send_replies_nowait(self, msgs: list[Message]) -> None:
        """`send_replies` without awaiting; trio.WouldBlock when the stack cannot take
        them now (nothing was sent)."""
        ...
