"""Shared-secret mode on the simulated network: whole stacks, virtual time, fixed seeds.

The rollover runs on a lossless network with NAKACK2 not retransmitting (the
TCP stack's set-up): a single bundle lost to the rotation would break the
delivery contract, so the test checks that none is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from triogroups import Address, StackConfig
from triogroups._keyring import key_id
from triogroups.testing import SimCluster, open_cluster
from triogroups.transports.base import SECRET_ENV
from triogroups.transports.sim import SimTransport

OLD = "the old secret of this cluster"
NEW = b"the new secret of this cluster"
CLUSTER = "sealed"

TCP_LIKE = StackConfig.of(
    ("SIM", {"lossless": True, "rollover_time": 10.0}),
    "PING",
    ("NAKACK2", {"xmit_interval": 0}),
    "UNICAST3",
    "STABLE",
    "GMS",
    "FRAG",
)


def _transport_stats(cluster: SimCluster) -> list[dict[str, Any]]:
    return [m.stack.protocols[0].stats() for m in cluster.members]


async def test_rollover_under_traffic_loses_and_repeats_nothing(
    autojump_clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Members install the new secret one second apart while all of them multicast and
    unicast: every message is delivered exactly once and in order, nothing is dropped
    for its key, and at the end only the new key is accepted anywhere."""
    monkeypatch.setenv(SECRET_ENV, OLD)
    async with open_cluster(3, TCP_LIKE, seed=18, cluster=CLUSTER) as cluster:
        members = cluster.members

        async def traffic(index: int) -> None:
            me = members[index]
            other = members[(index + 1) % 3]
            for i in range(120):
                await me.send(f"{me.name}-m{i}".encode())
                await me.send(f"{me.name}-u{i}".encode(), to=other.address)
                await trio.sleep(0.1)

        async with trio.open_nursery() as nursery:
            for index in range(3):
                nursery.start_soon(traffic, index)
            await trio.sleep(2.0)
            for member in members:
                member.stack.install_secret(NEW)
                await trio.sleep(1.0)
        await cluster.wait_until_delivered(timeout=30)
        await trio.sleep(10.0)
        new_id = key_id(NEW, CLUSTER).hex()
        for stats in _transport_stats(cluster):
            assert stats["decode_errors"] == {}
            assert stats["shared_secret"]["key_ids"] == [new_id]
            assert stats["shared_secret"]["installed"] == 1


async def test_member_with_another_secret_never_joins(
    autojump_clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member started with the wrong secret finds nobody (it forms a group of its own),
    and its bundles are dropped and counted by the members (``unknown_key``)."""
    monkeypatch.setenv(SECRET_ENV, OLD)
    async with open_cluster(2, TCP_LIKE, seed=19, cluster=CLUSTER) as cluster:
        monkeypatch.setenv(SECRET_ENV, "not the secret of this cluster")
        outsider = await cluster.add_member("X")
        view = await cluster.join(outsider)
        await trio.sleep(20)
        assert list(view.members) == [outsider.address] and outsider.view == view
        assert [len(m.view or ()) for m in cluster.members[:2]] == [2, 2]
        coord = cluster.members[0].stack.protocols[0].stats()
        assert coord["decode_errors"].get("unknown_key", 0) >= 1


async def test_rotation_needs_shared_secret_mode(autojump_clock: Any) -> None:
    async with open_cluster(1, TCP_LIKE, seed=20, cluster=CLUSTER) as cluster:
        with pytest.raises(RuntimeError, match="shared-secret mode is off"):
            cluster.members[0].stack.install_secret(NEW)
        assert "shared_secret" not in cluster.members[0].stack.protocols[0].stats()


def test_unreadable_secret_file_is_an_error_naming_it(tmp_path: Path) -> None:
    transport = SimTransport(secret_file=str(tmp_path / "missing.key"))
    with pytest.raises(OSError, match=r"SIM.secret_file '.*missing.key' cannot be read"):
        transport.start(Address.random("A"), CLUSTER, 0.0)


async def test_secret_is_in_no_property_stats_or_repr(
    autojump_clock: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What a member shows of its stack (properties, stats, reprs) never holds the secret,
    whichever way it came: environment, key file, or installed at run time."""
    monkeypatch.setenv(SECRET_ENV, OLD)
    key = tmp_path / "next.key"
    key.write_bytes(NEW + b"\n")
    async with open_cluster(1, TCP_LIKE, seed=21, cluster=CLUSTER) as cluster:
        stack = cluster.members[0].stack
        stack.install_secret(key.read_bytes().strip())
        transport = stack.protocols[0]
        assert isinstance(transport, SimTransport)
        shown = " ".join(
            repr(x)
            for x in (stack.stats(), transport.properties(), transport, stack, transport.keyring)
        )
        assert "shared_secret" in shown
        assert OLD not in shown and NEW.decode() not in shown and NEW.hex() not in shown
