"""Building blocks over a channel: cluster-wide locks and counters, a cluster singleton
and a replicated dictionary.

Each block is a service every member runs on its channel (``async with
open_lock_service(ch) as locks``), talking only through the channel's group RPC; the
replicated dictionary opens its channel itself (it is the channel's state provider).
Import the public names from `triogroups`.
"""

from triogroups.blocks._counters import Counter, CounterService, open_counter_service
from triogroups.blocks._locks import Lock, LockService, open_lock_service
from triogroups.blocks._replicated import ReplicatedDict, open_replicated_dict
from triogroups.blocks._singleton import LocationIterator, Singleton, open_singleton

__all__ = [
    "Counter",
    "CounterService",
    "LocationIterator",
    "Lock",
    "LockService",
    "ReplicatedDict",
    "Singleton",
    "open_counter_service",
    "open_lock_service",
    "open_replicated_dict",
    "open_singleton",
]
