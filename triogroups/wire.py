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
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import msgpack

from triogroups.address import Address
from triogroups.message import ALL_FLAGS, Message
from triogroups.view import Digest, MergeView, View, ViewId

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

_BAD_ENTRY = "message entry is not [flags, headers, payload]"
#: View ids off the wire stay below 2**63: a member counts on by one from the highest
#: id it installed, and msgpack encodes nothing above 2**64 - 1, so a peer's (or a forged)
#: view id of 2**64 - 1 would make the next view unsendable.
_VIEW_ID_LIMIT = 1 << 63
#: Any bit outside the defined flags; a negative int has all high bits set, so it is caught too.
_BAD_FLAGS = ~ALL_FLAGS


class WireError(Exception):
    """Bytes that are not a valid bundle for this codec.

    The only exception `WireCodec.decode` raises. ``reason`` is one of
    ``truncated``, ``bad_magic``, ``version``, ``foreign_cluster``, ``auth``,
    ``unknown_key``, ``replay``, ``oversized``, ``malformed``.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


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


# --- header registry ---------------------------------------------------------

_Converter = Callable[[Any], Any]


class _HeaderSpec(NamedTuple):
    cls: type
    convert: _Converter  # raw list -> header instance, or ValueError/TypeError
    hints: dict[str, Any]  # the field types both `convert` and the decode loop check


_HEADERS: dict[int, _HeaderSpec] = {}
_CONVERTERS: dict[int, _Converter] = {}  # protocol id -> its spec's convert, for the decode loop
#: Protocol ids whose header may be an int (``int`` headers, ``bare_int``): the decode loop
#: keeps an int under one of them as it is, before any other check.
_INT_HEADERS: set[int] = set()
_EXACT = {int: "int", bool: "bool", str: "str", bytes: "bytes"}


def _compile_header(cls: type, hints: dict[str, Any], bare_int: bool = False) -> _Converter:
    """One function per header class: unpack, check each field inline, build the tuple.

    Decoding runs for every header of every message received, so instead of
    a generic loop over per-field checkers this generates straight-line code
    (see `_FieldCode` for the shapes checked inline; others call their
    converter). The body is unpacked with arrays as tuples, so when no field
    needed a conversion the raw tuple itself becomes the header: no second
    tuple. The generated source is kept on the function as ``__source__`` for
    inspection; tests check it agrees with the generic ``_converter(cls)``.
    With ``bare_int`` an int is returned as it is (see `register_header`).
    """
    code = _FieldCode({"_new": tuple.__new__})
    lines = ["def convert(raw):"]
    if bare_int:
        lines += ["    if type(raw) is int:", "        return raw"]
    built = _header_check(cls, hints, code, "_cls", "    ", lines)
    lines.append(f"    return {built}")
    source = "\n".join(lines)
    env = code.env
    exec(source, env)  # generated from type hints only, never from input
    convert = env["convert"]
    convert.__source__ = source
    return convert  # type: ignore[no-any-return]


def _header_check(
    cls: type, hints: dict[str, Any], code: _FieldCode, ref: str, ind: str, out: list[str]
) -> str:
    """Append to ``out`` the lines that check ``raw`` as a ``cls`` header (ValueError or
    TypeError when it is not one); return the expression that builds the header.

    ``ref`` names ``cls`` in ``code.env``. Shared by a header's converter and the
    generated decode loop (`_compile_messages`), so both check the same way."""
    if cls is int:  # a header that is one number: the raw value itself, no tuple
        out += [f"{ind}if type(raw) is not int:", f"{ind}    raise ValueError('expected int')"]
        return "raw"
    fields: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    code.env[ref] = cls
    names = [f"f{i}" for i in range(len(fields))]
    out += [
        f"{ind}if type(raw) is not tuple or len(raw) != {len(fields)}:",
        f"{ind}    raise ValueError('{cls.__name__} needs {len(fields)} fields')",
    ]
    if fields:
        out.append(f"{ind}{', '.join(names)}{',' if len(names) == 1 else ''} = raw")
    converted = False
    for name, field in zip(names, fields, strict=True):
        converted = code.check(name, field, hints[field], ind, out) or converted
    if converted:
        return f"_new({ref}, ({', '.join(names)}{',' if len(names) == 1 else ''}))"
    return f"_new({ref}, raw)"


class _FieldCode:
    """Writes the straight-line check of one field value, recursively.

    Inline: exact types (``int``), ``float`` (an int becomes a float),
    Address/View/MergeView/Digest, ``X | None``, ``tuple[X, ...]``, fixed
    tuples and nested NamedTuples, in any nesting. Every data message
    carries a ``tuple[...]`` field (NAKACK2's ``ranges``, the channel's
    ``applied``), almost always empty: inline, an empty array costs one type
    check instead of a converter call, a generator and a new tuple.
    Everything else (ViewId, maps) calls its generic converter. The rules
    are the generic `_converter`'s, except that arrays must be tuples, which
    is all the decoder produces (it unpacks with ``use_list=False``).
    """

    def __init__(self, env: dict[str, Any]) -> None:
        self.env = env
        self._count = 0

    def _fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def check(self, var: str, label: str, tp: Any, ind: str, out: list[str]) -> bool:
        """Append to ``out`` the lines that check ``var`` (indented by ``ind``);
        True if they may rebind ``var`` to a converted value."""

        def fail(expected: str) -> str:
            return f"{ind}    raise ValueError({f'{label}: expected {expected}'!r})"

        if tp in _EXACT:
            out += [f"{ind}if type({var}) is not {_EXACT[tp]}:", fail(_EXACT[tp])]
            return False
        if tp is float:
            out += [
                f"{ind}if type({var}) is not float:",
                f"{ind}    if type({var}) is not int:",
                f"    {fail('float')}",
                f"{ind}    {var} = float({var})",
            ]
            return True
        if tp is Any:
            return False
        if tp in (Address, View, MergeView, Digest):
            ref = self._fresh("_t")
            self.env[ref] = tp
            out += [f"{ind}if not isinstance({var}, {ref}):", fail(tp.__name__)]
            return False
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
            inner = args[0] if args[1] is type(None) else args[1]
            out.append(f"{ind}if {var} is not None:")
            body: list[str] = []
            converted = self.check(var, label, inner, ind + "    ", body)
            out += body or [f"{ind}    pass"]
            return converted
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            out += [f"{ind}if type({var}) is not tuple:", fail("array")]
            item = self._fresh("_i")
            body = []
            if not self.check(item, f"{label}[]", args[0], ind + "        ", body):
                if body:  # most arrays on the wire are empty: no iterator for those
                    out += [f"{ind}if {var}:", f"{ind}    for {item} in {var}:", *body]
                return False
            acc = self._fresh("_o")
            out += [
                f"{ind}if {var}:",
                f"{ind}    {acc} = []",
                f"{ind}    for {item} in {var}:",
                *body,
                f"{ind}        {acc}.append({item})",
                f"{ind}    {var} = tuple({acc})",
            ]
            return True
        if origin is tuple and Ellipsis not in args and args:
            return self._fixed(var, label, list(args), None, ind, out)
        if (
            tp is not ViewId
            and isinstance(tp, type)
            and issubclass(tp, tuple)
            and hasattr(tp, "_fields")
        ):
            hints = typing.get_type_hints(tp)
            return self._fixed(var, label, [hints[f] for f in tp._fields], tp, ind, out)
        ref = self._fresh("_c")
        self.env[ref] = _converter(tp)
        out.append(f"{ind}{var} = {ref}({var})")
        return True

    def _fixed(
        self, var: str, label: str, types_: list[Any], cls: type | None, ind: str, out: list[str]
    ) -> bool:
        """A fixed-length array: a ``tuple[A, B]`` or a NamedTuple (then always built)."""
        what = f"{len(types_)} items" if cls is None else f"{cls.__name__} of {len(types_)} fields"
        out += [
            f"{ind}if type({var}) is not tuple or len({var}) != {len(types_)}:",
            f"{ind}    raise ValueError({f'{label}: expected {what}'!r})",
        ]
        names = [self._fresh("_e") for _ in types_]
        packed = f"({', '.join(names)}{',' if len(names) == 1 else ''})"
        out.append(f"{ind}{packed[1:-1]} = {var}")
        converted = False
        for i, (name, tp) in enumerate(zip(names, types_, strict=True)):
            converted = self.check(name, f"{label}[{i}]", tp, ind, out) or converted
        if cls is not None:
            ref = self._fresh("_nt")
            self.env[ref] = cls
            out.append(f"{ind}{var} = _new({ref}, {packed if converted else var})")
            return True
        if converted:
            out.append(f"{ind}{var} = {packed}")
        return converted


def register_header(
    protocol_id: int, cls: type, *, per_message: bool = False, bare_int: bool = False
) -> None:
    """Register the header NamedTuple of the protocol with this id, or ``int`` for a
    header that is one number (the channel's application seqno): an int on the
    wire and in ``Message.headers``, with no tuple to build or to take apart.

    Field annotations drive validation on decode: int, bool, float, str, bytes,
    Address, View, MergeView, Digest, ViewId (ids below 2**63), ``X | None``, ``tuple[X, ...]``,
    ``dict[K, V]`` and nested registered-style NamedTuples. ``per_message``: most
    messages carry this header (NAKACK2's, UNICAST3's, the channel's, RPC's), so the
    decode loop checks it in line instead of calling its converter (the same checks);
    the first ids registered so are tried first. ``bare_int``: besides the NamedTuple,
    the header may be a bare int, on the wire and in ``Message.headers``, which the
    protocol reads as its most common message (NAKACK2's and MCAST's: a MSG's seqno), so
    that message has no tuple to build, encode, decode or check.
    """
    global _messages
    if not 0 < protocol_id < 1 << 16:
        raise ValueError(f"protocol id must be in 1..65535, got {protocol_id}")
    if cls is not int and not (
        isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")
    ):
        raise TypeError(f"a header is a NamedTuple or int, not {cls!r}")
    existing = _HEADERS.get(protocol_id)
    if existing is not None and existing.cls is not cls:
        raise ValueError(
            f"protocol id {protocol_id} already has header {existing.cls.__name__}, "
            f"cannot register {cls.__name__}"
        )
    hints = {} if cls is int else typing.get_type_hints(cls)
    spec = _HEADERS[protocol_id] = _HeaderSpec(
        cls, _compile_header(cls, hints, bare_int and cls is not int), hints
    )
    _CONVERTERS[protocol_id] = spec.convert
    if cls is int or bare_int:
        _INT_HEADERS.add(protocol_id)
    if per_message and protocol_id not in _INLINE:
        _INLINE.append(protocol_id)
        _messages = _compile_messages(_INLINE)


def header_type(protocol_id: int) -> type | None:
    """The header class registered for ``protocol_id`` (`register_header`), or None."""
    spec = _HEADERS.get(protocol_id)
    return None if spec is None else spec.cls


def _exact(tp: type) -> _Converter:
    def check(value: Any) -> Any:
        if type(value) is not tp:
            raise ValueError(f"expected {tp.__name__}, got {type(value).__name__}")
        return value

    return check


def _float(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise ValueError(f"expected float, got {type(value).__name__}")


def _instance(tp: type) -> _Converter:
    def check(value: Any) -> Any:
        if not isinstance(value, tp):
            raise ValueError(f"expected {tp.__name__}, got {type(value).__name__}")
        return value

    return check


def _converter(tp: Any) -> _Converter:
    if tp is int or tp is bool or tp is str or tp is bytes:
        return _exact(tp)
    if tp is float:
        return _float
    if tp is Any:
        return lambda v: v
    if tp in (Address, View, MergeView, Digest):
        return _instance(tp)
    if tp is ViewId:
        return _check_view_id
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [_converter(a) for a in args if a is not type(None)]
        optional = type(None) in args
        if len(inner) != 1:
            raise TypeError(f"header unions must be 'X | None', got {tp}")
        conv = inner[0]
        if optional:
            return lambda v: None if v is None else conv(v)
        return conv
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _converter(args[0])
            return lambda v: tuple(item(x) for x in _seq(v))
        items = [_converter(a) for a in args]

        def fixed(v: Any) -> tuple[Any, ...]:
            seq = _seq(v)
            if len(seq) != len(items):
                raise ValueError(f"expected {len(items)} items, got {len(seq)}")
            return tuple(c(x) for c, x in zip(items, seq, strict=True))

        return fixed
    if origin is dict:
        key, val = (_converter(a) for a in args)

        def mapping(v: Any) -> dict[Any, Any]:
            if type(v) is not dict:
                raise ValueError(f"expected map, got {type(v).__name__}")
            return {key(k): val(x) for k, x in v.items()}

        return mapping
    if isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields"):
        hints = typing.get_type_hints(tp)
        convs = [_converter(hints[f]) for f in tp._fields]

        def nested(v: Any) -> Any:
            seq = _seq(v)
            if len(seq) != len(convs):
                raise ValueError(f"{tp.__name__} needs {len(convs)} fields, got {len(seq)}")
            return tp(*(c(x) for c, x in zip(convs, seq, strict=True)))

        return nested
    raise TypeError(f"unsupported header field type {tp!r}")


def _seq(v: Any) -> list[Any] | tuple[Any, ...]:
    if type(v) is not list and type(v) is not tuple:
        raise ValueError(f"expected array, got {type(v).__name__}")
    return v  # type: ignore[no-any-return,unused-ignore]


# --- the codec ---------------------------------------------------------------


class WireCodec:
    """Encodes and decodes bundles for one cluster.

    ``max_size`` bounds both directions: `encode` refuses to produce a larger
    bundle (ValueError) and `decode` rejects one (`WireError` ``oversized``).
    With a ``keyring`` every bundle is sealed and only sealed bundles are
    accepted (shared-secret mode; no ``authenticator`` beside it).
    """

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
        # the last bundle's source and destination, and their extension types: `encode`
        self._last_src: Address | None = None
        self._last_src_ext: msgpack.ExtType | None = None
        self._last_dest: Address | None = None
        self._last_dest_ext: msgpack.ExtType | None = None

    # encoding ---------------------------------------------------------------

    def encode(self, dest: Address | None, src: Address, messages: list[Message]) -> bytes:
        """One bundle; every message's ``src`` defaults to the bundle's ``src``."""
        entries: list[tuple[Any, ...]] = []
        append = entries.append
        for m in messages:
            msrc = m.src
            if msrc is src or msrc is None or msrc == src:  # identity first: no __eq__ call
                append((m.flags, m.headers or None, m.payload))
            else:
                append((m.flags, m.headers or None, m.payload, msrc))
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
        if isinstance(obj, Address):
            return self._address_ext(obj)
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
        return Bundle(dest, src, _messages(entries, dest, src))

    def _ext_hook(self, code: int, data: bytes) -> Any:
        if code == _EXT_ADDRESS:
            return self._address(data)
        inner = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=self._ext_hook)
        if code == _EXT_VIEW:
            vid, members = inner
            return View(_check_view_id(vid), _check_members(members))
        if code == _EXT_MERGE_VIEW:
            vid, members, subgroups = inner
            if type(subgroups) is not list or not all(type(v) is View for v in subgroups):
                raise ValueError("bad merge view subgroups")
            return MergeView(_check_view_id(vid), _check_members(members), subgroups)
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


_MESSAGES_DOC = """Check and build every message of a bundle: the receive path's per-message cost.

One loop with every check inline and no call per message: the messages are
built with ``object.__new__`` and their slots set here, since each field has
just been checked (tests/test_wire_decode_loop.py checks that every
`Message` slot is set, so a new slot cannot be forgotten here). A decoded
header map is converted in place and becomes the message's ``headers``: one
dict per message, not two. The headers registered ``per_message`` (those most
messages carry) are checked in the loop itself, by the code their converter
runs; any other calls its converter. An int under an id whose header may be
one (an ``int`` header, or ``bare_int``: `_INT_HEADERS`) is kept as it is
before any of that: the seqnos every multicast carries. Generated by
`_compile_messages`, the source kept as ``__source__``.
"""

_MESSAGES_HEAD = """\
def _messages(entries, dest, src):
    msgs = []
    append = msgs.append
    converters = _CONVERTERS
    ints = _INT_HEADERS
    for entry in entries:
        if type(entry) is not tuple:
            raise WireError("malformed", _BAD_ENTRY)
        size = len(entry)
        if size == 3:
            flags, hdrs, payload = entry
            msrc = src
        elif size == 4:
            flags, hdrs, payload, msrc = entry
            if type(msrc) is not Address:
                raise WireError("malformed", "bad message source")
        else:
            raise WireError("malformed", _BAD_ENTRY)
        if type(flags) is not int or flags & _BAD_FLAGS:
            raise WireError("malformed", f"bad flags {flags!r}")
        if type(payload) is not bytes:
            raise WireError("malformed", "payload is not bytes")
        if hdrs is None:
            hdrs = {}
        elif type(hdrs) is dict:
            for pid, raw in hdrs.items():
                if type(pid) is not int:
                    raise WireError("malformed", f"unknown protocol id {pid!r}")
                if type(raw) is int and pid in ints:
                    continue  # an int header, or a bare seqno: kept as it is
                try:"""

_MESSAGES_OTHER = (  # a header not checked in line: its converter
    "convert = converters.get(pid)",
    "if convert is None:",
    '    raise WireError("malformed", f"unknown protocol id {pid!r}")',
    "hdrs[pid] = convert(raw)  # same key: safe while iterating",
)

_MESSAGES_TAIL = """\
                except (ValueError, TypeError) as exc:
                    name = _HEADERS[pid].cls.__name__
                    raise WireError("malformed", f"header {name}: {exc}") from None
        else:
            raise WireError("malformed", "headers are not a map")
        msg = _new_message(Message)
        msg.dest = dest
        msg.src = msrc
        msg.flags = flags
        msg.headers = hdrs
        msg.payload = payload
        append(msg)
    return msgs"""


def _compile_messages(inline: list[int]) -> Callable[..., list[Message]]:
    """The decode loop, with the headers of ``inline`` (protocol ids, checked in this
    order) checked in line; see ``_MESSAGES_DOC``."""
    code = _FieldCode({"_new": tuple.__new__})
    code.env.update(
        _new_message=object.__new__,
        Address=Address,
        Message=Message,
        WireError=WireError,
        _BAD_ENTRY=_BAD_ENTRY,
        _BAD_FLAGS=_BAD_FLAGS,
        _CONVERTERS=_CONVERTERS,
        _HEADERS=_HEADERS,
        _INT_HEADERS=_INT_HEADERS,
    )
    lines = [_MESSAGES_HEAD]
    ind = " " * 20
    for n, pid in enumerate(inline):
        spec = _HEADERS[pid]
        lines.append(f"{ind}{'if' if n == 0 else 'elif'} pid == {pid}:")
        # An int under an `_INT_HEADERS` id never gets here (``bare_int``, ``int``).
        built = _header_check(spec.cls, spec.hints, code, f"_h{pid}", ind + "    ", lines)
        lines.append(f"{ind}    hdrs[pid] = {built}  # same key: safe while iterating")
    if inline:
        lines.append(f"{ind}else:")
    other = ind + "    " if inline else ind
    lines += [other + line for line in _MESSAGES_OTHER]
    lines.append(_MESSAGES_TAIL)
    source = "\n".join(lines)
    env = code.env
    exec(source, env)  # generated from type hints only, never from input
    messages = env["_messages"]
    messages.__doc__ = _MESSAGES_DOC
    messages.__source__ = source
    return messages  # type: ignore[no-any-return]


_INLINE: list[int] = []  # protocol ids registered ``per_message``, in registration order
_messages = _compile_messages(_INLINE)


def _check_view_id(vid: Any) -> ViewId:
    if (type(vid) is not list and type(vid) is not tuple) or len(vid) != 2:
        raise ValueError("bad view id")
    counter, coord = vid
    if type(counter) is not int or type(coord) is not Address:
        raise ValueError("bad view id")
    if not 0 <= counter < _VIEW_ID_LIMIT:
        raise ValueError(f"view id {counter} outside 0..2**63-1")
    return ViewId(counter, coord)


def _check_members(members: Any) -> list[Address]:
    if type(members) is not list or not all(type(m) is Address for m in members):
        raise ValueError("bad view members")
    return members
