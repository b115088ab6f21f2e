"""UDP's `send_now`: a batch from above goes to the socket in the sender's task while the
transport's task waits with nothing queued, and never overtakes what was queued before."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tests._task_steps import counting_steps
from tests.transports._send_now import (
    check_send_now_error_crashes_the_transport,
    crashing_on_boom,
    hosted,
)
from triogroups import Message, StackConfig, open_channel
from triogroups._layer import Inlet
from triogroups.events import AddPhysicalAddress
from triogroups.testing import wait_until
from triogroups.transports import UdpTransport


@pytest.fixture
def udp(mcast_port: int) -> dict[str, Any]:
    return {"mcast_port": mcast_port, "ucast_recv_buf_size": 1 << 20}


_CRASHER = "TEST_SEND_NOW_CRASHER"
crashing_on_boom(UdpTransport, _CRASHER)


async def _hosted(
    nursery: trio.Nursery, cluster: str, udp: dict[str, Any]
) -> tuple[UdpTransport, Inlet, Inlet]:
    """A UDP transport run by its stack host, with the inlets from above and to above."""
    transport = UdpTransport(**udp)
    down, up = await hosted(nursery, transport, cluster)
    return transport, down, up


async def test_udp_send_now_writes_in_the_senders_task_while_the_transport_is_idle(
    nursery: trio.Nursery, open_endpoint: Any, cluster_name: str, udp: dict[str, Any]
) -> None:
    """An idle transport's inlet hands a batch to the socket before the sender yields; a
    batch with a local delivery (to this member) still goes through the transport's task."""
    transport, down, up = await _hosted(nursery, cluster_name, udp)
    b = await open_endpoint(UdpTransport, "B", **udp)
    down.send_nowait(AddPhysicalAddress(b.address, b.physical))
    await trio.testing.wait_all_tasks_blocked()
    down.send_nowait([Message(b.address, b"now")])
    assert transport.stats()["batches_sent_now"] == 1  # before this task yielded
    assert [m.payload for m in await b.receive(1)] == [b"now"]
    assert transport.local_address is not None
    down.send_nowait([Message(transport.local_address, b"me")])
    assert transport.stats()["batches_sent_now"] == 1
    with trio.fail_after(10):
        item = await up.receiver.receive()
    assert [m.payload for m in item] == [b"me"]  # type: ignore[union-attr]


async def test_udp_send_now_never_overtakes_what_waits_for_the_transports_task(
    nursery: trio.Nursery, open_endpoint: Any, cluster_name: str, udp: dict[str, Any]
) -> None:
    """While an item waits for the transport's task (here an event that task has been woken
    with but not yet run), later batches queue behind it; once the task has taken
    everything and waits again, batches go out at once. B sees every one in order."""
    transport, down, _ = await _hosted(nursery, cluster_name, udp)
    b = await open_endpoint(UdpTransport, "B", **udp)
    await trio.testing.wait_all_tasks_blocked()
    down.send_nowait(AddPhysicalAddress(b.address, b.physical))  # wakes the task, not run yet
    for i in range(3):
        down.send_nowait([Message(b.address, b"%d" % i)])
    assert transport.stats()["batches_sent_now"] == 0
    await trio.testing.wait_all_tasks_blocked()
    for i in range(3, 6):
        down.send_nowait([Message(b.address, b"%d" % i)])
    assert transport.stats()["batches_sent_now"] == 3
    assert [m.payload for m in await b.receive(6)] == [b"%d" % i for i in range(6)]


async def test_udp_send_now_that_raises_crashes_the_transport_not_the_sending_layer(
    nursery: trio.Nursery, cluster_name: str, udp: dict[str, Any]
) -> None:
    """A batch the PASS layer's handler forwards reaches the transport's `send_now` inline;
    its error is the transport's crash (the report names it), and the stack restarts."""
    cfg = StackConfig.of((_CRASHER, dict(udp)), "PASS", "PASS")
    await check_send_now_error_crashes_the_transport(nursery, cluster_name, cfg, _CRASHER)


async def test_udp_call_one_is_answered_in_the_receive_loops_task(
    mcast_port: int, cluster_name: str
) -> None:
    """With the full `udp` preset on real sockets, a request to an idle member runs in the
    task that read it from the socket once the stack's chain has returned (`after_chain`)
    and its answer goes down inline: the answering member's dispatcher task never runs."""
    config = StackConfig.preset("udp").configure("UDP", mcast_port=mcast_port)
    async with (
        open_channel(cluster_name, config, "A", handle_signals=False) as a,
        open_channel(
            cluster_name, config, "B", handlers={"echo": lambda x: x}, handle_signals=False
        ) as b,
    ):
        with trio.fail_after(30):
            await wait_until(
                lambda: len(a.view) >= 2 and len(b.view) >= 2, timeout=30, interval=0.01
            )
            assert await a.rpc.call_one("echo", 0, to=b.address) == 0
        await trio.testing.wait_all_tasks_blocked()
        dispatcher = b._rpc_server.holder
        assert dispatcher is not None
        inline = b.rpc.stats().get("requests_run_inline", 0)
        with counting_steps(dispatcher) as steps:
            for i in range(1, 21):
                assert await a.rpc.call_one("echo", i, to=b.address) == i
        assert steps.steps == 0
        assert b.rpc.stats()["requests_run_inline"] == inline + 20
