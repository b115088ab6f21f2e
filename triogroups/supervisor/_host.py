"""What the supervisor can check of this host before any member starts.

A stack whose transport binds an address this host does not have, or whose port range holds
fewer ports than there are members, fails in every member, at every restart, the same way. The
supervisor runs on the same host as its members (unless a ``launcher`` moves them elsewhere),
so it checks those once, up front, and refuses with one line naming the stack, the protocol,
the property and the rule. A port that is taken when a member binds it cannot be known here:
that member's `StartupError` ends the run instead.

It also asks the kernel for the socket buffers the stack wants: a shortfall is the same in
every member and every restart, so the group says it once (`buffer_shortfall`) and the members
log it at INFO only.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import sys

from triogroups.config import StackConfig
from triogroups.supervisor._app import AppError

__all__ = ["buffer_shortfall", "check_host"]

# The socket buffer properties of each transport, as (property, option): what `set_buffers`
# asks for in the transport.
_BUFFERS = {
    "UDP": [
        ("ucast_recv_buf_size", socket.SO_RCVBUF),
        ("ucast_send_buf_size", socket.SO_SNDBUF),
        ("mcast_recv_buf_size", socket.SO_RCVBUF),
    ],
    "TCP": [("recv_buf_size", socket.SO_RCVBUF), ("send_buf_size", socket.SO_SNDBUF)],
}
_MAX_BUF = (1 << 31) - 1  # the option is a C int


def check_host(config: StackConfig, members: int, where: str) -> None:
    """Raise `AppError` (one line starting with ``where``, the stack's name) when the
    transport's ``bind_addr`` is not an address of this host, or its port range
    (``bind_port .. bind_port + port_range``) holds fewer ports than ``members``."""
    transport = config.build()[0]
    name = transport.name
    addr = getattr(transport, "bind_addr", None)
    if isinstance(addr, str):
        kind = socket.SOCK_STREAM if name == "TCP" else socket.SOCK_DGRAM
        with socket.socket(socket.AF_INET, kind) as sock:
            try:
                sock.bind((addr, 0))
            except OSError as exc:
                if exc.errno != errno.EADDRNOTAVAIL:
                    raise
                raise AppError(
                    f"{where}: {name}.bind_addr must be an address of this host, got {addr}"
                ) from None
    port, span = getattr(transport, "bind_port", 0), getattr(transport, "port_range", 0)
    if port:
        last = min(port + span, 65535)
        if last - port + 1 < members:
            raise AppError(
                f"{where}: {name}.port_range must give each of the {members} members a port "
                f"of its own, got {port}..{last} ({last - port + 1} ports)"
            )


def buffer_shortfall(config: StackConfig) -> str | None:
    """The socket buffer sizes the stack asks for that this kernel grants less of, with the
    fix, as one line; None when it grants them all."""
    layer = config.layers[0]
    wanted = _BUFFERS.get(layer.name)
    if not wanted:
        return None
    transport = layer.build()
    short = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for prop, option in wanted:
            size = int(getattr(transport, prop))
            if size <= 0:
                continue
            with contextlib.suppress(OSError):  # refused: the size read back says how much
                sock.setsockopt(socket.SOL_SOCKET, option, min(size, _MAX_BUF))
            got = sock.getsockopt(socket.SOL_SOCKET, option)
            if sys.platform == "linux":
                got //= 2  # Linux reports twice the usable size
            if got < size:
                short.append((prop, size, got))
    if not short:
        return None
    sizes = ", ".join(f"{layer.name}.{prop}={size} granted {got}" for prop, size, got in short)
    biggest = max(size for _, size, _ in short)
    return (
        f"the kernel grants smaller socket buffers than the stack asks ({sizes}), so members may "
        f"drop datagrams under load; raise the limits: sysctl -w net.core.rmem_max={biggest} "
        f"net.core.wmem_max={biggest}"
    )
