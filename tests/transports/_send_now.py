"""What the UDP and TCP `send_now` tests share: a transport run by its stack host, and
the check that an error in `send_now` is the transport's crash."""

from __future__ import annotations

import trio
import trio.testing

from triogroups import Address, Message, Stack, StackConfig
from triogroups._layer import Inlet, TransportActor
from triogroups.events import LocalPhysicalAddress
from triogroups.testing import wait_until
from triogroups.transports.base import Transport


async def hosted(nursery: trio.Nursery, transport: Transport, cluster: str) -> tuple[Inlet, Inlet]:
    """Run ``transport`` by its stack host (`TransportActor`): the inlets from above and
    to above."""
    transport.start(Address.random("A"), cluster, trio.current_time())
    down, up = Inlet(16), Inlet(64)
    actor = TransportActor(transport, down, up)
    await actor.started()
    nursery.start_soon(actor.run, None)
    assert isinstance(await up.receiver.receive(), LocalPhysicalAddress)
    return down, up


def crashing_on_boom(base: type[Transport], name: str) -> type[Transport]:
    """``base`` whose `send_now` raises on a b"boom" payload, registered as ``name``."""

    def send_now(self: Transport, batch: list[Message]) -> bool:
        if any(m.payload == b"boom" for m in batch):
            raise RuntimeError("send_now was told to crash")
        return base.send_now(self, batch)

    return type(name, (base,), {"name": name, "send_now": send_now})


async def check_send_now_error_crashes_the_transport(
    nursery: trio.Nursery, cluster: str, config: StackConfig, name: str
) -> None:
    """A batch the PASS layers of ``config`` forward reaches the transport's `send_now`
    inline; its error is the transport's crash (the report names it), and the stack
    restarts."""
    stack = Stack(config, cluster, "A")
    await nursery.start(stack.run)
    await trio.testing.wait_all_tasks_blocked()
    await stack.send([Message(None, b"boom")])
    await wait_until(lambda: stack.incarnation >= 2, timeout=10, interval=0.01)
    report = stack.crash_reports[0]
    assert report.actor.endswith(name)
    assert "send_now was told to crash" in report.traceback
