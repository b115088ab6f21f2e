"""What UNICAST3's halves may read and call of the protocol: `Unicast3Context`, the whole list.

`Sender` (`_sender`) and `Receiver` (`_receiver`) are typed against this
`typing.Protocol`, not against `Unicast3`, so they import nothing above them
(no ``TYPE_CHECKING`` import of `_protocol`, which closed an import circle)
and a new reach into the protocol shows up here. `Unicast3` implements it:
its properties (the seed's names) and three questions about a peer.
"""

from __future__ import annotations

from typing import Protocol

from triogroups.address import Address

__all__ = ["Unicast3Context"]


class Unicast3Context(Protocol):
    """`Unicast3` as its sender and receiver see it."""

    @property
    def counters(self) -> dict[str, int]: ...

    @property
    def xmit_interval(self) -> float: ...

    @property
    def ack_threshold(self) -> int: ...

    @property
    def conn_expiry_timeout(self) -> float: ...

    @property
    def conn_close_timeout(self) -> float: ...

    @property
    def max_retransmit_time(self) -> float: ...

    @property
    def sync_min_interval(self) -> float: ...

    @property
    def max_xmits_per_interval(self) -> int: ...

    @property
    def max_receive_window(self) -> int: ...

    def request_cap(self, peer: Address) -> int:
        """Most seqnos in an XMIT_REQ to ``peer``."""
        ...

    def is_member(self, peer: Address) -> bool:
        """True if the installed view has ``peer`` (False before any view)."""
        ...

    def may_be_member(self, peer: Address) -> bool:
        """False only if an installed view lacks ``peer``."""
        ...
