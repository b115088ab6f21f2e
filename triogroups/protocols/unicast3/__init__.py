"""UNICAST3 (seeds 001 and 000): reliable unicast with delayed, timestamped acks.

Split in halves: `_sender` (send windows, HA/HS resends, answers to the
receiver), `_receiver` (receive windows, acks, XMIT_REQ, SEND_FIRST_SEQNO),
`_common` (the header and wrap-around-safe counters), `_protocol` (the
`Unicast3` layer that routes between them).
"""

from triogroups.protocols.unicast3._common import (
    ACK,
    CLOSE,
    DATA,
    SEND_FIRST_SEQNO,
    TYPE_NAMES,
    XMIT_REQ,
    Unicast3Header,
)
from triogroups.protocols.unicast3._protocol import Unicast3

__all__ = [
    "ACK",
    "CLOSE",
    "DATA",
    "SEND_FIRST_SEQNO",
    "TYPE_NAMES",
    "XMIT_REQ",
    "Unicast3",
    "Unicast3Header",
]
