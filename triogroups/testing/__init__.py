"""The public test kit: simulated clusters on virtual time and contract checks.

Use it with pytest-trio's ``autojump_clock`` fixture so a simulated minute
takes milliseconds::

    async def test_something(autojump_clock):
        async with open_cluster(3, "sim", seed=1, loss=0.1) as cluster:
            await cluster[0].send(b"hello")
            await cluster.wait_until_delivered()
"""

from triogroups.testing._cluster import SimCluster, SimMember, open_cluster, sim_config
from triogroups.testing._contract import ContractViolation, DeliveryLog

__all__ = [
    "ContractViolation",
    "DeliveryLog",
    "SimCluster",
    "SimMember",
    "open_cluster",
    "sim_config",
]
