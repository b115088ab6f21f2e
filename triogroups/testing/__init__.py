"""The public test kit: simulated clusters on virtual time and contract checks.

Run it on a virtual clock (pytest-trio's ``autojump_clock`` fixture, or
``MockClock`` as here) so a simulated minute takes milliseconds:

>>> import trio
>>> from trio.testing import MockClock
>>> from triogroups.testing import open_cluster
>>> async def main():
...     async with open_cluster(3, "sim", seed=1, loss=0.1) as cluster:
...         await cluster[0].send(b"hello")
...         await cluster.wait_until_delivered()  # raises ContractViolation if not
...         return [len(member.delivered) for member in cluster.members]
>>> trio.run(main, clock=MockClock(autojump_threshold=0))
[1, 1, 1]
"""

from triogroups._public import set_public_module
from triogroups.testing._cluster import SimCluster, SimMember, open_cluster, sim_config
from triogroups.testing._contract import ContractViolation, DeliveryLog
from triogroups.testing._history import (
    History,
    HistoryError,
    HistoryViolation,
    HistoryWriter,
    assert_histories,
    check_histories,
    read_histories,
)

__all__ = [
    "ContractViolation",
    "DeliveryLog",
    "History",
    "HistoryError",
    "HistoryViolation",
    "HistoryWriter",
    "SimCluster",
    "SimMember",
    "assert_histories",
    "check_histories",
    "open_cluster",
    "read_histories",
    "sim_config",
]

set_public_module(__name__, {name: globals()[name] for name in __all__})
del set_public_module
