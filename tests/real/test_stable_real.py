"""Issue 12 item 4 over real loopback sockets: STABLE frees the buffer of a member
that only multicasts with DONT_LOOPBACK (JGRP-2605), with the periodic gossip off."""

from __future__ import annotations

import uuid

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts
from triogroups import open_channel
from triogroups.testing import wait_until

COUNT = 10


@pytest.mark.real
async def test_stable_jgrp2605_exclude_self_rpc_sender_buffer_is_freed_by_max_bytes(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    """B multicasts 10 RPCs of 5 KB with ``exclude_self`` (DONT_LOOPBACK), STABLE
    ``max_bytes`` 10 KB and ``desired_avg_gossip = 0``: A and C get all 10, and B's
    NAKACK2 keeps none of them, as only rounds started by ``max_bytes`` can free them."""
    config = preset_on_own_ports("udp").configure("STABLE", desired_avg_gossip=0, max_bytes=10_000)
    cluster = f"stable-real-{uuid.uuid4().hex[:8]}"
    got: dict[str, list[int]] = {"A": [], "C": []}
    with trio.fail_after(90):
        async with (
            open_channel(cluster, config, "A") as a,
            open_channel(cluster, config, "B") as b,
            open_channel(cluster, config, "C") as c,
        ):
            await wait_until(lambda: all(len(ch.view.members) >= 3 for ch in (a, b, c)), timeout=90)
            for ch in (a, c):

                def note(i: int, data: str, name: str = ch.name) -> None:
                    got[name].append(i)

                ch.rpc.register("note", note)
            for i in range(COUNT):
                await b.rpc.call("note", i, "x" * 5000, mode="none", exclude_self=True)
            await wait_until(
                lambda: got == {"A": list(range(COUNT)), "C": list(range(COUNT))}, timeout=90
            )
            nak = b.stack.protocol("NAKACK2")
            assert nak.stats()["seqno"] >= COUNT
            await wait_until(lambda: not nak.stats()["sent_retained"], timeout=90)
            assert b.stack.protocol("STABLE").stats()["max_bytes_reached"] >= 1
