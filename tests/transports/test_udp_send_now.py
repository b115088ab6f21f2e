"""UDP's `send_now`: a batch from above goes to the socket in the sender's task while the
transport's task waits with nothing queued, and never overtakes what was queued before."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from triogroups import Address, Message, Stack, StackConfig, open_channel
from triogroups._layer import Inlet, TransportActor
from triogroups.events import AddPhysicalAddress, LocalPhysicalAddress
from triogroups.transports import UdpTransport


@pytest.fixture
def udp(mcast_port: int) -> dict[str, Any]:
    return {"mcast_port": mcast_port, "ucast_recv_buf_size": 1 << 20}


class _SendNowCrasher(UdpTransport):
    """UDP whose `send_now` raises on a b"boom" payload."""

    name = "TEST_SEND_NOW_CRASHER"

    def send_now(self, batch: list[Message]) -> bool:
        if any(m.payload == b"boom" for m in batch):
            raise RuntimeError("send_now was told to crash")
        return super().send_now(batch)


async def _hosted(
    nursery: trio.Nursery, cluster: str, udp: dict[str, Any]
) -> tuple[UdpTransport, Inlet, Inlet]:
    """A UDP transport run by its stack host (`TransportActor`), with the inlet from above."""
    transport = UdpTransport(**udp)
    transport.start(Address.random("A"), cluster, trio.current_time())
    down, up = Inlet(16), Inlet(64)
    actor = TransportActor(transport, down, up)
    await actor.started()
    nursery.start_soon(actor.run, None)
    assert isinstance(await up.receiver.receive(), LocalPhysicalAddress)
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
    cfg = StackConfig.of(("TEST_SEND_NOW_CRASHER", dict(udp)), "PASS", "PASS")
    stack = Stack(cfg, cluster_name, "A")
    await nursery.start(stack.run)
    await trio.testing.wait_all_tasks_blocked()
    await stack.send([Message(None, b"boom")])
    with trio.fail_after(10):
        while stack.incarnation < 2:
            await trio.sleep(0.01)
    report = stack.crash_reports[0]
    assert report.actor.endswith("TEST_SEND_NOW_CRASHER")
    assert "send_now was told to crash" in report.traceback


class _TaskSteps(trio.abc.Instrument):
    """Counts the steps one task runs."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


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
            while len(a.view) < 2 or len(b.view) < 2:
                await trio.sleep(0.01)
            assert await a.rpc.call_one("echo", 0, to=b.address) == 0
        await trio.testing.wait_all_tasks_blocked()
        dispatcher = b.rpc._holder
        assert dispatcher is not None
        inline = b.rpc.stats().get("requests_run_inline", 0)
        steps = _TaskSteps(dispatcher)
        trio.lowlevel.add_instrument(steps)
        try:
            for i in range(1, 21):
                assert await a.rpc.call_one("echo", i, to=b.address) == i
        finally:
            trio.lowlevel.remove_instrument(steps)
        assert steps.steps == 0
        assert b.rpc.stats()["requests_run_inline"] == inline + 20
