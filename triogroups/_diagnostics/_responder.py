"""DIAG: one member's side of a probe, from request bytes to answer bytes.

JGroups answers probes from a diagnostics handler in its transport; here the
stack host runs `Responder` on sockets of its own (`serve_diagnostics`), so
the protocol layers and their hot paths never see a probe. This module owns
the decisions: which requests are answered (this cluster, or any cluster
when the member has no secret; this member when the probe names members),
what is done (report, reset the counters, change a property at run time)
and what is counted. It never raises for hostile bytes: a request that does
not decode is dropped and counted by its `WireError` reason.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from triogroups._diagnostics._messages import ANY_CLUSTER, OPS, cluster_of, decode_map, encode_map
from triogroups._diagnostics._report import ReportedStack, build_report
from triogroups.address import Address
from triogroups.properties import PropertyError
from triogroups.transports.base import Transport
from triogroups.wire import MAX_DATAGRAM, WireCodec, WireError

__all__ = ["DiagnosedStack", "Responder"]

_log = logging.getLogger("triogroups.inspector")

MAX_REQUEST = MAX_DATAGRAM  # a request is one datagram at most, over TCP too


class DiagnosedStack(ReportedStack, Protocol):
    """Everything a probe can see or change of a member's stack (`triogroups.stack.Stack`
    is one). The diagnostics sit below the stack host, as JGroups keeps its probe server
    in the transport: the host hands itself over and is never imported here."""

    diagnostics: Responder | None  # set by `serve_diagnostics` while it answers probes

    def reset_stats(self) -> None: ...

    async def set_property(self, protocol: str, key: str, value: Any) -> None: ...


class Responder:
    """Answers probe requests for one stack (all its incarnations).

    `answer` takes a request's bytes and returns the answer's bytes, or None
    when the request is not answered (not for this cluster or member, or
    malformed: counted in `stats` under ``dropped``). ``max_size`` bounds an
    answer: a datagram, or a TCP frame.
    """

    def __init__(self, stack: DiagnosedStack) -> None:
        self.stack = stack
        self.counters = {"requests": 0, "answers": 0, "not_for_me": 0, "too_large": 0}
        self.counters["send_errors"] = self.counters["errors"] = 0
        self.dropped: dict[str, int] = {}
        self.udp: str | None = None  # "group:port" while answering multicast probes
        self.tcp: str | None = None  # "host:port" while answering probes over TCP
        self._codecs: dict[int, WireCodec] = {}  # size (negative: any cluster) -> codec
        self._transport: Transport | None = None  # whose keyring the codecs use

    def stats(self) -> dict[str, Any]:
        """Requests seen and answered, requests dropped per reason, and where it listens."""
        return {**self.counters, "dropped": dict(self.dropped), "udp": self.udp, "tcp": self.tcp}

    def reset_stats(self) -> None:
        """Zero the counters, with the stack's."""
        for key in self.counters:
            self.counters[key] = 0
        self.dropped.clear()

    def _codec(self, size: int, *, any_cluster: bool = False) -> WireCodec:
        """This incarnation's codec (its transport's keyring) for answers of ``size`` bytes
        at most, or the plain codec of `ANY_CLUSTER` requests."""
        transport = self.stack.protocols[0]
        assert isinstance(transport, Transport)
        if transport is not self._transport:  # a new incarnation: a new keyring
            self._transport = transport
            self._codecs.clear()
        key = -size if any_cluster else size
        codec = self._codecs.get(key)
        if codec is None:
            if any_cluster:
                codec = WireCodec(ANY_CLUSTER, max_size=size)
            else:
                codec = transport.make_codec(size)
            self._codecs[key] = codec
        return codec

    def drop(self, reason: str, detail: str) -> None:
        """Count a request that is not answered because it is malformed or refused."""
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        _log.debug("diag of %s: dropped a probe request: %s", self.stack.name or "-", detail)

    def _decode(self, data: bytes | memoryview) -> tuple[Address, dict[str, Any]] | None:
        transport = self.stack.protocols[0]
        assert isinstance(transport, Transport)
        wildcard = cluster_of(data) == ANY_CLUSTER and transport.keyring is None
        try:
            src, request = decode_map(self._codec(MAX_REQUEST, any_cluster=wildcard), data)
        except WireError as exc:
            self.drop(exc.reason, str(exc))
            return None
        op = request.get("op")
        members = request.get("members") or []
        if op not in OPS or not isinstance(members, list):
            self.drop("bad_request", f"op {op!r}, members {members!r}")
            return None
        return src, request

    def _for_me(self, members: list[Any]) -> bool:
        if not members:
            return True
        me = self.stack.address
        hexid = f"{me.uuid:032x}"
        name = self.stack.name or str(me)
        return any(isinstance(m, str) and (m == name or hexid.startswith(m)) for m in members)

    async def answer(self, data: bytes | memoryview, max_size: int) -> bytes | None:
        """The answer to request ``data``, at most ``max_size`` bytes; None: no answer."""
        decoded = self._decode(data)
        if decoded is None:
            return None
        src, request = decoded
        op = request["op"]
        self.counters["requests"] += 1
        if not self._for_me(request.get("members") or []):
            self.counters["not_for_me"] += 1
            return None
        try:
            error = await self._apply(request)
            report = build_report(self.stack)
        except Exception:  # a protocol's stats() or property hook failed: say so, go on
            _log.exception("diag of %s: cannot answer a %s request", self.stack.name or "-", op)
            self.counters["errors"] += 1
            return None
        report["probe_id"] = request.get("id")
        if op != "report":  # whether the reset or set was carried out: a probe's exit status
            report["applied"] = error is None
        if error:
            report["error"] = error
        codec = self._codec(max_size)
        me = self.stack.address
        try:
            out = encode_map(codec, src, me, report)
        except ValueError:
            self.counters["too_large"] += 1
            del report["stats"]
            too_large = f"report larger than {max_size} bytes; probe over TCP for stats"
            report["error"] = f"{error}; {too_large}" if error else too_large
            out = encode_map(codec, src, me, report)
        self.counters["answers"] += 1
        return out

    async def _apply(self, request: dict[str, Any]) -> str | None:
        """Carry out a reset or set; the error's text when it cannot be done."""
        op = request["op"]
        if op == "reset":
            self.stack.reset_stats()
        elif op == "set":
            protocol, key = request.get("protocol"), request.get("property")
            if not isinstance(protocol, str) or not isinstance(key, str):
                return "set needs a protocol and a property"
            try:
                await self.stack.set_property(protocol, key, request.get("value"))
            except (KeyError, PropertyError) as exc:
                return str(exc.args[0]) if exc.args else str(exc)
            _log.info(
                "diag of %s: %s.%s set to %r by a probe",
                self.stack.name or "-",
                protocol,
                key,
                request.get("value"),
            )
        return None
