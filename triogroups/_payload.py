"""Payload encoding: a one-byte tag, then the bytes.

The tag says how the rest was made, so a receiver decodes without being
told: ``RAW`` (the application's own bytes), ``MSGPACK`` (plain values:
None, bool, int, float, str, bytes, lists, tuples as lists, dicts) or
``PICKLE`` (cloudpickle, only when the sender asks for it). A receiver
unpickles only when its channel allows pickle; otherwise the payload is
refused (`PayloadError` with reason ``pickle_refused``), never unpickled.
Nothing here sends or receives; these are pure functions.

An application message (`Channel.send`) whose payload is bytes travels
without the tag, as it is, and every other one with the tag and the
message's `Flag.TAGGED` set (`decode_app_payload`): a receiver hands bytes
over without copying them to cut a tag off. RPC and state-transfer payloads,
which their headers mark, are always tagged.
"""

from __future__ import annotations

import pickle as _pickle
from typing import Any

import cloudpickle
import msgpack

from triogroups._error_root import TriogroupsError

__all__ = [
    "MSGPACK",
    "PICKLE",
    "RAW",
    "PayloadError",
    "decode_app_payload",
    "decode_payload",
    "encode_payload",
]

RAW = 0
MSGPACK = 1
PICKLE = 2
_RAW_TAG = bytes((RAW,))


class PayloadError(TriogroupsError):
    """Bytes that are not a payload this channel accepts; ``reason`` is a stats key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def encode_payload(value: Any, *, pickle: bool = False) -> bytes:
    """Tag and encode ``value``; raises TypeError for what cannot be encoded.

    bytes-like values travel as they are; anything else as msgpack, or with
    cloudpickle when ``pickle`` is true.
    """
    if type(value) is bytes:  # what most sends carry: one copy, the tag in front
        return _RAW_TAG + value
    if isinstance(value, bytes | bytearray | memoryview):
        return _RAW_TAG + bytes(value)
    if pickle:
        try:
            body: bytes = cloudpickle.dumps(value)
        except Exception as exc:
            raise TypeError(
                f"payload of type {type(value).__name__} cannot be pickled: {exc}"
            ) from None
        return bytes((PICKLE,)) + body
    try:
        packed: bytes = msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(
            f"payload of type {type(value).__name__} is not msgpack-able ({exc}); "
            "send bytes, plain values, or pass pickle=True"
        ) from None
    return bytes((MSGPACK,)) + packed


def decode_payload(data: bytes, *, allow_pickle: bool) -> tuple[Any, bytes]:
    """The value and the untagged bytes; raises PayloadError, never anything else."""
    if not data:
        raise PayloadError("malformed", "empty payload")
    tag, body = data[0], data[1:]
    if tag == RAW:
        return body, body
    if tag == MSGPACK:
        try:
            return msgpack.unpackb(body, raw=False, strict_map_key=False), body
        except Exception as exc:  # hostile input: anything msgpack raises is malformed
            raise PayloadError("malformed", f"bad msgpack: {type(exc).__name__}") from None
    if tag == PICKLE:
        if not allow_pickle:
            raise PayloadError("pickle_refused", "pickled payload and allow_pickle is off")
        try:
            return _pickle.loads(body), body
        except Exception as exc:
            raise PayloadError("malformed", f"cannot unpickle: {type(exc).__name__}") from None
    raise PayloadError("malformed", f"unknown payload tag {tag}")


def decode_app_payload(data: bytes, tagged: bool, *, allow_pickle: bool) -> tuple[Any, bytes]:
    """An application message's value and bytes: an untagged payload is the bytes the
    application sent; a tagged one (`Flag.TAGGED`) is `decode_payload`'s."""
    if not tagged:
        return data, data
    return decode_payload(data, allow_pickle=allow_pickle)
