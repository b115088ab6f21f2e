"""Building blocks over a channel: cluster-wide locks and counters.

Each block is a service every member runs on its channel (``async with
open_lock_service(ch) as locks``), talking only through the channel's group RPC.
Import the public names from `triogroups`.
"""

from triogroups.blocks._counters import Counter, CounterService, open_counter_service
from triogroups.blocks._locks import Lock, LockService, open_lock_service

__all__ = [
    "Counter",
    "CounterService",
    "Lock",
    "LockService",
    "open_counter_service",
    "open_lock_service",
]
