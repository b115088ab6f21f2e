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

Frames for a member of the view are kept until it can take them, since the
``tcp`` preset's NAKACK2 does not retransmit: while its physical address is
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
import math
import socket
from typing import Any

import trio

from triogroups.address import Address
from triogroups.events import (
    Event,
    ForeignEndpoint,
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
    format_physical,
    label,
)
from triogroups.transports._bundler import drain, encode_bundles, route, segments
from triogroups.transports._direct import DirectGate
from triogroups.transports._socket_transport import SocketTransport, bind_port_property
from triogroups.transports._sockets import listen_in_range, resolve, set_buffers
from triogroups.transports._tcp_conn import (
    Connection,
    FrameError,
    FrameReader,
    decode_hello,
    encode_hello,
)
from triogroups.transports.base import UpChannel, fan_out_targets
from triogroups.view import View
from triogroups.wire import WireCodec, WireError

__all__ = ["TcpTransport"]

_log = logging.getLogger(__name__)
_STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


#: Seconds between attempts to connect to a member that did not answer: this times the
#: attempt number, at most _RETRY_BACKOFF_MAX.
_RETRY_BACKOFF = 0.1
_RETRY_BACKOFF_MAX = 1.0
#: Longest a sender waits at once for room in bundles queued for a connection not open yet.
_PENDING_WAIT = 0.5


def _refused(exc: BaseException) -> bool:
    """Whether a failed connect was refused: nothing listens at that endpoint (any more)."""
    cause = exc.__cause__  # open_tcp_stream raises from a group of one error per attempt
    errors = cause.exceptions if isinstance(cause, BaseExceptionGroup) else (exc,)
    return all(isinstance(error, ConnectionRefusedError) for error in errors)


class _Pending:
    """Bundles waiting for a connection that is being opened (``connecting``), or, for a
    member of the view whose endpoint is not known yet, for its endpoint."""

    __slots__ = ("connecting", "done", "frames", "msgs", "out_bytes")

    def __init__(self, connecting: bool = True) -> None:
        self.frames: list[bytes] = []
        self.msgs = 0
        self.out_bytes = 0
        self.done = trio.Event()
        self.connecting = connecting

    def add(self, data: bytes, count: int) -> None:
        self.frames.append(data)
        self.msgs += count
        self.out_bytes += len(data)

    async def wait_room(self, limit: int) -> None:
        """Once the bundles went out or were dropped, or after ``_PENDING_WAIT`` seconds:
        the loop that waits here (`serve`'s) must still take the events that end the
        wait, the member's address or a view without it, and for a paused member that
        may take longer (see `TcpTransport._connect`). The sender is held back meanwhile,
        a batch per wait."""
        if self.out_bytes >= limit:
            with trio.move_on_after(_PENDING_WAIT):
                await self.done.wait()


