"""The transport contract: the one layer that does I/O.

A transport is the bottom of a stack. It is configured like any protocol
(typed properties, a registered name, `stats`), but instead of handlers the
host runs `serve`: it sends every batch that comes down from the layer above
and pushes every batch it receives up, as one batch per wake-up. It never
interprets protocol headers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar
from typing import Protocol as TypingProtocol

import trio

from triogroups.address import Address
from triogroups.events import Item
from triogroups.protocol import Protocol
from triogroups.view import View

__all__ = ["Transport", "UpChannel", "fan_out_targets"]


class UpChannel(TypingProtocol):
    """Where a transport pushes what it receives: a trio memory channel, or in a stack
    the inlet of the layer above, which may run that layer's handler (and the idle
    layers above it) before ``send`` returns. Awaiting it is the transport's
    back-pressure: it blocks once the layers above are busy and their inbox is full."""

    async def send(self, item: Item, /) -> None: ...


def fan_out_targets(
    members: Sequence[Address], next_view: View | None, me: Address | None
) -> list[Address]:
    """Where a multicast goes that is one send per member (TCP): ``members`` and, while
    a view is being installed (`TmpView`), its joiners too, since they get multicasts
    from the digest on; never ``me``, in that order, each once."""
    if next_view is not None:
        members = tuple(dict.fromkeys([*members, *next_view.members]))
    return [m for m in members if m != me]


class Transport(Protocol):
    """Base class of transports (UDP, TCP, the simulated network).

    ``lossless`` says whether a message the transport has accepted can still
    be lost before it reaches the layer above (UDP: yes; TCP: no). NAKACK2's
    no-retransmission mode is refused over a lossy transport.

    ``supports_multicasting`` says whether a multicast reaches every member
    of the cluster, in the view or not (IP multicast, the simulated
    network), or only the members of the current view (TCP sends it to
    each). MERGE3 must find members of other views some other way then.
    """

    lossless: ClassVar[bool] = False
    supports_multicasting: ClassVar[bool] = True

    def port_span(self) -> int | None:
        """How many ports above its first one this transport may listen on (its
        ``port_range``), or None when its port is not taken from a range (any free port,
        or none at all). TCPPING probes that many ports above each listed one by default."""
        return None

    def open(self) -> None:
        """Take what serving needs (bind sockets, attach to the network); at most once.

        The stack host calls it before it reports the layer started, so an
        error here is a start-up error (see `StartupError`); `serve` calls
        it too, for hosts that do not, and releases what it took when it
        ends. Raises with a message naming the cause (the port range, the
        address, the network). Nothing to take by default.
        """

    async def serve(
        self,
        down: trio.MemoryReceiveChannel[Item],
        up: UpChannel,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run until cancelled (opening first, see `open`); call ``task_status.started()``
        once able to send."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        return {}
