"""Socket setup shared by the UDP and TCP transports: ports, buffers, multicast, names.

Non-blocking stdlib sockets; the transports wait on them with trio's
`wait_readable` / `wait_writable` and call the non-blocking system calls
directly, so one wake-up can drain many datagrams without an await each.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import socket
import sys
from typing import Any

import trio

from triogroups._log import warn_once
from triogroups.transports._addresses import Physical

__all__ = [
    "bind_in_range",
    "close_socket",
    "is_interface",
    "is_ipv4",
    "listen_in_range",
    "multicast_socket",
    "resolve",
    "set_buffers",
]

_log = logging.getLogger("triogroups.transports")
_MAX_BUF = (1 << 31) - 1  # the option is a C int


def bind_in_range(sock: socket.socket, host: str, port: int, port_range: int) -> int:
    """Bind to the first free port in [port, port + port_range]; 0 means any port.

    Returns the bound port. Raises OSError (with its errno) whose text names
    the cause: "no free port on 127.0.0.1 in 7800..7850: address already in
    use", or "bind_addr 10.255.255.1 is not an address of this host"; the
    system's own OSError is not chained (its text is in this one's), so a
    start-up failure shows one traceback less.
    """
    last = port + port_range if port else 0
    candidates = range(port, min(last, 65535) + 1)
    error: OSError | None = None
    for candidate in candidates:
        try:
            sock.bind((host, candidate))
            return int(sock.getsockname()[1])
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                raise OSError(
                    exc.errno, f"bind_addr {host} is not an address of this host: {_text(exc)}"
                ) from None
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES) or not port:
                raise OSError(exc.errno, f"cannot bind {host}:{candidate}: {_text(exc)}") from None
            error = exc
    assert error is not None
    raise OSError(
        error.errno, f"no free port on {host} in {port}..{last}: {_text(error)}"
    ) from None


def listen_in_range(host: str, port: int, port_range: int, backlog: int) -> socket.socket:
    """A listening TCP socket (SO_REUSEADDR, blocking) on the first free port in
    [port, port + port_range]; 0 means any port. Errors as `bind_in_range`.

    Linux lets SO_REUSEADDR sockets that are not listening yet bind the same port,
    so two members starting together can both bind it; the one that calls listen()
    second gets EADDRINUSE there. That port is taken as surely as one whose bind
    failed: move on to the next one with a fresh socket (a bound socket cannot bind
    again), instead of failing the start.
    """
    last = port + port_range if port else 0
    start = port
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            bound = bind_in_range(sock, host, start, last - start if port else 0)
            try:
                sock.listen(backlog)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or not port:
                    raise
                if bound >= min(last, 65535):
                    raise OSError(
                        exc.errno, f"no free port on {host} in {port}..{last}: {_text(exc)}"
                    ) from None
                sock.close()
                start = bound + 1
                continue
        except BaseException:
            sock.close()
            raise
        return sock


def _text(exc: OSError) -> str:
    """The system's reason in lower case ("address already in use")."""
    return (exc.strerror or str(exc)).lower()


def set_buffers(who: str, wanted: list[tuple[Any, int, int, str]]) -> dict[str, int]:
    """Ask for socket buffer sizes; warn (once per process) if the kernel grants less.

    ``wanted`` holds (stdlib or trio socket, SO_RCVBUF or SO_SNDBUF, bytes, property name);
    0 bytes leaves the kernel default. Linux reports twice the usable size
    (the other half is bookkeeping), so the granted size is halved there.
    The same shortfall is met at every start, restart and TCP connection, so
    it is logged only the first time (`warn_once`). Returns property name ->
    granted bytes.
    """
    granted: dict[str, int] = {}
    short: list[str] = []
    for sock, option, size, prop in wanted:
        if size > 0:
            try:
                sock.setsockopt(socket.SOL_SOCKET, option, min(size, _MAX_BUF))
            except OSError as exc:
                _log.debug("%s: cannot set %s=%d: %s", who, prop, size, exc)
        got = sock.getsockopt(socket.SOL_SOCKET, option)
        if sys.platform == "linux":
            got //= 2
        granted[prop] = got
        if 0 < got < size:
            short.append(f"{prop}={size} granted {got}")
    if short:
        warn_once(
            _log,
            ("socket_buffers", tuple(short)),
            "%s: the kernel granted smaller socket buffers than asked (%s); raise "
            "net.core.rmem_max / wmem_max to avoid drops (said once per process)",
            who,
            ", ".join(short),
        )
    return granted


def multicast_socket(group: str, port: int, interface: str) -> socket.socket:
    """A non-blocking socket receiving ``group:port`` on ``interface``, shareable by members.

    SO_REUSEADDR/SO_REUSEPORT let every member on a host bind the same port;
    on Linux binding to the group address keeps out other groups' datagrams
    sent to that port.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            sock.bind((group, port))
        except OSError:
            sock.bind(("", port))
        membership = socket.inet_aton(group) + socket.inet_aton(interface)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def close_socket(sock: socket.socket) -> None:
    """Close a socket trio may be waiting on (wakes any waiter first)."""
    with contextlib.suppress(RuntimeError):  # outside trio nobody can be waiting
        trio.lowlevel.notify_closing(sock)
    sock.close()


def is_ipv4(value: str) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def is_interface(value: str) -> bool:
    """A specific IPv4 address: members announce it, so "any" (0.0.0.0) will not do."""
    return is_ipv4(value) and not ipaddress.IPv4Address(value).is_unspecified


async def resolve(host: Physical) -> Physical | None:
    """``host`` with its name resolved to an IPv4 address (literals pass as they are)."""
    name, port = host
    if is_ipv4(name):
        return host
    try:
        infos = await trio.socket.getaddrinfo(name, port, socket.AF_INET, socket.SOCK_DGRAM)
    except OSError as exc:
        warn_once(
            _log, ("resolve", name), "cannot resolve %s: %s (said once per process)", name, exc
        )
        return None
    return (str(infos[0][4][0]), port) if infos else None
