"""TCP's `send_now`: a batch from above is framed onto its connections in the sender's
task while the transport's task waits with nothing queued; it never overtakes what was
queued before, a queue it fills holds the next batches back, and its errors crash the
transport, not the sending layer."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from tests.transports._send_now import (
    check_send_now_error_crashes_the_transport,
    crashing_on_boom,
    hosted,
)
from triogroups import Message, StackConfig
from triogroups._layer import Inlet
from triogroups.events import AddPhysicalAddress
from triogroups.transports import TcpTransport

TCP: dict[str, Any] = {"bind_port": 0}


_CRASHER = "TEST_TCP_SEND_NOW_CRASHER"
crashing_on_boom(TcpTransport, _CRASHER)


async def _hosted(
    nursery: trio.Nursery, cluster: str, **props: Any
) -> tuple[TcpTransport, Inlet, Inlet]:
    """A TCP transport run by its stack host, with the inlets from above and to above."""
    transport = TcpTransport(**{**TCP, **props})
    down, up = await hosted(nursery, transport, cluster)
    return transport, down, up


async def _connected(down: Inlet, b: Any) -> None:
    """Introduce B and open the connection to it (through the transport's task)."""
    down.send_nowait(AddPhysicalAddress(b.address, b.physical))
    down.send_nowait([Message(b.address, b"hello")])
    assert [m.payload for m in await b.receive(1)] == [b"hello"]
    await trio.testing.wait_all_tasks_blocked()


async def test_tcp_send_now_writes_in_the_senders_task_while_the_transport_is_idle(
    nursery: trio.Nursery, open_endpoint: Any, cluster_name: str
) -> None:
    """An idle transport's inlet hands a batch to the connection before the sender yields;
    a batch with a local delivery (to this member) still goes through the transport's task."""
    transport, down, up = await _hosted(nursery, cluster_name)
    b = await open_endpoint(TcpTransport, "B", **TCP)
    await _connected(down, b)
    sent = transport.stats()["bytes_sent"]
    down.send_nowait([Message(b.address, b"now")])
    assert transport.stats()["batches_sent_now"] == 1  # before this task yielded
    assert transport.stats()["bytes_sent"] > sent
    assert [m.payload for m in await b.receive(1)] == [b"now"]
    assert transport.local_address is not None
    down.send_nowait([Message(transport.local_address, b"me")])
    assert transport.stats()["batches_sent_now"] == 1
    with trio.fail_after(10):
        item = await up.receiver.receive()
    assert [m.payload for m in item] == [b"me"]  # type: ignore[union-attr]


async def test_tcp_send_now_never_overtakes_what_waits_for_the_transports_task(
    nursery: trio.Nursery, open_endpoint: Any, cluster_name: str
) -> None:
    """While an item waits for the transport's task, later batches queue behind it; once
    the task has taken everything and waits again, batches go out at once. B sees every
    one in order."""
    transport, down, _ = await _hosted(nursery, cluster_name)
    b = await open_endpoint(TcpTransport, "B", **TCP)
    await _connected(down, b)
    down.send_nowait(AddPhysicalAddress(b.address, b.physical))  # wakes the task, not run yet
    for i in range(3):
        down.send_nowait([Message(b.address, b"%d" % i)])
    assert transport.stats()["batches_sent_now"] == 0
    await trio.testing.wait_all_tasks_blocked()
    for i in range(3, 6):
        down.send_nowait([Message(b.address, b"%d" % i)])
    assert transport.stats()["batches_sent_now"] == 3
    assert [m.payload for m in await b.receive(6)] == [b"%d" % i for i in range(6)]


async def test_tcp_send_now_that_fills_a_members_queue_holds_the_next_batches_back(
    nursery: trio.Nursery, open_endpoint: Any, cluster_name: str
) -> None:
    """A batch `send_now` queued for a member whose connection is still being opened
    fills that queue (``send_queue_size`` 1 byte): the next batch is not sent now but
    waits for the transport's task, which takes it once the queue has drained; B gets
    both, in order."""
    transport, down, _ = await _hosted(nursery, cluster_name, send_queue_size=1)
    b = await open_endpoint(TcpTransport, "B", **TCP)
    down.send_nowait(AddPhysicalAddress(b.address, b.physical))
    await trio.testing.wait_all_tasks_blocked()
    down.send_nowait([Message(b.address, b"first")])
    assert transport.stats()["batches_sent_now"] == 1
    down.send_nowait([Message(b.address, b"second")])
    assert transport.stats()["batches_sent_now"] == 1
    assert [m.payload for m in await b.receive(2)] == [b"first", b"second"]


async def test_tcp_send_now_that_raises_crashes_the_transport_not_the_sending_layer(
    nursery: trio.Nursery, cluster_name: str
) -> None:
    """A batch the PASS layer's handler forwards reaches the transport's `send_now` inline;
    its error is the transport's crash (the report names it), and the stack restarts."""
    cfg = StackConfig.of((_CRASHER, dict(TCP)), "PASS", "PASS")
    await check_send_now_error_crashes_the_transport(nursery, cluster_name, cfg, _CRASHER)
