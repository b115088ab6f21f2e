"""The transport contract: the one layer that does I/O.

A transport is the bottom of a stack. It is configured like any protocol
(typed properties, a registered name, `stats`), but instead of handlers the
host runs `serve`: it sends every batch that comes down from the layer above
and pushes every batch it receives up, as one batch per wake-up. It never
interprets protocol headers.
"""

from __future__ import annotations

from typing import Any, ClassVar

import trio

from triogroups.events import Item
from triogroups.protocol import Protocol

__all__ = ["Transport"]


class Transport(Protocol):
    """Base class of transports (UDP, TCP, the simulated network).

    ``lossless`` says whether a message the transport has accepted can still
    be lost before it reaches the layer above (UDP: yes; TCP: no). NAKACK2's
    no-retransmission mode is refused over a lossy transport.

    ``supports_multicast`` says whether a multicast reaches members outside
    the current view (UDP: yes, IP multicast; TCP: no, it is written to each
    view member). MERGE3 must find members of other views some other way
    where it does not.
    """

    lossless: ClassVar[bool] = False
    supports_multicast: ClassVar[bool] = True

    async def serve(
        self,
        down: trio.MemoryReceiveChannel[Item],
        up: trio.MemorySendChannel[Item],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run until cancelled; call ``task_status.started()`` once able to send."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        return {}
