"""Issue 12 item 3 over real loopback UDP: capped UNICAST3 retransmission requests.

A sends 20,000 unicasts to B while DISCARD drops the first sending of every
even seqno, and UDP bundles are 8 KB, so B's XMIT_REQs are capped. Every
request must carry seqnos, fit a datagram (the transport drops a larger one),
and B must get everything, in order.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from tests.real.conftest import PresetOnOwnPorts
from triogroups import Message, open_channel
from triogroups.protocols import ids
from triogroups.protocols.unicast3._common import DATA, XMIT_REQ
from triogroups.testing import wait_until

COUNT = 20_000


@pytest.mark.real
async def test_unicast3_capped_xmit_reqs_are_never_empty_on_real_udp(
    preset_on_own_ports: PresetOnOwnPorts,
) -> None:
    config = preset_on_own_ports("udp").configure("UDP", max_bundle_size=8192)
    config = config.configure("FRAG", frag_size=4096)
    config = config.insert_above("NAKACK2", "DISCARD")
    cluster = f"u3-xmit-real-{uuid.uuid4().hex[:8]}"
    sizes: list[int] = []
    dropped: set[int] = set()

    def every_other_data(msg: Message) -> bool:
        hdr = msg.headers.get(ids.UNICAST3)
        if hdr is None or hdr.type != DATA or hdr.seqno % 2 or hdr.seqno in dropped:
            return False
        dropped.add(hdr.seqno)  # the first sending only: retransmissions pass
        return True

    def record_xmit_reqs(msg: Message) -> bool:
        hdr = msg.headers.get(ids.UNICAST3)
        if hdr is not None and hdr.type == XMIT_REQ:
            sizes.append(len(hdr.missing))
        return False

    with trio.fail_after(120):
        async with (
            open_channel(cluster, config, "A") as a,
            open_channel(cluster, config, "B") as b,
        ):
            await wait_until(
                lambda: len(a.view.members) >= 2 and len(b.view.members) >= 2, timeout=120
            )
            discard: Any = a.stack.protocol("DISCARD")
            discard.drop_if(every_other_data, count=None)
            discard = b.stack.protocol("DISCARD")
            discard.drop_if(record_xmit_reqs, count=None)
            got: list[bytes] = []

            async def receive() -> None:
                async for msg in b:
                    got.append(msg.payload)
                    if len(got) == COUNT:
                        return

            async with trio.open_nursery() as nursery:
                nursery.start_soon(receive)
                for i in range(COUNT):
                    await a.send(f"u{i}".encode(), to=b.address)
            assert got == [f"u{i}".encode() for i in range(COUNT)]
            u3: Any = b.stack.protocol("UNICAST3")
            cap = u3.request_cap(a.address)
            assert len(dropped) >= COUNT // 2 - 1
            assert sizes and 0 not in sizes and max(sizes) == cap
            assert u3.stats()["xmit_reqs_sent"] == sum(sizes)