class TcpTransport(SocketTransport):
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
        self._pending: dict[Address, _Pending] = {}
        self._host_pending: dict[Physical, _Pending] = {}
        self._codec: WireCodec | None = None
        self._nursery: trio.Nursery | None = None
        self._up: UpChannel | None = None
        self._gate = DirectGate()  # `send_now` may queue frames only while it is open
        self._full: list[Connection | _Pending] = []  # queues `serve` waits on before more
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

    def _enqueue(self, by_dest: dict[Address | None, list[Message]]) -> list[Connection | _Pending]:
        """Encode and queue every bundle; the members' queues that are full now."""
        me = self.local_address
        assert me is not None and self._codec is not None
        full: list[Connection | _Pending] = []
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

    def _send_to(self, dest: Address, data: bytes, count: int) -> Connection | _Pending | None:
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
                pending = self._pending[dest] = _Pending(connecting=False)
                self.counters["waited_for_address"] += 1
            else:
                pending = self._pending[dest] = _Pending()
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
                    pending = self._host_pending[where] = _Pending()
                    self._nursery.start_soon(self._connect, where, None)
                pending.add(data, count)

    # --- connections ---------------------------------------------------------------------

    async def _connect(self, where: Physical, expected: Address | None) -> None:
        """Open a connection to ``where`` and run it; queued bundles go out once it is up.

        An attempt to a member of the view that times out or fails without being
        refused (the member is paused, or slow to send its hello) is made again, the
        bundles kept, while the member stays in the view (or the one being installed)
        and it has not connected to us meanwhile: NAKACK2 does not retransmit over TCP,
        so bundles dropped here would be lost for good (a chaos run: a member paused for
        4 s lost a joiner's first multicasts this way, and its window for the joiner
        stayed stuck before them). Senders get back-pressure meanwhile, as from a member
        that does not read. Refused means nothing listens there: it is gone.
        """
        pending = None if expected is None else self._pending.get(expected)
        attempts = 0
        while True:
            opened = await self._open(where)
            if isinstance(opened, Connection):
                break
            if expected is not None and self._pending.get(expected) is not pending:
                return  # what waited went out on the member's own connection to us
            if expected is None or not self._retries(expected, pending, opened):
                if expected is None and isinstance(opened, FrameError | WireError):
                    # a discovery probe reached something that does not speak for this cluster
                    assert self._up is not None
                    await self._up.send(ForeignEndpoint(where, f"{opened.reason}: {opened.detail}"))
                why = f"{type(opened).__name__} {opened}"
                self._fail_pending(
                    where,
                    expected,
                    f"cannot connect to {format_physical(where)}: {why}",
                    gone=_refused(opened),
                )
                return
            attempts += 1
            self.counters["connect_retries"] += 1
            await trio.sleep(min(_RETRY_BACKOFF * attempts, _RETRY_BACKOFF_MAX))
            if self._pending.get(expected) is not pending:
                return  # it connected to us, or left the view: nothing waits for this
        self.counters["connections_opened"] += 1
        await self._run(opened, where, expected)

    def _retries(self, peer: Address, pending: _Pending | None, error: Exception) -> bool:
        """Whether a failed attempt to connect to ``peer`` is made again (see `_connect`)."""
        return (
            pending is not None
            and isinstance(error, trio.TooSlowError | OSError)
            and not _refused(error)
            and self.view is not None
            and self._member(peer)
        )

    async def _open(self, where: Physical) -> Connection | Exception:
        """One attempt at a connection to ``where``, hellos exchanged; the error if it failed
        (counted in ``connect_failures``)."""
        codec = self._codec
        me = self.local_address
        assert codec is not None and me is not None
        stream: trio.SocketStream | None = None
        try:
            with trio.fail_after(self.sock_conn_timeout):
                stream = await trio.open_tcp_stream(*where, local_address=self.bind_addr)
                self._configure(stream)
                sock = stream.socket
                await stream.send_all(self._new_hello(sock.getpeername()))
                reader = FrameReader(sock, self.max_frame_size)
                hello = await reader.first()
                if hello is None:
                    raise FrameError("bad_hello", "closed before its hello")
                peer, listening = decode_hello(codec, hello, sock.getsockname())
        except (trio.TooSlowError, FrameError, WireError, *_STREAM_ERRORS) as exc:
            if stream is not None:
                await trio.aclose_forcefully(stream)
            self.counters["connect_failures"] += 1
            return exc
        return Connection(stream, reader, peer, listening, me)

    async def _accept_loop(self, listener: trio.SocketListener) -> None:
        assert self._nursery is not None
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:  # out of file descriptors, ...: back off, keep serving
                self.drops.drop("accept_error", str(exc))
                await trio.sleep(0.1)
                continue
            self._nursery.start_soon(self._accepted, stream)

    async def _accepted(self, stream: trio.SocketStream) -> None:
        codec = self._codec
        assert codec is not None
        sock = stream.socket
        try:
            source, here = sock.getpeername(), sock.getsockname()
            peer_label = f"{source[0]}:{source[1]}"
        except OSError:  # gone before its hello
            self.drops.drop("bad_hello", "closed before its hello", "unknown")
            await trio.aclose_forcefully(stream)
            return
        try:
            with trio.fail_after(self.sock_conn_timeout):
                self._configure(stream)
                reader = FrameReader(sock, self.max_frame_size)
                hello = await reader.first()
                if hello is None:
                    raise FrameError("bad_hello", "closed before its hello")
                peer, listening = decode_hello(codec, hello, here)
                await stream.send_all(self._new_hello(source))
        except (FrameError, WireError) as exc:
            self.drops.drop(exc.reason, f"{exc.detail}; connection closed", peer_label)
            await trio.aclose_forcefully(stream)
            return
        except (trio.TooSlowError, *_STREAM_ERRORS) as exc:
            self.drops.drop("bad_hello", f"no hello: {type(exc).__name__}", peer_label)
            await trio.aclose_forcefully(stream)
            return
        self.counters["connections_accepted"] += 1
        await self._run(Connection(stream, reader, peer, listening, peer), None, None)

    def _configure(self, stream: trio.SocketStream) -> None:
        sock = stream.socket
        if not self.tcp_nodelay:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
        if self.recv_buf_size or self.send_buf_size:
            self.buffers = set_buffers(
                f"TCP {self.local_address}",
                [
                    (sock, socket.SO_RCVBUF, self.recv_buf_size, "recv_buf_size"),
                    (sock, socket.SO_SNDBUF, self.send_buf_size, "send_buf_size"),
                ],
            )

    async def _run(self, conn: Connection, via: Physical | None, expected: Address | None) -> None:
        """Register ``conn``, then read and write it until it is closed."""
        me = self.local_address
        if conn.peer == me:
            self.drops.drop("self_connection", "connected to itself", conn.peer_physical)
            await trio.aclose_forcefully(conn.stream)
            self._fail_pending(via, expected, "connected to itself")
            return
        self.table.add(conn.peer, conn.peer_physical)
        self._register(conn, via, expected)
        try:
            with conn.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write_loop, conn, nursery.cancel_scope)
                    if await self._read_loop(conn):
                        self._unregister(conn)  # the peer is done: new sends open a new one
                        conn.retire(self.close_timeout)
                    else:
                        nursery.cancel_scope.cancel()
        finally:
            self._unregister(conn)
            conn.close()
            self.counters["connections_closed"] += 1
            await trio.aclose_forcefully(conn.stream)

    def _register(self, conn: Connection, via: Physical | None, expected: Address | None) -> None:
        peer = conn.peer
        existing = self._conns.get(peer)
        if existing is None or existing.retiring:
            self._conns[peer] = conn
        else:
            keep = existing
            if existing.initiator != conn.initiator:
                me = self.local_address
                assert me is not None
                lower = min(me, peer)
                keep = existing if existing.initiator == lower else conn
            loser = conn if keep is existing else existing
            self._conns[peer] = keep
            loser.retire(self.close_timeout)
            self.counters["duplicate_connections_retired"] += 1
        winner = self._conns[peer]
        for pending in (
            self._pending.pop(peer, None),
            None if via is None else self._host_pending.pop(via, None),
        ):
            if pending is not None:
                for data in pending.frames:
                    winner.enqueue(data)
                self.counters["bundles_sent"] += len(pending.frames)
                self.counters["msgs_sent"] += pending.msgs
                self.counters["bytes_sent"] += sum(map(len, pending.frames))
                pending.done.set()
        if expected is not None and expected != peer:
            self._fail_pending(None, expected, f"{expected} no longer listens there", gone=True)

    def _unregister(self, conn: Connection) -> None:
        if self._conns.get(conn.peer) is conn:
            del self._conns[conn.peer]

    def _fail_pending(
        self, via: Physical | None, expected: Address | None, why: str, *, gone: bool = False
    ) -> None:
        """Drop, counted, what waits for a connection to member ``expected`` or endpoint ``via``.

        ``gone``: the peer has stopped (nothing listens where it did, or another
        member does now). That, like any `_departure`, is logged at DEBUG only.
        """
        quiet = gone or self._departure(expected)
        for pending, who in (
            (None if expected is None else self._pending.pop(expected, None), expected),
            (None if via is None else self._host_pending.pop(via, None), via),
        ):
            if pending is not None:
                self.send_drops.drop("connect_failed", why, who, pending.msgs, quiet=quiet)
                pending.done.set()

    def _member(self, peer: Address) -> bool:
        """Whether a full send queue to ``peer`` may make us wait: it is in the installed
        view or the one being installed, or no view is installed yet (a transport on its
        own). A peer outside the view that does not read (a misbehaving or hostile one,
        issue 18) gets its frames dropped instead, so that it cannot stall what this member
        sends to everyone else."""
        view, next_view = self.view, self._next_view
        return view is None or peer in view or (next_view is not None and peer in next_view)

    def _departure(self, peer: Address | None) -> bool:
        """Whether losing what was queued for ``peer`` is part of a departure, not a failure.

        True while this transport is stopping (its task is being cancelled: what a
        member shutting down has not sent is lost), and for a ``peer`` that
        neither the installed view nor the one being installed has: it left or
        was excluded, and GMS has said so.
        """
        if trio.current_effective_deadline() == -math.inf:
            return True
        view = self.view
        if peer is None or view is None or peer in view:
            return False
        return self._next_view is None or peer not in self._next_view

    async def _write_loop(self, conn: Connection, scope: trio.CancelScope) -> None:
        try:
            await conn.write_loop()
        except _STREAM_ERRORS as exc:
            lost = len(conn.out) // 2
            if lost:
                quiet = self._departure(conn.peer)
                self.send_drops.drop("connection_lost", str(exc), conn.peer, lost, quiet=quiet)
            scope.cancel()

    async def _read_loop(self, conn: Connection) -> bool:
        """Deliver frames until the peer's EOF (True) or an error (False)."""
        codec = self._codec
        up = self._up
        me = self.local_address
        assert codec is not None and up is not None
        drops = self.drops
        counters = self.counters
        peer = conn.peer
        while True:
            try:
                frames = await conn.reader.frames()
            except FrameError as exc:
                drops.drop(exc.reason, f"{exc.detail}; connection closed", peer)
                return False
            except _STREAM_ERRORS:
                return False
            if not frames:
                return True
            conn.last_used = trio.current_time()
            if self._poller is not None:
                self._poller.arm()  # more may follow (the next request, the rest of a burst)
            batch: list[Message] = []
            for data in frames:
                counters["bytes_received"] += len(data)  # every frame, dropped or not
                try:
                    bundle = codec.decode(data)
                except WireError as exc:
                    drops.drop(exc.reason, exc.detail, peer)
                    continue
                if bundle.src != peer:
                    drops.drop("wrong_src", f"bundle from {bundle.src} on this connection", peer)
                    continue
                if bundle.dest is not None and bundle.dest != me:
                    drops.drop("wrong_dest", f"bundle for {bundle.dest}", peer)
                    continue
                counters["bundles_received"] += 1
                batch.extend(bundle.messages)
            if batch:
                counters["msgs_received"] += len(batch)
                counters["batches_up"] += 1
                await up.send(batch)
            else:  # the reader does not await while data is ready: a stream of bad frames
                await trio.lowlevel.checkpoint()  # must not starve the other tasks

    async def _reap_loop(self) -> None:
        while True:
            await trio.sleep(self.conn_expire_time / 4)
            horizon = trio.current_time() - self.conn_expire_time
            for conn in list(self._conns.values()):
                if not conn.out and conn.last_used <= horizon:
                    self._unregister(conn)
                    conn.retire(self.close_timeout)
                    self.counters["connections_reaped"] += 1

    def _new_hello(self, to: Physical) -> bytes:
        """A hello encoded for one connection, bound to its other end ``to`` (see
        `_tcp_conn`): sealed, each has its own nonce, so a peer's replay window
        never takes a second connection for a replayed first."""
        assert self._codec is not None and self.local_address is not None
        assert self.physical is not None
        return encode_hello(self._codec, self.local_address, self.physical, (to[0], to[1]))

    # --- stats -------------------------------------------------------------------------

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
