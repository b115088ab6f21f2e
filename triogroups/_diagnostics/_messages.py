"""Probe requests and answers on the wire: bundles of the project's codec.

A request and an answer are each one bundle (`WireCodec`) holding one
message whose payload is a msgpack map, so the prefix checks of every
datagram apply: the cluster name (a probe for another cluster is dropped
before any parsing), the wire version and, in shared-secret mode, the seal
(a probe without the cluster's key is refused like any unsealed bundle). A
probe that names no cluster carries `ANY_CLUSTER` and is answered only by
members without a secret.

Request map: ``op`` ("report", "reset" or "set"), ``id`` (echoed as the
answer's ``probe_id``), ``members`` (names or address prefixes; empty: all),
and for "set" ``protocol``, ``property`` and ``value``.
"""

from __future__ import annotations

from typing import Any

import msgpack

from triogroups.address import Address
from triogroups.message import Message
from triogroups.wire import MAGIC, WireCodec, WireError

__all__ = [
    "ANY_CLUSTER",
    "OPS",
    "cluster_of",
    "decode_map",
    "encode_map",
]

ANY_CLUSTER = "*"
"""The cluster name a probe carries when it asks every cluster that will answer."""

OPS = ("report", "reset", "set")


def encode_map(codec: WireCodec, dest: Address | None, src: Address, body: dict[str, Any]) -> bytes:
    """One bundle from ``src`` to ``dest`` carrying ``body`` (ValueError if too large)."""
    payload = msgpack.packb(body, use_bin_type=True)
    return codec.encode(dest, src, [Message(dest, payload, src=src)])


def decode_map(codec: WireCodec, data: bytes | memoryview) -> tuple[Address, dict[str, Any]]:
    """The sender and the map of a request or answer bundle; WireError otherwise."""
    bundle = codec.decode(data)
    if len(bundle.messages) != 1:
        raise WireError(
            "malformed", f"a probe bundle holds one message, got {len(bundle.messages)}"
        )
    try:
        body = msgpack.unpackb(bundle.messages[0].payload, raw=False, strict_map_key=False)
    except Exception as exc:  # hostile input: anything msgpack raises is malformed
        raise WireError("malformed", f"payload: {type(exc).__name__}") from None
    if not isinstance(body, dict):
        raise WireError("malformed", f"payload is a {type(body).__name__}, not a map")
    return bundle.src, body


def cluster_of(data: bytes | memoryview) -> str | None:
    """The cluster name in a bundle's prefix, or None when there is no valid prefix."""
    if len(data) < 6 or bytes(data[:2]) != MAGIC:
        return None
    end = 5 + data[4]
    if len(data) < end:
        return None
    try:
        return bytes(data[5:end]).decode()
    except UnicodeDecodeError:
        return None
