"""UDP: IP multicast for the group, unicast datagrams for members.

Each member has a unicast socket (bound to ``bind_addr``, first free port of
``bind_port .. bind_port + port_range``) and a multicast socket (joined to
``mcast_addr:mcast_port`` on the ``bind_addr`` interface, shared by every
member on the host). Multicasts are sent from the unicast socket, so the
source of every datagram is the sender's unicast endpoint and receivers learn
where each member is from the traffic itself. ``IP_MULTICAST_IF`` is the bind
address and the TTL is ``ip_ttl`` (0 by default): nothing leaves the host
unless configured to.

Sending: the transport takes everything queued, bundles per destination (see
`_bundler`) and writes each bundle as one datagram. Receiving: on every
wake-up it reads every datagram that is ready without awaiting in between,
decodes them and passes them up as one batch. Several clusters may share a
multicast address; another cluster's datagrams fail the codec's cluster check
and are dropped and counted, never delivered.

A unicast to a member whose physical address is unknown is dropped and
counted (``dropped_no_physical``): UDP is lossy anyway, retransmission lives
above, and discovery or the member's own traffic fills the table. The
transport never interprets protocol headers.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections import deque
from collections.abc import Iterable
from typing import Any

import trio

from triogroups.address import Address
from triogroups.events import Event, Item, LocalPhysicalAddress, ViewChange
from triogroups.message import Message
from triogroups.properties import Int, Size, Str, at_least, between
from triogroups.transports._addresses import (
    Physical,
    SendToHosts,
    format_physical,
)
from triogroups.transports._bundler import drain, encode_bundles, route, segments
from triogroups.transports._direct import DirectGate
from triogroups.transports._socket_transport import SocketTransport, bind_port_property
from triogroups.transports._sockets import (
    bind_in_range,
    close_socket,
    is_ipv4,
    multicast_socket,
    resolve,
    set_buffers,
)
from triogroups.transports.base import UpChannel
from triogroups.wire import MAX_DATAGRAM, WireCodec, WireError

__all__ = ["UdpTransport"]

_log = logging.getLogger(__name__)
_RECV_SIZE = 65_536


def _multicast(value: str) -> bool:
    return is_ipv4(value) and ipaddress.IPv4Address(value).is_multicast


class UdpTransport(SocketTransport):
    """The UDP transport (JGroups ``UDP``): lossy, multicast-capable."""

    name = "UDP"
    lossless = False
    COUNTERS = (
        "bundles_sent",
        "msgs_sent",
        "bundles_received",
        "msgs_received",
        "batches_up",
        "own_multicasts_skipped",
        "bytes_sent",
        "bytes_received",
        "batches_sent_now",
    )

    bind_port = bind_port_property(0, "first unicast port to try; 0 = any free port")
    mcast_addr = Str(
        "228.8.8.8",
        doc="multicast group of the cluster",
        check=_multicast,
        rule="an IPv4 multicast address",
    )
    mcast_port = Int(45588, doc="multicast port", check=between(1, 65535), rule="in 1..65535")
    ip_ttl = Int(
        0,
        doc="multicast TTL; 0 keeps multicasts on this host",
        check=between(0, 255),
        rule="in 0..255",
    )
    ucast_recv_buf_size = Size(5 << 20, doc="receive buffer of the unicast socket (bytes)")
    ucast_send_buf_size = Size(1 << 20, doc="send buffer of the unicast socket (bytes)")
    mcast_recv_buf_size = Size(5 << 20, doc="receive buffer of the multicast socket (bytes)")
    max_bundle_size = Size(
        64_000,
        doc="largest datagram sent or accepted (bytes)",
        check=between(64, MAX_DATAGRAM),
        rule=f"in 64..{MAX_DATAGRAM}",
    )
    drain_limit = Int(
        1000,
        doc="datagrams read per wake-up at most (one batch up)",
        check=at_least(1),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._codec: WireCodec | None = None
        self._mcast_dest: Physical = (self.mcast_addr, self.mcast_port)
        self._sockets: tuple[socket.socket, socket.socket] | None = None
        self._gate = DirectGate()  # `send_now` writes to `_out` only while it is open
        self._out: socket.socket | None = None
        self._unsent: deque[tuple[bytes, Physical, int]] = deque()

    # --- sockets -------------------------------------------------------------------

    def port_span(self) -> int | None:
        return self.port_range if self.bind_port else None

    def open(self) -> None:
        """Bind the unicast socket (first free port of the range) and join the group."""
        if self._sockets is None:
            self._sockets = self._open_sockets()

    def _open_sockets(self) -> tuple[socket.socket, socket.socket]:
        ucast = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            port = bind_in_range(ucast, self.bind_addr, self.bind_port, self.port_range)
            iface = socket.inet_aton(self.bind_addr)
            ucast.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, iface)
            ucast.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, self.ip_ttl)
            ucast.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
            ucast.setblocking(False)
            mcast = multicast_socket(self.mcast_addr, self.mcast_port, self.bind_addr)
        except BaseException:
            ucast.close()
            raise
        try:
            self.buffers = set_buffers(
                f"UDP {self.local_address}",
                [
                    (ucast, socket.SO_RCVBUF, self.ucast_recv_buf_size, "ucast_recv_buf_size"),
                    (ucast, socket.SO_SNDBUF, self.ucast_send_buf_size, "ucast_send_buf_size"),
                    (mcast, socket.SO_RCVBUF, self.mcast_recv_buf_size, "mcast_recv_buf_size"),
                ],
            )
        except BaseException:
            ucast.close()
            mcast.close()
            raise
        self.physical = (self.bind_addr, port)
        return ucast, mcast

    async def serve(
        self,
        down: trio.MemoryReceiveChannel[Item],
        up: UpChannel,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        assert self.local_address is not None, "start() must run before serve()"
        self._codec = self.make_codec(self.max_bundle_size)
        self.open()
        assert self._sockets is not None and self.physical is not None
        (ucast, mcast), self._sockets = self._sockets, None
        try:
            async with trio.open_nursery() as nursery:
                self._start_busy_poll(nursery)
                await up.send(LocalPhysicalAddress(self.physical))
                nursery.start_soon(self._receive_loop, ucast, up)
                nursery.start_soon(self._receive_loop, mcast, up)
                task_status.started()
                self._out = ucast
                while (first := await self._gate.next_item(down, self._send_unsent)) is not None:
                    for segment in segments(drain(down, first)):
                        if type(segment) is list:
                            await self._send_batch(ucast, segment, up)
                        else:
                            await self._handle_event(ucast, segment)  # type: ignore[arg-type]
                nursery.cancel_scope.cancel()
        finally:
            self._out = None
            close_socket(mcast)
            close_socket(ucast)

    async def _send_unsent(self) -> None:
        """Send what `send_now` could not write, before anything queued after it."""
        if self._unsent:
            assert self._out is not None
            unsent, self._unsent = self._unsent, deque()
            await self._send_datagrams(self._out, unsent)

    def queued(self) -> None:
        self._gate.close()

    def send_now(self, batch: list[Message]) -> bool:
        """Write ``batch`` to the socket now while `serve` waits with nothing queued (see
        `Transport.send_now`); not a batch with local deliveries (they go up, which may
        wait). A datagram the socket cannot take yet waits, with those after it, for
        `serve`, which sends them before anything queued later."""
        sock = self._out
        if not self._gate.open or sock is None:
            return False
        datagrams = self._datagrams(batch)
        if datagrams is None:
            return False
        counters = self.counters
        for i, (data, where, count) in enumerate(datagrams):
            try:
                sock.sendto(data, where)
            except BlockingIOError:
                self._unsent.extend(datagrams[i:])
                self._gate.hand_back()
                break
            except OSError as exc:
                self.send_drops.drop("send_error", str(exc), where)
                continue
            counters["bundles_sent"] += 1
            counters["msgs_sent"] += count
            counters["bytes_sent"] += len(data)
        counters["batches_sent_now"] += 1
        if self._poller is not None:
            self._poller.arm()  # the answer may come soon: poll for it
        return True

    # --- sending ------------------------------------------------------------------------

    def _datagrams(self, batch: list[Message]) -> list[tuple[bytes, Physical, int]] | None:
        """``batch`` as encoded datagrams with their targets and message counts; None when
        some of it is for this member (delivered locally by `_send_batch`)."""
        me = self.local_address
        assert me is not None and self._codec is not None
        by_dest, local = route(batch, me)
        if local:
            return None
        out: list[tuple[bytes, Physical, int]] = []
        for dest, msgs in by_dest.items():
            where = self._mcast_dest if dest is None else self.table.get(dest)
            if where is None:
                self._no_physical(dest, len(msgs))
                continue
            out.extend(self._encode(dest, msgs, [where]))
        return out

    async def _send_batch(self, sock: socket.socket, batch: list[Message], up: UpChannel) -> None:
        me = self.local_address
        assert me is not None and self._codec is not None
        by_dest, local = route(batch, me)
        for dest, msgs in by_dest.items():
            where = self._mcast_dest if dest is None else self.table.get(dest)
            if where is None:
                self._no_physical(dest, len(msgs))
                continue
            await self._send_datagrams(sock, self._encode(dest, msgs, [where]))
        if local:
            await up.send([m.copy() for m in local])

    def _no_physical(self, dest: Address | None, count: int) -> None:
        """Drop, counted, what is for a member whose address is unknown: logged at DEBUG
        when it is outside the installed view (acks and retransmissions to one that left),
        else a warning (UDP is lossy: retransmission brings it once the address is known)."""
        gone = self.view is not None and dest is not None and dest not in self.view
        self.send_drops.drop("no_physical", "unknown physical address", dest, count, quiet=gone)

    def _encode(
        self, dest: Address | None, msgs: list[Message], to: list[Physical]
    ) -> list[tuple[bytes, Physical, int]]:
        me = self.local_address
        assert me is not None and self._codec is not None
        encoded, too_large = encode_bundles(self._codec, dest, me, msgs, self.max_bundle_size)
        if too_large:
            detail = f"message larger than max_bundle_size {self.max_bundle_size}"
            self.send_drops.drop("oversized", detail, dest, len(too_large))
        return [(data, where, count) for data, count in encoded for where in to]

    async def _send_datagrams(
        self, sock: socket.socket, datagrams: Iterable[tuple[bytes, Physical, int]]
    ) -> None:
        counters = self.counters
        for data, where, count in datagrams:
            if await self._sendto(sock, data, where):
                counters["bundles_sent"] += 1
                counters["msgs_sent"] += count
                counters["bytes_sent"] += len(data)
        if self._poller is not None:
            self._poller.arm()

    async def _sendto(self, sock: socket.socket, data: bytes, where: Physical) -> bool:
        while True:
            try:
                sock.sendto(data, where)
                return True
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
            except OSError as exc:
                self.send_drops.drop("send_error", str(exc), where)
                return False

    async def _handle_event(self, sock: socket.socket, event: Event) -> None:
        if isinstance(event, ViewChange):
            self.view_changed(event.view, trio.current_time())
        elif isinstance(event, SendToHosts):
            hosts = [h for h in event.hosts if h != self.physical]
            resolved = [r for r in [await resolve(h) for h in hosts] if r is not None]
            await self._send_datagrams(sock, self._encode(None, list(event.messages), resolved))
        else:
            self.table.learn(event)

    # --- receiving -----------------------------------------------------------------------

    async def _receive_loop(self, sock: socket.socket, up: UpChannel) -> None:
        codec = self._codec
        me = self.local_address
        assert codec is not None and me is not None
        table = self.table
        drops = self.drops
        counters = self.counters
        limit = self.drain_limit
        own = self.physical  # our multicasts come back from here: skipped before decoding
        while True:
            await trio.lowlevel.wait_readable(sock)
            if self._poller is not None:  # read each time: it may be turned on or off
                self._poller.arm()  # more may follow (the next request, the rest of a burst)
            batch: list[Message] = []
            bundles = size = 0
            for _ in range(limit):
                try:
                    data, source = sock.recvfrom(_RECV_SIZE)
                except BlockingIOError:
                    break
                except OSError as exc:
                    drops.drop("recv_error", str(exc))
                    break
                size += len(data)  # every datagram that came in, dropped or not
                if source == own:
                    counters["own_multicasts_skipped"] += 1  # looped back locally already
                    continue
                try:
                    bundle = codec.decode(data)
                except WireError as exc:
                    drops.drop(exc.reason, exc.detail, format_physical(source))
                    continue
                if bundle.src == me:
                    counters["own_multicasts_skipped"] += 1  # looped back locally already
                    continue
                if bundle.dest is not None and bundle.dest != me:
                    drops.drop("wrong_dest", f"bundle for {bundle.dest}", format_physical(source))
                    continue
                table.add(bundle.src, source)
                bundles += 1
                batch.extend(bundle.messages)
            counters["bytes_received"] += size
            if batch:
                counters["bundles_received"] += bundles
                counters["msgs_received"] += len(batch)
                counters["batches_up"] += 1
                try:
                    up.send_nowait(batch)  # the next wait_readable is this loop's checkpoint
                except trio.WouldBlock:
                    await up.send(batch)
