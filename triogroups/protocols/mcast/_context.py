"""What MCAST's sides may read and call of the protocol: `McastContext`, the whole list.

`Sender` (`_sender`), `Receiver` (`_receiver`) and `Membership` (`_membership`)
are typed against this `typing.Protocol`, not against `Mcast`, so they import
nothing above them (no ``TYPE_CHECKING`` import of the package that owns them)
and a new reach into the protocol shows up here. `Mcast` implements it; MCAST's
state is `McastState` (`_state`), which the sides are handed separately.
"""

from __future__ import annotations

from typing import Protocol

from triogroups.address import Address
from triogroups.events import Event
from triogroups.message import Message
from triogroups.view import View

__all__ = ["McastContext"]


class McastContext(Protocol):
    """`Mcast` as its sides see it."""

    #: our address (`Protocol.local_address`; None before start)
    local_address: Address | None
    #: the installed view (`Protocol.view`; None before the first, and after we left)
    view: View | None

    @property
    def name(self) -> str: ...

    # the properties (the seed's names) the sides read
    @property
    def capacity(self) -> int: ...

    @property
    def ack_threshold(self) -> int: ...

    @property
    def xmit_interval(self) -> float: ...

    @property
    def max_xmits_per_interval(self) -> int: ...

    def send_down(self, batch: list[Message]) -> None: ...

    def send_down_one(self, msg: Message) -> None: ...

    def send_up(self, batch: list[Message]) -> None: ...

    def pass_up(self, event: Event) -> None: ...
