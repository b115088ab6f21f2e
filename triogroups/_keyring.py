"""Shared-secret mode: the keys that seal and open every bundle of a cluster.

A `Keyring` holds the AES-GCM keys a member seals its bundles with and opens
its peers' bundles with; `WireCodec` calls it for every datagram and frame
once a member has a secret. It never logs, prints or returns a secret or a
key: what it shows (``repr``, `stats`) is the key ids, which are HKDF outputs
of their own and say nothing about the key.

Keys: ``HKDF-SHA256(secret, info = "triogroups aes-gcm key" + cluster)``, so
one secret gives every cluster its own key, and the key id is a second HKDF
output (``"triogroups key id" + cluster``, 4 bytes) that travels in the
bundle's auth slot: a receiver picks the key by its id, and an unknown id is
a wrong secret or a retired key (``unknown_key``).

Nonces never repeat under a key: 8 random bytes drawn per keyring (a new
keyring per stack incarnation, so a restarted member draws a new prefix)
then a 4-byte counter; when the counter runs out the prefix is drawn again.

Replays: for every sender stream (nonce prefix) a window of the last
``REPLAY_WINDOW`` counters is kept, and a bundle whose counter was seen, or
is older than the window, is dropped (``replay``) after its tag checked out,
so only genuine traffic can create or move a window. At most ``MAX_STREAMS``
streams are kept, the oldest forgotten first: a replay of a long gone
incarnation's traffic is caught by its key being retired, not here.

Rotation (`install`): the new key is accepted at once, senders keep the
old one for ``rollover / 2`` and then switch, and the old key is refused
after ``rollover``. So every member must install the new secret within
``rollover / 2`` of the others: each then accepts the new key before any
member sends with it, and sends with it before any member refuses the old
one, and no bundle is lost to the rotation (a stack may run without retransmission).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from triogroups.wire import WireError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["MAX_STREAMS", "REPLAY_WINDOW", "SEAL_SLOT", "Keyring", "key_id"]

KEY_ID_SIZE = 4
NONCE_PREFIX_SIZE = 8
NONCE_SIZE = 12
#: The auth slot of a sealed bundle: key id, then nonce.
SEAL_SLOT = KEY_ID_SIZE + NONCE_SIZE
TAG_SIZE = 16
REPLAY_WINDOW = 1 << 14
MAX_STREAMS = 1024
_COUNTER_END = 1 << 32
_WINDOW_MASK = (1 << REPLAY_WINDOW) - 1
_SLOT_LEN = bytes((SEAL_SLOT,))


@functools.cache
def _crypto() -> SimpleNamespace:
    """`cryptography`'s parts, imported when the first key is made: a member without a
    secret never loads them (they hold ~6.5 MiB of a process's memory, a sixth of an
    idle member's)."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return SimpleNamespace(InvalidTag=InvalidTag, hashes=hashes, AESGCM=AESGCM, HKDF=HKDF)


def _hkdf(secret: bytes, info: bytes, length: int) -> bytes:
    c = _crypto()
    hkdf = c.HKDF(algorithm=c.hashes.SHA256(), length=length, salt=None, info=info)
    derived: bytes = hkdf.derive(secret)
    return derived


def key_id(secret: bytes, cluster: str) -> bytes:
    """The 4-byte id of ``secret``'s key for ``cluster``, as bundles carry it."""
    return _hkdf(secret, b"triogroups key id " + cluster.encode(), KEY_ID_SIZE)


class _Key:
    __slots__ = ("aead", "id", "refused_from")

    def __init__(self, secret: bytes, cluster: str) -> None:
        material = _hkdf(secret, b"triogroups aes-gcm key " + cluster.encode(), 32)
        self.aead: AESGCM = _crypto().AESGCM(material)
        self.id = key_id(secret, cluster)
        self.refused_from: float | None = None  # set on the old key during a rollover


def _check_secret(secret: bytes) -> bytes:
    if not isinstance(secret, bytes | bytearray):
        raise TypeError(f"secret must be bytes, got {type(secret).__name__}")
    if len(secret) < 16:
        raise ValueError(f"secret must be at least 16 bytes, got {len(secret)}")
    return bytes(secret)


class Keyring:
    """The keys of one member (one stack incarnation) of ``cluster``.

    ``clock`` gives the current time for rollovers (`trio.current_time` in
    the transports, so the simulated network's virtual clock works too).
    """

    def __init__(self, cluster: str, secret: bytes, *, clock: Callable[[], float]) -> None:
        self.cluster = cluster
        self._clock = clock
        self._send = _Key(_check_secret(secret), cluster)
        self._keys: dict[bytes, _Key] = {self._send.id: self._send}
        self._next: _Key | None = None  # installed, sent with from _switch_at
        self._switch_at = 0.0
        self._prefix = os.urandom(NONCE_PREFIX_SIZE)
        self._counter = 0
        self._streams: dict[bytes, list[int]] = {}  # nonce prefix -> [highest, seen bits]
        self.counters = {"sealed": 0, "opened": 0, "installed": 0, "retired": 0}

    def __repr__(self) -> str:
        return f"<Keyring {self.cluster!r} keys {self.key_ids()}>"

    def key_ids(self) -> list[str]:
        """The ids of the keys accepted now, in hex, the sending key first."""
        self._expire(self._clock())
        sending = self._sender().id
        return [sending.hex(), *(k.hex() for k in self._keys if k != sending)]

    # --- rotation ------------------------------------------------------------------

    def install(self, secret: bytes, rollover: float) -> None:
        """Rotate to ``secret``: accepted now, sent with after ``rollover / 2``, the
        current key refused after ``rollover`` (see the module docstring)."""
        key = _Key(_check_secret(secret), self.cluster)
        now = self._clock()
        self._sender()  # finish a rollover that is due before starting the next
        if key.id in self._keys:
            raise ValueError("secret is already installed")
        self._expire(now)
        for old in self._keys.values():
            if old.refused_from is None:
                old.refused_from = now + rollover
        self._keys[key.id] = key
        self._next = key
        self._switch_at = now + rollover / 2
        self.counters["installed"] += 1

    def _sender(self) -> _Key:
        nxt = self._next
        if nxt is not None and self._clock() >= self._switch_at:
            self._send, self._next = nxt, None
        return self._send

    def _expire(self, now: float) -> None:
        for kid, key in list(self._keys.items()):
            if key.refused_from is not None and now >= key.refused_from:
                del self._keys[kid]
                self.counters["retired"] += 1

    # --- sealing -------------------------------------------------------------------

    def seal(self, head: bytes, body: bytes) -> bytes:
        """``head`` (the prefix up to the auth slot), the slot and the sealed body.

        The whole prefix, cluster name and slot included, is the associated
        data: it is authenticated, not encrypted.
        """
        key = self._send if self._next is None else self._sender()
        counter = self._counter
        if counter == _COUNTER_END:
            self._prefix = os.urandom(NONCE_PREFIX_SIZE)
            counter = 0
        self._counter = counter + 1
        nonce = self._prefix + counter.to_bytes(4, "big")
        aad = head + _SLOT_LEN + key.id + nonce
        self.counters["sealed"] += 1
        return aad + key.aead.encrypt(nonce, body, aad)

    def open(self, data: bytes | memoryview, slot_at: int) -> bytes:
        """The plain body of ``data``, whose auth slot length byte is at ``slot_at``,
        or WireError: ``auth`` (no seal or a bad tag), ``unknown_key``, ``replay``."""
        if data[slot_at] != SEAL_SLOT:
            raise WireError("auth", f"auth slot of {data[slot_at]} bytes, not a seal")
        body_at = slot_at + 1 + SEAL_SLOT
        if len(data) < body_at + TAG_SIZE:
            raise WireError("truncated", "sealed body shorter than its tag")
        kid = bytes(data[slot_at + 1 : slot_at + 1 + KEY_ID_SIZE])
        key = self._keys.get(kid)
        if key is None or (key.refused_from is not None and self._clock() >= key.refused_from):
            raise WireError("unknown_key", f"key id {kid.hex()} is not accepted here")
        nonce = bytes(data[slot_at + 1 + KEY_ID_SIZE : body_at])
        try:
            body = key.aead.decrypt(nonce, data[body_at:], data[:body_at])
        except _crypto().InvalidTag:  # evaluated only when decrypt raised
            raise WireError("auth", "bundle failed authentication") from None
        self._check_replay(nonce)
        self.counters["opened"] += 1
        return body

    def _check_replay(self, nonce: bytes) -> None:
        prefix = nonce[:NONCE_PREFIX_SIZE]
        counter = int.from_bytes(nonce[NONCE_PREFIX_SIZE:], "big")
        streams = self._streams
        stream = streams.get(prefix)
        if stream is None:
            if len(streams) >= MAX_STREAMS:
                del streams[next(iter(streams))]
            streams[prefix] = [counter, 1]
            return
        highest, seen = stream
        if counter > highest:
            stream[0] = counter
            stream[1] = ((seen << (counter - highest)) | 1) & _WINDOW_MASK
            return
        behind = highest - counter
        if behind >= REPLAY_WINDOW or (seen >> behind) & 1:
            raise WireError("replay", f"nonce counter {counter} was seen or is too old")
        stream[1] = seen | (1 << behind)

    def stats(self) -> dict[str, Any]:
        return {**self.counters, "key_ids": self.key_ids(), "streams": len(self._streams)}

    def reset_stats(self) -> None:
        """Zero the counters `stats` reports (a probe's reset); never the nonce counter."""
        counters = self.counters
        for key in counters:
            counters[key] = 0
