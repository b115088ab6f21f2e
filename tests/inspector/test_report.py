"""`build_report`: one member's diagnostics answer, on the simulated network (issue 16)."""

from __future__ import annotations

import json
import os

import msgpack
import trio

from triogroups.inspector import build_report
from triogroups.testing import open_cluster

UDP_LAYERS = [
    "SIM", "PING", "MERGE3", "FD_ALL3", "VERIFY_SUSPECT", "NAKACK2", "UNICAST3", "STABLE", "GMS",
    "UFC", "MFC", "FRAG",
]  # fmt: skip


async def test_report_names_member_view_stack_and_every_protocols_stats(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Every member of a 3-member udp cluster answers with the same view, its own address,
    its layers bottom first with their properties, and each layer's stats and queue."""
    async with open_cluster(3, "udp", cluster="reports") as cluster:
        await cluster[0].send(b"hello")
        await cluster.wait_until_delivered()
        reports = [build_report(member.stack) for member in cluster.members]
    views = {json.dumps(r["view"], sort_keys=True) for r in reports}
    assert len(views) == 1
    view = reports[0]["view"]
    assert view["members"] == [m.name for m in cluster.members]
    assert view["coord"] == cluster[0].name
    assert view["id"] >= 2
    for member, report in zip(cluster.members, reports, strict=True):
        assert report["address"] == f"{member.address.uuid:032x}"
        assert report["address"] in view["member_ids"]
        assert report["name"] == member.name
        assert report["cluster"] == "reports"
        assert report["pid"] == os.getpid()
        assert [layer["protocol"] for layer in report["stack"]] == UDP_LAYERS
        nakack2 = next(layer for layer in report["stack"] if layer["protocol"] == "NAKACK2")
        assert nakack2["properties"]["xmit_interval"] > 0
        assert list(report["stats"]) == UDP_LAYERS
        assert set(report["host"]["queues"]) == set(UDP_LAYERS)
        assert all(isinstance(n, int) for n in report["host"]["queues"].values())
        assert report["host"]["senders_blocked"] is False
        assert report["stats"]["GMS"]["view"] is not None
        # plain data: it survives both codecs unchanged
        assert msgpack.unpackb(msgpack.packb(report)) == report
        assert json.loads(json.dumps(report)) == report


async def test_report_of_a_channel_is_the_report_of_its_stack(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A Channel (anything with ``.stack``) reports its stack."""
    from triogroups import open_channel
    from triogroups.transports import open_sim_network

    async with (
        open_sim_network() as net,
        open_channel("ch", "udp", "a", network=net, handle_signals=False) as channel,
    ):
        report = build_report(channel)
    assert report["name"] == "a"
    assert report["view"]["members"] == ["a"]
    assert report["address"] == f"{channel.address.uuid:032x}"


def test_plain_turns_rich_stats_values_into_plain_data() -> None:
    """A protocol's stats may hold addresses, tuples, sets, enums, bytes and infinities:
    the report carries their plain form, so no stats value can break a probe's answer."""
    import enum

    from triogroups import Address
    from triogroups._diagnostics._report import plain

    class Kind(enum.IntEnum):
        ONE = 1

    a = Address(5, "A")
    value = {a: (1, 2), "s": {3, 1}, "k": Kind.ONE, "b": b"\x01", "f": float("inf"), 2: None}
    got = plain(value)
    assert got == {"A": [1, 2], "s": [1, 3], "k": 1, "b": "01", "f": None, "2": None}
    assert type(got["k"]) is int
    assert json.loads(json.dumps(got)) == got
