"""The diagnostics sockets of one stack: where probes arrive and answers leave.

`serve_diagnostics` runs beside a stack's layers (the stack host starts it)
for the life of the stack, across incarnations. It listens where the
transport binds (``bind_addr``, loopback by default):

- ``diag_enable_udp`` (UDP stacks): joins ``diagnostics_addr`` on
  ``diagnostics_port`` (shared by every member of the host) and answers each
  request by unicast from a socket of its own;
- ``diag_enable_tcp`` (TCP stacks, no multicast): listens on the first free
  port of ``diagnostics_port`` .. ``+ diagnostics_port_range``; a probe
  connects, sends one length-prefixed request and reads one length-prefixed
  answer.

Diagnostics never take a member down: sockets that cannot open are logged
once and left out, and a connection that misbehaves is closed.
"""

from __future__ import annotations

import errno
import logging
import socket
import struct

import trio

from triogroups._diagnostics._responder import MAX_REQUEST, DiagnosedStack, Responder
from triogroups._log import warn_once
from triogroups.transports._sockets import bind_in_range, close_socket, multicast_socket
from triogroups.transports.base import Transport
from triogroups.wire import MAX_DATAGRAM

__all__ = ["MAX_FRAME", "serve_diagnostics"]

_log = logging.getLogger("triogroups.inspector")

MAX_FRAME = 16 << 20  # an answer over TCP: every stats of a large member fits
_LEN = struct.Struct("!I")
_TCP_IO_TIMEOUT = 5.0  # a probe that connects and says nothing is let go


async def serve_diagnostics(stack: DiagnosedStack) -> None:
    """Answer probes for ``stack`` until cancelled (returns at once when turned off)."""
    transport = stack.protocols[0]
    assert isinstance(transport, Transport)
    iface = transport.bind_interface()
    if not transport.enable_diagnostics or iface is None:
        return
    responder = Responder(stack)
    stack.diagnostics = responder
    try:
        async with trio.open_nursery() as nursery:
            if transport.diag_enable_udp:
                sockets = _open_udp(transport, iface)
                if sockets is not None:
                    responder.udp = f"{transport.diagnostics_addr}:{transport.diagnostics_port}"
                    nursery.start_soon(_serve_udp, responder, *sockets)
            if transport.diag_enable_tcp:
                listener = _open_tcp(transport, iface)
                if listener is not None:
                    responder.tcp = f"{iface}:{listener.socket.getsockname()[1]}"
                    nursery.start_soon(_serve_tcp, responder, listener)
    except Exception:  # a bug here must not take the member down: it stops answering
        _log.exception("diagnostics of %s failed and stopped", stack.name or "-")
        responder.udp = responder.tcp = None


def _open_udp(transport: Transport, iface: str) -> tuple[socket.socket, socket.socket] | None:
    group, port = transport.diagnostics_addr, transport.diagnostics_port
    try:
        listen = multicast_socket(group, port, iface)
    except OSError as exc:
        _cannot(f"multicast {group}:{port} on {iface}", exc)
        return None
    reply = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        reply.bind((iface, 0))
        reply.setblocking(False)
    except OSError as exc:
        listen.close()
        reply.close()
        _cannot(f"unicast on {iface}", exc)
        return None
    return listen, reply


def _open_tcp(transport: Transport, iface: str) -> trio.SocketListener | None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    first, span = transport.diagnostics_port, transport.diagnostics_port_range
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        bind_in_range(sock, iface, first, span)
        sock.listen(16)
    except OSError as exc:
        sock.close()
        _cannot(f"tcp on {iface} in {first}..{first + span}", exc)
        return None
    return trio.SocketListener(trio.socket.from_stdlib_socket(sock))


def _cannot(what: str, exc: OSError) -> None:
    reason = (exc.strerror or str(exc)).lower()
    warn_once(
        _log,
        ("diagnostics", what, exc.errno),
        "diagnostics cannot listen (%s): %s; this member will not answer probes there "
        "(said once per process)",
        what,
        reason,
    )


async def _serve_udp(responder: Responder, listen: socket.socket, reply: socket.socket) -> None:
    try:
        while True:
            await trio.lowlevel.wait_readable(listen)
            while True:
                try:
                    data, sender = listen.recvfrom(MAX_REQUEST + 1)
                except BlockingIOError:
                    break
                except OSError as exc:  # an ICMP error on a previous send, say
                    if exc.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH):
                        continue
                    raise
                answer = await responder.answer(data, MAX_DATAGRAM)
                if answer is not None:
                    try:
                        reply.sendto(answer, sender)
                    except OSError as exc:
                        responder.counters["send_errors"] += 1
                        _log.debug("diag: cannot answer %s: %s", sender, exc)
    finally:
        close_socket(listen)
        close_socket(reply)


async def _serve_tcp(responder: Responder, listener: trio.SocketListener) -> None:
    async def handle(stream: trio.SocketStream) -> None:
        try:
            async with stream:
                with trio.move_on_after(_TCP_IO_TIMEOUT):
                    request = await _read_frame(stream, MAX_REQUEST)
                    if request is None:
                        responder.drop("truncated", "tcp request cut short or too long")
                        return
                    answer = await responder.answer(request, MAX_FRAME)
                    if answer is not None:
                        await stream.send_all(_LEN.pack(len(answer)) + answer)
        except (trio.BrokenResourceError, OSError) as exc:  # the probe went away
            responder.counters["send_errors"] += 1
            _log.debug("diag: tcp probe connection failed: %s", exc)

    async with listener:
        await trio.serve_listeners(handle, [listener])


async def _read_frame(stream: trio.SocketStream, limit: int) -> bytes | None:
    """One length-prefixed frame of at most ``limit`` bytes, or None."""
    head = await _read_exactly(stream, _LEN.size)
    if head is None:
        return None
    (size,) = _LEN.unpack(head)
    if size > limit:
        return None
    return await _read_exactly(stream, size)


async def _read_exactly(stream: trio.SocketStream, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = await stream.receive_some(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)
