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

For unit tests of protocol objects there is a sans-IO harness (no Trio, no
sockets): `SansIONetwork` joins members, each a protocol or a small stack of
them, by an in-memory link with an explicit clock, seeded loss, duplication
and reordering:

>>> from triogroups.protocols.unicast3 import Unicast3
>>> from triogroups.testing import SansIONetwork, addresses
>>> A, B = addresses("AB")
>>> net = SansIONetwork(seed=1, loss=0.3)
>>> a, b = net.add(A, Unicast3()), net.add(B, Unicast3())
>>> sent = a.send(b, b"1", b"2", b"3", now=0.0)
>>> [m.headers[a.top.id].seqno for m in sent]
[1, 2, 3]
>>> net.run(20.0)  # what is lost is asked for and sent again on the protocols' timers
>>> b.payloads
[b'1', b'2', b'3']

Tests with real member processes give each cluster ports of its own with `free_ports`
(a run of ports free now, below the kernel's ephemeral range; ``TRIOGROUPS_PORTS=LOW-HIGH``
narrows where they are drawn from, so runs side by side can split the range).
"""

from triogroups._ports import free_ports
from triogroups._public import set_public_module
from triogroups.config import sim_config
from triogroups.testing._cluster import SimCluster, SimMember, open_cluster
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
from triogroups.testing._sansio import (
    Livelock,
    SansIOMember,
    SansIONetwork,
    addresses,
    down_messages,
    split,
    started,
    up_messages,
    up_payloads,
    view_of,
)
from triogroups.testing._wait import wait_until

__all__ = [
    "ContractViolation",
    "DeliveryLog",
    "History",
    "HistoryError",
    "HistoryViolation",
    "HistoryWriter",
    "Livelock",
    "SansIOMember",
    "SansIONetwork",
    "SimCluster",
    "SimMember",
    "addresses",
    "assert_histories",
    "check_histories",
    "down_messages",
    "free_ports",
    "open_cluster",
    "read_histories",
    "sim_config",
    "split",
    "started",
    "up_messages",
    "up_payloads",
    "view_of",
    "wait_until",
]

set_public_module(__name__, {name: globals()[name] for name in __all__})
# `free_ports` lives outside this package so that the chaos runner, the demo and benchmark
# members can draw ports without importing the test kit (~9 MiB per process), and
# `sim_config` beside the configuration, since `open_channel(network=...)` uses it too
set_public_module(__name__, {"free_ports": free_ports, "sim_config": sim_config}, root="triogroups")
del set_public_module
