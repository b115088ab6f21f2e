"""TCP: one connection per pair of members; multicast is a send to each member.

Every member listens on ``bind_addr`` (first free port of ``bind_port ..
bind_port + port_range``). A connection is opened on demand when there is
something to send and no connection (``sock_conn_timeout`` bounds the
attempt), starts with a hello each way (see `_tcp_conn`), and is retired when
idle for ``conn_expire_time`` (0: never). When two members connect to each
other at once, both sides keep the connection *initiated by the lower
address* (UUID order) and retire the other; frames already written on the
loser are still read, so nothing is lost, though they may overtake frames
on the winner (the reliability layers order by seqno).

A multicast is encoded once and the same bytes are queued on the connection
to each member of the current view (without a view: each member in the
address table). Sending blocks, and so pushes back on the layers above, while
a connection to a member of the view has ``send_queue_size`` bytes queued; to
a peer outside the installed view (one that does not read, say) what does not fit is
dropped and counted (``dropped_queue_full``) instead of stalling every send.
The receive path never drops a frame it has read: each read is framed, decoded and awaited into the
layer above as one batch, so slow layers stop the reading and TCP pushes
back on the sender. A frame length above ``max_frame_size``, an empty frame,
an EOF inside a frame or a bad hello (garbage, a newer wire version, another
cluster) closes the connection; after a good hello a frame that does not
decode is dropped alone. Either way it is counted by reason in `stats`.

Frames for a member of the view are kept until it can take them, since
NAKACK2 in seed 003's mode (``xmit_interval = 0``) does not retransmit (the
``tcp`` preset's does, but only after a gap shows): while its physical address is
unknown they wait for discovery to learn it (``waited_for_address``), and a
connection attempt that times out or fails without being refused is made
again while it is in the view (``connect_retries``; see `_connect`). Frames for
a non-member without a known address, or whose endpoint does not answer
within ``sock_conn_timeout``, and for a member whose endpoint refuses or
that left the view, are dropped and counted. A drop to a member that cannot
be reached is a warning (rate-limited) when that member should be there, and
a DEBUG line when it is part of a departure: this member is stopping, the
peer is no longer in the installed view, or the peer has stopped (its
endpoint refuses connections, or another member listens there now). A peer
that exits leaves acks and retransmissions queued to it; failure detection
and GMS report the departure, not the transport.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from triogroups.address import Address
from triogroups.events import (
    Event,
    Item,
    LocalPhysicalAddress,
    TmpView,
    ViewChange,
)
from triogroups.message import Message
from triogroups.properties import Bool, Duration, Size, at_least, positive
from triogroups.transports._addresses import (
    Physical,
    SendToHosts,
    label,
)
from triogroups.transports._bundler import drain, encode_bundles, route, segments
from triogroups.transports._direct import DirectGate
from triogroups.transports._socket_transport import bind_port_property
from triogroups.transports._sockets import listen_in_range, resolve
from triogroups.transports._tcp_conn import (
    Connection,
)
from triogroups.transports._tcp_links import Pending, TcpLinks
from triogroups.transports.base import UpChannel, fan_out_targets
from triogroups.view import View
from triogroups.wire import WireCodec

__all__ = ["TcpTransport"]

_log = logging.getLogger(__name__)
_STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class TcpTransport(TcpLinks):
    """The TCP transport (JGroups ``TCP``): lossless, one connection per member pair."""

    name = "TCP"
    lossless = True
    COUNTERS = (
        "bundles_sent",
        "msgs_sent",
        "bundles_received",
        "msgs_received",
        "batches_up",
        "connections_opened",
        "connections_accepted",
        "connections_closed",
        "connect_failures",
        "connect_retries",
        "waited_for_address",
        "connections_reaped",
        "duplicate_connections_retired",
        "bytes_sent",
        "bytes_received",
        "batches_sent_now",
    )
    supports_multicasting = False

    diag_enable_udp = Bool(False, doc="answer probes by multicast")
    diag_enable_tcp = Bool(True, doc="answer probes over TCP")
    bind_port = bind_port_property(7800, "first port to listen on; 0 = any free port")
    recv_buf_size = Size(0, doc="socket receive buffer (bytes); 0 = kernel default")
    send_buf_size = Size(0, doc="socket send buffer (bytes); 0 = kernel default")
    tcp_nodelay = Bool(True, doc="send small frames at once (TCP_NODELAY)")
    max_bundle_size = Size(
        64_000,
        doc="largest bundle packed into one frame (bytes)",
        check=at_least(64),
    )
    max_frame_size = Size(
        1 << 20,
        doc="largest frame accepted; a longer one closes the connection",
        check=at_least(64),
    )
    sock_conn_timeout = Duration(
        2.0,
        doc="connect and hello timeout",
        check=positive,
    )
    conn_expire_time = Duration(
        0.0,
        doc="retire connections idle this long; 0 = never",
        check=at_least(0),
    )
    close_timeout = Duration(
        10.0,
        doc="how long a retired connection waits for the peer's EOF",
        check=positive,
    )
    send_queue_size = Size(
        8 << 20,
        doc="bytes queued per connection before sending blocks",
        check=at_least(1),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._next_view: View | None = None
        self._conns: dict[Address, Connection] = {}
        self._pending: dict[Address, Pending] = {}
        self._host_pending: dict[Physical, Pending] = {}
        self._codec: WireCodec | None = None
        self._nursery: trio.Nursery | None = None
        self._up: UpChannel | None = None
        self._gate = DirectGate()  # `send_now` may queue frames only while it is open
        self._full: list[Connection | Pending] = []  # queues `serve` waits on before more
        self._listener: trio.SocketListener | None = None

    # --- lifecycle ---------------------------------------------------------------------

    def port_span(self) -> int | None:
        return self.port_range if self.bind_port else None

    def open(self) -> None:
        """Listen on the first free port of ``bind_port .. bind_port + port_range``."""
        if self._listener is None:
            self._listener = self._listen()

    def _listen(self) -> trio.SocketListener:
        sock = listen_in_range(self.bind_addr, self.bind_port, self.port_range, 128)
        sock.setblocking(False)
        self.physical = (self.bind_addr, int(sock.getsockname()[1]))
        return trio.SocketListener(trio.socket.from_stdlib_socket(sock))

    async def serve(
        self,
        down: trio.MemoryReceiveChannel[Item],
        up: UpChannel,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        me = self.local_address
        assert me is not None, "start() must run before serve()"
        self._codec = self.make_codec(self.max_frame_size)
        self.open()
        listener, self._listener = self._listener, None
        assert listener is not None and self.physical is not None
        self._up = up
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._start_busy_poll(nursery)
                await up.send(LocalPhysicalAddress(self.physical))
                nursery.start_soon(self._accept_loop, listener)
                if self.conn_expire_time > 0:
                    nursery.start_soon(self._reap_loop)
                task_status.started()
                while (first := await self._gate.next_item(down, self._wait_room)) is not None:
                    for segment in segments(drain(down, first)):
                        if type(segment) is list:
                            await self._send_batch(segment, up)
                        else:
                            await self._handle_event(segment)  # type: ignore[arg-type]
                nursery.cancel_scope.cancel()
        finally:
            self._nursery = None
            for conn in self._conns.values():
                conn.close()
            await trio.aclose_forcefully(listener)

    # --- sending -------------------------------------------------------------------------

    async def _wait_room(self) -> None:
        """Wait for room in the members' queues `send_now` filled, as `_send_batch` does
        after a batch, before taking anything more."""
        full, self._full = self._full, []
        for queue in full:
            await queue.wait_room(self.send_queue_size)

    def queued(self) -> None:
        self._gate.close()

    def send_now(self, batch: list[Message]) -> bool:
        """Frame ``batch`` onto its connections now while `serve` waits with nothing queued
        (see `Transport.send_now`); a connection writes a frame at once when its writer is
        idle (`Connection.enqueue`). Not a batch with local deliveries (they go up, which
        may wait). A member's queue it fills makes `serve` wait for room before it takes
        anything more, and refuses further `send_now` until then."""
        if not self._gate.open:
            return False
        me = self.local_address
        assert me is not None
        by_dest, local = route(batch, me)
        if local:
            return False
        full = self._enqueue(by_dest)
        self.counters["batches_sent_now"] += 1
        if full:
            self._full = full
            self._gate.hand_back()
        if self._poller is not None:
            self._poller.arm()  # the answer may come soon: poll for it
        return True

    async def _send_batch(self, batch: list[Message], up: UpChannel) -> None:
        me = self.local_address
        assert me is not None
        by_dest, local = route(batch, me)
        full = self._enqueue(by_dest)
        if self._poller is not None:
            self._poller.arm()
        if local:
            await up.send([m.copy() for m in local])
        for queue in full:
            await queue.wait_room(self.send_queue_size)

    def _enqueue(self, by_dest: dict[Address | None, list[Message]]) -> list[Connection | Pending]:
        """Encode and queue every bundle; the members' queues that are full now."""
        me = self.local_address
        assert me is not None and self._codec is not None
        full: list[Connection | Pending] = []
        bundle_limit = min(self.max_bundle_size, self.max_frame_size)
        for dest, msgs in by_dest.items():
            targets = self._multicast_targets() if dest is None else [dest]
            if not targets:
                continue
            encoded, too_large = encode_bundles(self._codec, dest, me, msgs, bundle_limit)
            if too_large:
                detail = f"message larger than max_bundle_size {bundle_limit}"
                self.send_drops.drop("oversized", detail, dest, len(too_large))
            for data, count in encoded:
                for target in targets:
                    queue = self._send_to(target, data, count)
                    limit = self.send_queue_size
                    # only members make us wait: others' frames are dropped from now on
                    if queue is not None and queue.out_bytes >= limit and self._member(target):
                        full.append(queue)
        return full

    def _multicast_targets(self) -> list[Address]:
        members = self.view.members if self.view is not None else self.table.members()
        return fan_out_targets(members, self._next_view, self.local_address)

    def _send_to(self, dest: Address, data: bytes, count: int) -> Connection | Pending | None:
        """Queue one bundle for ``dest``; returns the queue it went to (None: dropped)."""
        counters = self.counters
        conn = self._conns.get(dest)
        pending = self._pending.get(dest) if conn is None else None
        queued = conn if conn is not None else pending
        full = queued is not None and queued.out_bytes >= self.send_queue_size
        if full and not self._member(dest):
            detail = "a peer outside the view does not read"
            self.send_drops.drop("queue_full", detail, dest, count)
            return None
        if conn is not None:
            conn.enqueue(data)
            counters["bundles_sent"] += 1
            counters["msgs_sent"] += count
            counters["bytes_sent"] += len(data)
            return conn
        if pending is None:
            physical = self.table.get(dest)
            if physical is None:
                if self.view is None or not self._member(dest):
                    quiet = self._departure(dest)  # acks and retransmissions to one that left
                    self.send_drops.drop(
                        "no_physical", "unknown physical address", dest, count, quiet=quiet
                    )
                    return None
                # A member we have not heard from (it was paused while we joined): its
                # bundles wait for discovery (MERGE3's finds) or its own connection to say
                # where it is; over TCP nothing would resend them (`_address_learned`).
                pending = self._pending[dest] = Pending(connecting=False)
                self.counters["waited_for_address"] += 1
            else:
                pending = self._pending[dest] = Pending()
                assert self._nursery is not None
                self._nursery.start_soon(self._connect, physical, dest)
        pending.add(data, count)
        return pending

    def _address_learned(self) -> None:
        """Connect to the members whose bundles waited for their endpoint, now known."""
        assert self._nursery is not None
        for peer, pending in self._pending.items():
            if not pending.connecting:
                physical = self.table.get(peer)
                if physical is not None:
                    pending.connecting = True
                    self._nursery.start_soon(self._connect, physical, peer)

    def _drop_unreachable(self) -> None:
        """Drop, quietly, what waits for the endpoint of a member that left the view."""
        for peer in [p for p, q in self._pending.items() if not q.connecting]:
            if not self._member(peer):
                self._fail_pending(None, peer, "left the view before its endpoint was known")

    async def _handle_event(self, event: Event) -> None:
        if isinstance(event, ViewChange):
            self.view_changed(event.view, trio.current_time())
            self._next_view = None
            self._drop_unreachable()
        elif isinstance(event, TmpView):
            self._next_view = event.view
        elif isinstance(event, SendToHosts):
            await self._send_to_hosts(event)
        else:
            self.table.learn(event)
            self._address_learned()

    async def _send_to_hosts(self, event: SendToHosts) -> None:
        me = self.local_address
        assert me is not None and self._codec is not None and self._nursery is not None
        msgs = list(event.messages)
        encoded, _ = encode_bundles(self._codec, None, me, msgs, self.max_bundle_size)
        for host in event.hosts:
            where = await resolve(host)
            if where is None or where == self.physical:
                continue
            member = self.table.logical_at(where)
            for data, count in encoded:
                if member is not None:
                    self._send_to(member, data, count)
                    continue
                pending = self._host_pending.get(where)
                if pending is None:
                    pending = self._host_pending[where] = Pending()
                    self._nursery.start_soon(self._connect, where, None)
                pending.add(data, count)

    # --- connections ---------------------------------------------------------------------

    def gauges(self) -> dict[str, Any]:
        return {
            **super().gauges(),
            "connections": {
                label(peer): {
                    "initiated_here": conn.initiator == self.local_address,
                    "queued_bytes": conn.out_bytes,
                }
                for peer, conn in self._conns.items()
            },
            "connecting": len(self._pending) + len(self._host_pending),
        }
