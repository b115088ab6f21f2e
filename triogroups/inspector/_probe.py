"""The probe client: ask every member that listens, collect one answer each.

One request goes by multicast to ``diagnostics_addr:diagnostics_port``
(UDP stacks answer there) and, over TCP, to every port of
``diagnostics_port .. + port_range`` on ``bind_addr`` or to the given
``targets`` (TCP stacks, which have no multicast, answer there). Answers
come back until ``timeout``, or until ``expect`` members answered, and each
member counts once whichever way it answered.
"""

from __future__ import annotations

import math
import random
import socket
import struct
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import trio

from triogroups._diagnostics._messages import ANY_CLUSTER, OPS, cluster_of, decode_map, encode_map
from triogroups._diagnostics._service import MAX_FRAME
from triogroups._keyring import Keyring
from triogroups.address import Address
from triogroups.wire import MAX_DATAGRAM, WireCodec, WireError

__all__ = ["probe"]

_LEN = struct.Struct("!I")
Request = Literal["report", "reset", "set"]


async def probe(
    *,
    cluster: str | None = None,
    timeout: float = 2.0,
    request: Request = "report",
    members: Iterable[str] = (),
    protocol: str | None = None,
    property: str | None = None,
    value: Any = None,
    secret: bytes | None = None,
    expect: int | None = None,
    bind_addr: str = "127.0.0.1",
    diagnostics_addr: str = "224.0.75.75",
    diagnostics_port: int = 7500,
    port_range: int = 50,
    ttl: int = 0,
    udp: bool = True,
    tcp: bool = True,
    targets: Sequence[tuple[str, int]] | None = None,
) -> list[dict[str, Any]]:
    """Probe the members that listen; their answers (`build_report` dicts), one per member.

    ``cluster`` limits the probe to one cluster (members of others drop it);
    without it every cluster without a shared secret answers. ``members``
    limits it to members of those names (or address hex prefixes).
    ``request`` is "report", "reset" (zero the counters, then report) or
    "set" (change ``protocol``'s ``property`` to ``value`` at run time, then
    report; a member that cannot answers with an ``error`` key). ``secret``
    probes a cluster in shared-secret mode (``cluster`` is needed then).

    Returns after ``timeout`` seconds, or as soon as ``expect`` members
    answered; sorted by cluster and name. The UDP request goes to
    ``diagnostics_addr:diagnostics_port`` from ``bind_addr`` with multicast
    TTL ``ttl`` (0: this host); TCP requests go to ``targets`` (host, port)
    or to ``bind_addr`` ports ``diagnostics_port`` .. ``+ port_range``.
    """
    if request not in OPS:
        raise ValueError(f"request must be one of {', '.join(OPS)}, got {request!r}")
    if request == "set" and (protocol is None or property is None):
        raise ValueError("request 'set' needs protocol and property")
    if secret is not None and cluster is None:
        raise ValueError("a probe with a secret must name its cluster")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0, got {timeout}")
    body = {
        "op": request,
        "id": random.getrandbits(62),
        "members": list(members),
        "protocol": protocol,
        "property": property,
        "value": value,
    }
    session = _Session(cluster, secret, body["id"], expect)
    me = Address.random("probe")
    data = encode_map(session.codec(cluster or ANY_CLUSTER), None, me, body)
    if targets is None:
        last = min(diagnostics_port + port_range, 65535)
        targets = [(bind_addr, port) for port in range(diagnostics_port, last + 1)]
    sock = await _udp_socket(bind_addr, ttl) if udp else None  # a bad bind_addr: OSError here
    try:
        with trio.move_on_after(timeout):
            async with trio.open_nursery() as nursery:
                session.scope = nursery.cancel_scope
                if sock is not None:
                    group = (diagnostics_addr, diagnostics_port)
                    nursery.start_soon(session.over_udp, sock, data, group)
                if tcp:
                    for host, port in targets:
                        nursery.start_soon(session.over_tcp, data, host, port)
    finally:
        if sock is not None:
            sock.close()
    return sorted(session.answers.values(), key=lambda a: (a.get("cluster"), a.get("name")))


class _Session:
    """One probe's answers and the codecs that open them."""

    def __init__(self, cluster: str | None, secret: bytes | None, ident: int, expect: int | None):
        self.cluster = cluster
        self.secret = secret
        self.ident = ident
        self.expect = math.inf if expect is None else expect
        self.answers: dict[str, dict[str, Any]] = {}
        self.scope: trio.CancelScope | None = None
        self._codecs: dict[str, WireCodec] = {}

    def codec(self, cluster: str) -> WireCodec:
        codec = self._codecs.get(cluster)
        if codec is None:
            keyring = None
            if self.secret is not None and cluster != ANY_CLUSTER:
                keyring = Keyring(cluster, self.secret, clock=trio.current_time)
            codec = WireCodec(cluster, max_size=MAX_FRAME, keyring=keyring)
            self._codecs[cluster] = codec
        return codec

    def take(self, data: bytes) -> None:
        """Keep one answer if it opens, is for this probe and from a new member."""
        name = cluster_of(data)
        if name is None or (self.cluster is not None and name != self.cluster):
            return
        try:
            _src, answer = decode_map(self.codec(name), data)
        except WireError:
            return
        address = answer.get("address")
        if answer.get("probe_id") != self.ident or not isinstance(address, str):
            return
        self.answers.setdefault(address, answer)
        if len(self.answers) >= self.expect and self.scope is not None:
            self.scope.cancel()

    async def over_udp(
        self, sock: trio.socket.SocketType, data: bytes, group: tuple[str, int]
    ) -> None:
        try:
            await sock.sendto(data, group)
        except OSError:  # no multicast route here: the TCP probes may still find members
            return
        while True:
            try:
                answer = await sock.recv(MAX_DATAGRAM + 1)
            except OSError:  # an ICMP error from a closed port: keep listening
                continue
            self.take(answer)

    async def over_tcp(self, data: bytes, host: str, port: int) -> None:
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError:  # nobody listens there
            return
        async with stream:
            try:
                await stream.send_all(_LEN.pack(len(data)) + data)
                answer = await _read_frame(stream)
            except (trio.BrokenResourceError, OSError):
                return
        if answer is not None:
            self.take(answer)


async def _udp_socket(bind: str, ttl: int) -> trio.socket.SocketType:
    """The probe's UDP socket on ``bind``, multicasting there with TTL ``ttl``."""
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        await sock.bind((bind, 0))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(bind))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, ttl)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    except BaseException:
        sock.close()
        raise
    return sock


async def _read_frame(stream: trio.SocketStream) -> bytes | None:
    buf = bytearray()
    need = _LEN.size
    size: int | None = None
    while True:
        while len(buf) < need:
            chunk = await stream.receive_some(max(need - len(buf), 65536))
            if not chunk:
                return None
            buf += chunk
        if size is not None:
            return bytes(buf[_LEN.size : need])
        (size,) = _LEN.unpack(buf[: _LEN.size])
        if size > MAX_FRAME:
            return None
        need = _LEN.size + size
