"""The wire codec: bundles of messages to bytes and back.

Every datagram or TCP frame is one *bundle*: messages from one sender to one
destination (a member or the group), encoded once. Layout::

    b"TG" | version:u8 | flags:u8 | len:u8 cluster | len:u8 auth tag | msgpack body
    body = [dest | nil, src, [[flags, {protocol_id: header} | nil, payload (, src)], ...]]

The fixed prefix lets a receiver drop another cluster's traffic or a newer
wire version without parsing msgpack. The auth tag is produced over the body
by an optional `Authenticator` (room for an AUTH layer). The prefix
``flags`` byte says how the body is transformed: 0 plain, ``SEALED`` for
shared-secret mode, where a `Keyring` encrypts and authenticates the body
with AES-GCM and the auth slot holds the key id and the nonce (see
`triogroups._keyring`). A sealed codec refuses plain bundles and a plain
codec sealed ones (``auth``): one cluster is either encrypted or not.

Decoding is hostile-input safe: whatever the bytes, `WireCodec.decode` either
returns a bundle or raises `WireError`, never anything else. Its ``reason``
is a short code suitable as a stats counter key.

Headers are NamedTuples registered per protocol id with `register_header`
(or a plain ``int``, for a header that is one number); the codec validates
every field against the NamedTuple's annotations, so a protocol never sees a
header of the wrong shape.

The header registry and the header converters generated from it live in
`triogroups._wire_headers` (re-exported here: `register_header`, `header_type`,
`WireError`); the per-message loops (encoding's, and decoding's that checks every message)
live in `triogroups._wire_loop`, compiled by the build when it can be (`triogroups._compiled`
says which form runs: `LOOP`).
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any, NamedTuple, Protocol

import msgpack

from triogroups import _compiled
from triogroups._wire_headers import (
    WireError,
    check_members,
    check_view_id,
    header_type,
    register_header,
)
from triogroups.address import Address
from triogroups.message import Message
from triogroups.view import Digest, MergeView, View

__all__ = [
    "MAGIC",
    "MAX_DATAGRAM",
    "SEALED",
    "WIRE_VERSION",
    "Authenticator",
    "Bundle",
    "Sealer",
    "WireCodec",
    "WireError",
    "header_type",
    "register_header",
]

#: The largest UDP payload over IPv4 (65,535 bytes less 20 of IP and 8 of UDP header): a
#: codec's default ``max_size``, UDP's ceiling for ``max_bundle_size``, the bundle size a
#: protocol assumes until it learns its transport's, and the size of a probe's datagram.
MAX_DATAGRAM = 65_507
MAGIC = b"TG"
#: 2: a channel's bytes payloads travel untagged (`Flag.TAGGED` marks the others); a
#: member of version 1 would cut their first byte off, so the versions refuse each other.
#: 3: a channel's application seqno is a plain int header of its own (``APP_SEQNO``),
#: which a member of version 2 would not look for, and NAKACK2's and MCAST's MSG header
#: is its bare seqno, which version 2 refuses; again the versions refuse each other.
WIRE_VERSION = 3
#: Prefix flag: the body is sealed by a `Keyring` (shared-secret mode).
SEALED = 0x01
_PREFIX_MIN = 6

_EXT_ADDRESS = 1
_EXT_VIEW = 3
_EXT_MERGE_VIEW = 4
_EXT_DIGEST = 5

#: The per-message loops this process runs: compiled, or the pure-Python reference
#: (``TRIOGROUPS_PURE_PYTHON=1``, or no compiled module built). Said once, at import.
LOOP: ModuleType = _compiled.load("_wire_loop")
logging.getLogger(__name__).info("wire codec: %s", _compiled.describe(LOOP))


class Authenticator(Protocol):
    """Signs and verifies bundle bodies (an AUTH layer plugs in here)."""

    def sign(self, body: bytes) -> bytes:
        """The tag for an encoded bundle ``body`` (at most 255 bytes), sent beside it."""
        ...

    def verify(self, body: bytes, tag: bytes) -> bool:
        """True if ``tag`` is a valid tag for ``body``; a bundle that fails is dropped
        (counted as ``auth``), never decoded."""
        ...


class Sealer(Protocol):
    """Seals and opens bundle bodies in shared-secret mode (`triogroups._keyring.Keyring`,
    which sits above the codec: it raises `WireError`)."""

    def seal(self, head: bytes, body: bytes) -> bytes:
        """``head`` (the prefix up to the auth slot), the slot and the sealed body."""
        ...

    def open(self, data: bytes | memoryview, slot_at: int) -> bytes:
        """The plain body of ``data`` (auth slot length byte at ``slot_at``), or WireError."""
        ...


class Bundle(NamedTuple):
    """A decoded datagram or frame: messages from ``src`` to ``dest`` (None = group)."""

    dest: Address | None
    src: Address
    messages: list[Message]


# --- the codec ---------------------------------------------------------------


class WireCodec:
    """Encodes and decodes bundles for one cluster.

    ``max_size`` bounds both directions: `encode` refuses to produce a larger
    bundle (ValueError) and `decode` rejects one (`WireError` ``oversized``).
    With a ``keyring`` every bundle is sealed and only sealed bundles are
    accepted (shared-secret mode; no ``authenticator`` beside it).
    """

    #: The per-message loops (`LOOP`); the tests give a subclass the other form.
    _loop: ModuleType = LOOP

    def __init__(
        self,
        cluster: str,
        *,
        max_size: int = MAX_DATAGRAM,
        authenticator: Authenticator | None = None,
        keyring: Sealer | None = None,
    ) -> None:
        raw = cluster.encode()
        if not 0 < len(raw) < 256:
            raise ValueError(f"cluster name must be 1..255 bytes of utf-8, got {len(raw)}")
        if max_size < 64:
            raise ValueError(f"max_size must be >= 64, got {max_size}")
        self.cluster = cluster
        self.max_size = max_size
        if keyring is not None and authenticator is not None:
            raise ValueError("a codec takes a keyring or an authenticator, not both")
        self.authenticator = authenticator
        self.keyring = keyring
        self._flags = 0 if keyring is None else SEALED
        self._prefix = MAGIC + bytes((WIRE_VERSION, self._flags, len(raw))) + raw
        self._packer = msgpack.Packer(default=self._default, use_bin_type=True)
        self._addresses: dict[bytes, Address] = {}
        self._address_exts: dict[Address, tuple[str, msgpack.ExtType]] = {}
        #: the same extension types by the address object's id, the object kept beside its
        #: ext (so its id is not reused while the entry stands): `_default`'s first look
        self._exts_by_id: dict[int, tuple[Address, msgpack.ExtType]] = {}
        # the last bundle's source and destination, and their extension types: `encode`
        self._last_src: Address | None = None
        self._last_src_ext: msgpack.ExtType | None = None
        self._last_dest: Address | None = None
        self._last_dest_ext: msgpack.ExtType | None = None

    # encoding ---------------------------------------------------------------

    def encode(self, dest: Address | None, src: Address, messages: list[Message]) -> bytes:
        """One bundle; every message's ``src`` defaults to the bundle's ``src``."""
        entries = self._loop.encode_entries(messages, src)
        # The bundle's addresses go in as their extension types, without a `_default`
        # call; the last source and destination are known by identity, without the
        # cache's `Address.__hash__` (a Python call): a member's bundles come from one
        # source, mostly to one peer or the group.
        if src is not self._last_src:
            self._last_src, self._last_src_ext = src, self._address_ext(src)
        if dest is None:
            dest_ext = None
        elif dest is self._last_dest:
            dest_ext = self._last_dest_ext
        else:
            dest_ext = self._address_ext(dest)
            self._last_dest, self._last_dest_ext = dest, dest_ext
        body: bytes = self._packer.pack((dest_ext, self._last_src_ext, entries))
        if self.keyring is not None:
            data = self.keyring.seal(self._prefix, body)
        elif self.authenticator is None:
            data = self._prefix + b"\x00" + body
        else:
            tag = self.authenticator.sign(body)
            if len(tag) > 255:
                raise ValueError(f"auth tag must be at most 255 bytes, got {len(tag)}")
            data = self._prefix + bytes((len(tag),)) + tag + body
        if len(data) > self.max_size:
            raise ValueError(f"bundle of {len(data)} bytes exceeds max_size {self.max_size}")
        return data

    def _default(self, obj: Any) -> Any:
        # An address in a header is the usual case: SEQUENCER's BCAST names its forwarder
        # in every ordered message. Found by identity (addresses are immutable and the
        # decoder hands out one object per address), it costs no `Address.__hash__` and
        # no `_address_ext` call, both Python calls, per message (issue 42).
        known = self._exts_by_id.get(id(obj))
        if known is not None and known[0] is obj:
            return known[1]
        if isinstance(obj, Address):
            ext = self._address_ext(obj)
            if len(self._exts_by_id) >= 4096:
                self._exts_by_id.clear()
            self._exts_by_id[id(obj)] = (obj, ext)
            return ext
        if isinstance(obj, MergeView):
            inner = (obj.view_id, obj.members, obj.subgroups)
            return msgpack.ExtType(_EXT_MERGE_VIEW, self._pack_inner(inner))
        if isinstance(obj, View):
            return msgpack.ExtType(_EXT_VIEW, self._pack_inner((obj.view_id, obj.members)))
        if isinstance(obj, Digest):
            rows = [(m, d, r) for m, (d, r) in obj.items()]
            return msgpack.ExtType(_EXT_DIGEST, self._pack_inner(rows))
        raise TypeError(f"cannot encode {type(obj).__name__} on the wire")

    def _address_ext(self, addr: Address) -> msgpack.ExtType:
        """Every bundle carries its source (and a unicast its destination): built once each.

        Keyed by the address (its UUID) with the name checked, since the name is
        encoded too but plays no part in address equality.
        """
        cached = self._address_exts.get(addr)
        if cached is not None and cached[0] == addr.name:
            return cached[1]
        ext = msgpack.ExtType(_EXT_ADDRESS, addr.to_bytes() + addr.name.encode())
        if len(self._address_exts) >= 4096:
            self._address_exts.clear()
        self._address_exts[addr] = (addr.name, ext)
        return ext

    def _pack_inner(self, obj: Any) -> bytes:
        return msgpack.packb(obj, default=self._default, use_bin_type=True)  # type: ignore[no-any-return]

    # decoding ---------------------------------------------------------------

    def check_prefix(self, data: bytes | memoryview) -> int:
        """Validate the fixed prefix; return the offset of the auth length byte."""
        if len(data) < _PREFIX_MIN:
            raise WireError("truncated", f"{len(data)} bytes is shorter than a prefix")
        if len(data) > self.max_size:
            raise WireError("oversized", f"{len(data)} bytes exceeds max_size {self.max_size}")
        if data[:2] != MAGIC:
            raise WireError("bad_magic", f"starts with {bytes(data[:2])!r}")
        if data[2] != WIRE_VERSION:
            raise WireError("version", f"wire version {data[2]}, this member speaks {WIRE_VERSION}")
        if data[3] != self._flags:
            if data[3] == SEALED:
                raise WireError("auth", "sealed bundle, but this member has no secret")
            if data[3] == 0:
                raise WireError("auth", "plain bundle, but this cluster is sealed")
            raise WireError("malformed", f"unsupported prefix flags {data[3]:#x}")
        end = 5 + data[4]
        if data[:end] != self._prefix:
            if len(data) < end:
                raise WireError("truncated", "cluster name cut short")
            theirs = bytes(data[5:end]).decode(errors="replace")
            raise WireError("foreign_cluster", f"cluster {theirs!r}, not {self.cluster!r}")
        return end

    def decode(self, data: bytes | memoryview) -> Bundle:
        """Decode one bundle or raise `WireError`; never raises anything else.

        ``data`` may be a memoryview (a TCP frame in the reader's buffer): every
        decoded value is a copy, nothing keeps a reference to ``data``.
        """
        try:
            return self._decode(data)
        except WireError:
            raise
        except Exception as exc:  # hostile input: anything else is malformed
            raise WireError("malformed", f"{type(exc).__name__}: {exc}") from None

    def _decode(self, data: bytes | memoryview) -> Bundle:
        pos = self.check_prefix(data)
        if len(data) <= pos:
            raise WireError("truncated", "no auth length byte")
        body: bytes | memoryview
        if self.keyring is not None:
            body = self.keyring.open(data, pos)
        else:
            tag_len = data[pos]
            body_at = pos + 1 + tag_len
            if len(data) <= body_at:
                raise WireError("truncated", "no body")
            body = data[body_at:]
            if self.authenticator is not None:
                if not self.authenticator.verify(bytes(body), bytes(data[pos + 1 : body_at])):
                    raise WireError("auth", "bundle failed authentication")
            elif tag_len:
                raise WireError("auth", "bundle carries an auth tag but no authenticator is set")
        top = msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=False,
            ext_hook=self._ext_hook,
            use_list=False,
        )
        if type(top) is not tuple or len(top) != 3:
            raise WireError("malformed", "body is not [dest, src, messages]")
        dest, src, entries = top
        if dest is not None and type(dest) is not Address:
            raise WireError("malformed", "bad destination")
        if type(src) is not Address:
            raise WireError("malformed", "bad source")
        if type(entries) is not tuple:
            raise WireError("malformed", "messages are not an array")
        return Bundle(dest, src, self._loop.decode_messages(entries, dest, src))

    def _ext_hook(self, code: int, data: bytes) -> Any:
        if code == _EXT_ADDRESS:
            # `_address`'s cache hit in line: every BCAST names its forwarder (issue 42)
            addr = self._addresses.get(data)
            return self._address(data) if addr is None else addr
        inner = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=self._ext_hook)
        if code == _EXT_VIEW:
            vid, members = inner
            return View(check_view_id(vid), check_members(members))
        if code == _EXT_MERGE_VIEW:
            vid, members, subgroups = inner
            if type(subgroups) is not list or not all(type(v) is View for v in subgroups):
                raise ValueError("bad merge view subgroups")
            return MergeView(check_view_id(vid), check_members(members), subgroups)
        if code == _EXT_DIGEST:
            entries: dict[Address, tuple[int, int]] = {}
            for m, d, r in inner:
                if type(m) is not Address or type(d) is not int or type(r) is not int:
                    raise ValueError("bad digest entry")
                entries[m] = (d, r)
            return Digest(entries)
        raise ValueError(f"unknown ext type {code}")

    def _address(self, data: bytes) -> Address:
        addr = self._addresses.get(data)
        if addr is None:
            if len(data) < 16:
                raise ValueError("address shorter than 16 bytes")
            addr = Address.from_bytes(data[:16], data[16:].decode())
            if len(self._addresses) >= 4096:
                self._addresses.clear()
            self._addresses[data] = addr
        return addr
