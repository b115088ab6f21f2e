"""One-way throughput through the transport alone, beside raw sockets, in one run.

    python benchmarks/bench_transport.py [--seconds 2] [--repeat 3] [--sizes 100,1000]

For UDP and TCP and each message size, two member processes (a sender and a
receiver) run the triogroups transport with nothing above it: the sender
pushes batches of 64 messages (``--batch``) down as fast as it can (what a
layer above passes), the receiver counts the messages that come up. In the same run, two
processes do the same with raw Python sockets the naive way, read by a
blocking receive loop that only counts bytes: one message per datagram (UDP)
or per ``send`` (TCP). The rate is what the receiver got per second between
its first and last message (UDP may lose datagrams when the receiver falls
behind; what was lost is not counted). Runs are interleaved and repeated; the
first table shows median msgs/s and the transport / raw ratios.

TCP has two baselines, and they measure different things:

- ``raw nodelay``: one ``send`` per message with TCP_NODELAY, so one segment
  per message, as the transport's socket is configured (and JGroups' TCP with
  its default ``tcp_nodelay``). This is the one-send-per-message baseline.
- ``raw``: one ``send`` per message on a default socket. Nagle's algorithm
  lets the kernel coalesce the small sends, and the receiver reads 64 KB at
  a time and does nothing with them, so this baseline is kernel-bundled: its
  cost is one ``send`` system call per message on the sender and almost
  nothing on the receiver. Beating it 2x means the transport must spend less
  than half a ``send`` syscall per message on *each* side, decode and
  ``Message`` objects included.

The second table shows each side's CPU time per message (process time over
the counted interval / messages): it is far less sensitive to other load on
the machine than msgs/s, and shows which side limits a run. On a machine with
fewer free cores than the two processes need, msgs/s follows the sum of both
sides' CPU per message rather than the larger.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any, NamedTuple

import trio
from _procs import DIE_WITH_PARENT

from triogroups import Address, Message
from triogroups._ports import free_ports
from triogroups.events import AddPhysicalAddress, Item
from triogroups.transports import TcpTransport, UdpTransport

IDLE = 1.0  # the receiver stops this long after its last message
BATCH = 64  # default messages per batch handed to the transport (what a layer above passes)


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


# --- raw sockets ----------------------------------------------------------------------


def raw_receiver(kind: str, size: int) -> None:
    if kind == "udp":
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind(("127.0.0.1", 0))
        _emit(port=sock.getsockname()[1])
        conn = sock
    else:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        _emit(port=listener.getsockname()[1])
        conn, _ = listener.accept()
    count = 0
    received = 0
    first = last = cpu_first = 0.0
    while True:
        try:
            data = conn.recv(65536)
        except TimeoutError:
            break
        if not data:
            break
        last = time.perf_counter()
        if not first:
            first, cpu_first = last, time.process_time()
            conn.settimeout(IDLE)
        if kind == "udp":
            count += 1
        else:
            received += len(data)
    cpu = time.process_time() - cpu_first  # the idle wait at the end costs no CPU
    if kind != "udp":
        count = received // size
    _emit(count=count, seconds=last - first, cpu=cpu)


def raw_sender(kind: str, size: int, port: int, seconds: float) -> None:
    payload = bytes(size)
    sent = 0
    if kind == "udp":
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        send = sock.sendto
        target = ("127.0.0.1", port)
        cpu = time.process_time()
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for _ in range(1000):
                with contextlib.suppress(OSError):  # ENOBUFS: the receiver's buffer is full
                    send(payload, target)
            sent += 1000
    else:
        sock = socket.create_connection(("127.0.0.1", port))
        if kind == "tcp-nodelay":
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cpu = time.process_time()
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for _ in range(1000):
                sock.send(payload)
            sent += 1000
        sock.close()
    _emit(sent=sent, cpu=time.process_time() - cpu)


# --- the transports --------------------------------------------------------------------


def _transport(kind: str, name: str) -> Any:
    if kind == "udp":
        transport: Any = UdpTransport(mcast_port=free_ports())
    else:
        transport = TcpTransport(bind_port=0)
    transport.start(Address.random(name), "bench", 0.0)
    return transport


async def transport_receiver(kind: str) -> None:
    transport = _transport(kind, "receiver")
    down_send, down_recv = trio.open_memory_channel[Item](64)
    up_send, up_recv = trio.open_memory_channel[Item](64)
    async with trio.open_nursery() as nursery:
        await nursery.start(transport.serve, down_recv, up_send)
        await up_recv.receive()  # LocalPhysicalAddress
        me = transport.local_address
        _emit(port=transport.physical[1], uuid=f"{me.uuid:032x}")
        count = 0
        first = last = cpu_first = 0.0
        while True:
            with trio.move_on_after(IDLE if first else 60) as idle:
                item = await up_recv.receive()
            if idle.cancelled_caught:
                break
            if type(item) is list:
                last = time.perf_counter()
                if not first:
                    first, cpu_first = last, time.process_time()
                count += len(item)
        cpu = time.process_time() - cpu_first  # the idle wait at the end costs no CPU
        _emit(count=count, seconds=last - first, cpu=cpu)
        nursery.cancel_scope.cancel()
        del down_send


async def transport_sender(
    kind: str, size: int, port: int, uuid: str, seconds: float, batch_size: int
) -> None:
    transport = _transport(kind, "sender")
    down_send, down_recv = trio.open_memory_channel[Item](16)
    up_send, up_recv = trio.open_memory_channel[Item](64)
    receiver = Address(int(uuid, 16), "receiver")
    payload = bytes(size)
    async with trio.open_nursery() as nursery:
        await nursery.start(transport.serve, down_recv, up_send)
        await down_send.send(AddPhysicalAddress(receiver, ("127.0.0.1", port)))
        batch = [Message(receiver, payload) for _ in range(batch_size)]
        sent = 0
        cpu = time.process_time()
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            await down_send.send(list(batch))  # reused, as the raw senders reuse one payload
            sent += batch_size
        await trio.sleep(0.5)  # let TCP flush what is queued
        _emit(sent=sent, cpu=time.process_time() - cpu)
        nursery.cancel_scope.cancel()
        del up_recv


# --- the driver ------------------------------------------------------------------------


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "_child", *args],
        preexec_fn=DIE_WITH_PARENT,
        stdout=subprocess.PIPE,
        text=True,
    )


class Run(NamedTuple):
    """One run: the receiver's rate and each side's CPU time per message."""

    rate: float  # msgs/s the receiver got
    send_us: float  # sender CPU microseconds per message sent
    recv_us: float  # receiver CPU microseconds per message received


def measure(mode: str, kind: str, size: int, seconds: float, batch: int = BATCH) -> Run:
    """One sender / receiver pair for ``mode`` in raw / transport."""
    receiver = _child(f"{mode}-recv", kind, str(size))
    assert receiver.stdout is not None
    hello = json.loads(receiver.stdout.readline())
    extra = [hello.get("uuid", "-"), str(batch)]
    sender = _child(f"{mode}-send", kind, str(size), str(hello["port"]), str(seconds), *extra)
    assert sender.stdout is not None
    sent = json.loads(sender.stdout.readline())
    sender.wait(timeout=seconds + 60)
    got = json.loads(receiver.stdout.readline())
    receiver.wait(timeout=60)
    return Run(
        got["count"] / max(got["seconds"], 1e-9),
        sent["cpu"] / max(sent["sent"], 1) * 1e6,
        got["cpu"] / max(got["count"], 1) * 1e6,
    )


def child_main(args: list[str]) -> None:
    role, kind, size = args[0], args[1], int(args[2])
    if role == "raw-recv":
        raw_receiver(kind, size)
    elif role == "raw-send":
        raw_sender(kind, size, int(args[3]), float(args[4]))
    elif role == "transport-recv":
        trio.run(transport_receiver, kind)
    elif role == "transport-send":
        trio.run(transport_sender, kind, size, int(args[3]), args[5], float(args[4]), int(args[6]))


def _median(runs: list[Run], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs) if runs else 0.0


def _cpu(runs: list[Run]) -> str:
    if not runs:
        return f"{'-':>13}"
    return f"{_median(runs, 'send_us'):>6.2f}/{_median(runs, 'recv_us'):<6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description="transport vs raw socket throughput")
    parser.add_argument("--seconds", type=float, default=2.0, help="sending time per run")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs; medians shown")
    parser.add_argument("--sizes", default="100,1000", help="message sizes in bytes")
    parser.add_argument("--kinds", default="udp,tcp")
    parser.add_argument(
        "--batch", type=int, default=BATCH, help="messages per batch the transport sender gets"
    )
    opts = parser.parse_args()
    sizes = [int(s) for s in opts.sizes.split(",")]
    rows = []
    for kind in opts.kinds.split(","):
        for size in sizes:
            raw: list[Run] = []
            nodelay: list[Run] = []
            ours: list[Run] = []
            for _ in range(opts.repeat):  # interleaved, so a noisy moment hits all columns
                raw.append(measure("raw", kind, size, opts.seconds))
                if kind == "tcp":
                    nodelay.append(measure("raw", "tcp-nodelay", size, opts.seconds))
                ours.append(measure("transport", kind, size, opts.seconds, opts.batch))
            rows.append((kind.upper(), size, raw, nodelay, ours))
    print(
        f"\n{'':<5}{'size':>6} {'raw':>11} {'raw nodelay':>12} {'triogroups':>11} "
        f"{'ratio':>6} {'ratio nodelay':>14}   (median msgs/s of {opts.repeat} runs)"
    )
    for kind, size, raw, nodelay, ours in rows:
        raw_rate, our_rate = _median(raw, "rate"), _median(ours, "rate")
        nodelay_rate = _median(nodelay, "rate")
        nd = f"{nodelay_rate:>12,.0f}" if nodelay else f"{'-':>12}"
        ndr = f"{our_rate / nodelay_rate:>13.2f}x" if nodelay else f"{'-':>14}"
        print(
            f"{kind:<5}{size:>5}B {raw_rate:>11,.0f} {nd} {our_rate:>11,.0f} "
            f"{our_rate / raw_rate:>5.2f}x {ndr}"
        )
    print(
        f"\n{'':<5}{'size':>6} {'raw':>13} {'raw nodelay':>13} {'triogroups':>13}"
        "   (median CPU us per message, sender/receiver)"
    )
    for kind, size, raw, nodelay, ours in rows:
        print(f"{kind:<5}{size:>5}B {_cpu(raw)} {_cpu(nodelay)} {_cpu(ours)}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child_main(sys.argv[2:])
    else:
        main()
