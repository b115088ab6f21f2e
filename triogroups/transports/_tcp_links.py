"""TCP's connections: opening, accepting, one per pair of members, reading and retiring.

`TcpLinks` is the half of `TcpTransport` (its base) that owns the connections:
a connection is opened on demand (`_connect`, retried while the member is in
the view) or accepted, starts with a hello each way, is registered as the one
connection of its pair (`_register`: the lower address's wins), is read frame
by frame into the layer above (`_read_loop`), and is retired when idle. The
send path, the events and the properties are `TcpTransport`'s (`tcp`).
"""

from __future__ import annotations

import logging
import math
import socket

import trio

from triogroups.address import Address
from triogroups.events import ForeignEndpoint
from triogroups.message import Message
from triogroups.transports._addresses import Physical, format_physical
from triogroups.transports._socket_transport import SocketTransport
from triogroups.transports._sockets import set_buffers
from triogroups.transports._tcp_conn import (
    Connection,
    FrameError,
    FrameReader,
    decode_hello,
    encode_hello,
)
from triogroups.transports.base import UpChannel
from triogroups.view import View
from triogroups.wire import WireCodec, WireError

__all__ = ["Pending", "TcpLinks"]

_log = logging.getLogger("triogroups.transports.tcp")
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


class Pending:
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


class TcpLinks(SocketTransport):
    """The connections of a `TcpTransport` (its base class: see the module docstring)."""

    # TcpTransport's properties these methods read (SocketTransport has the address
    # table, the bound address, the buffers and the drop logs)
    recv_buf_size: int
    send_buf_size: int
    tcp_nodelay: bool
    max_frame_size: int
    sock_conn_timeout: float
    conn_expire_time: float
    close_timeout: float
    # the state TcpTransport.__init__ sets
    _next_view: View | None
    _conns: dict[Address, Connection]
    _pending: dict[Address, Pending]
    _host_pending: dict[Physical, Pending]
    _codec: WireCodec | None
    _nursery: trio.Nursery | None
    _up: UpChannel | None

    async def _connect(self, where: Physical, expected: Address | None) -> None:
        """Open a connection to ``where`` and run it; queued bundles go out once it is up.

        An attempt to a member of the view that times out or fails without being
        refused (the member is paused, or slow to send its hello) is made again, the
        bundles kept, while the member stays in the view (or the one being installed)
        and it has not connected to us meanwhile: with NAKACK2 in seed 003's mode
        (``xmit_interval = 0``, no retransmission) bundles dropped here would be lost for
        good (a chaos run: a member paused for 4 s lost a joiner's first multicasts this
        way, and its window for the joiner stayed stuck before them). Senders get
        back-pressure meanwhile, as from a member that does not read. Refused means
        nothing listens there: it is gone.
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

    def _retries(self, peer: Address, pending: Pending | None, error: Exception) -> bool:
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
