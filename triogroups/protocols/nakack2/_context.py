"""What NAKACK2's helpers may read and call of the protocol: `NakContext`, the whole list.

`Membership` (`_membership`) and `Retransmitter` (`_retransmit`) are typed
against this `typing.Protocol`, not against `Nakack2`, so they import nothing
above them (no ``TYPE_CHECKING`` import of the package that owns them, which
closed an import circle) and a new reach into the protocol shows up here.
`Nakack2` implements it; NAKACK2's state is `NakState` (`_state`), which the
helpers are handed separately.
"""

from __future__ import annotations

from typing import Protocol

from triogroups.address import Address
from triogroups.message import Message
from triogroups.protocols.nakack2._header import NakAckHeader2
from triogroups.view import View

__all__ = ["NakContext"]


class NakContext(Protocol):
    """`Nakack2` as its helpers see it."""

    #: the installed view (`Protocol.view`); `Membership.disconnect` forgets it
    view: View | None

    @property
    def cluster(self) -> str: ...

    @property
    def bundle_size(self) -> int:
        """The largest bundle the transport sends (learned in ``check_stack``)."""
        ...

    # the properties (JGroups names) the helpers read
    @property
    def xmit_interval(self) -> float: ...

    @property
    def use_mcast_xmit(self) -> bool: ...

    @property
    def max_xmit_req_size(self) -> int: ...

    @property
    def become_server_queue_size(self) -> int: ...

    @property
    def non_member_queue_size(self) -> int: ...

    @property
    def max_xmits_per_interval(self) -> int: ...

    @property
    def resend_last_seqno_max_times(self) -> int: ...

    def _me(self) -> Address:
        """This member's address (once started)."""
        ...

    def _control(self, dest: Address | None, hdr: NakAckHeader2, flags: int = 0) -> Message:
        """A control message carrying ``hdr`` (not sent)."""
        ...

    def _send_control(self, dest: Address | None, hdr: NakAckHeader2, flags: int = 0) -> None:
        """Send a control message carrying ``hdr`` down."""
        ...

    def send_up(self, batch: list[Message]) -> None: ...

    def send_down_one(self, msg: Message) -> None: ...
