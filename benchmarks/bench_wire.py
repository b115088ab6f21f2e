"""Wire codec cost per message, beside msgpack.packb of the bare payload.

Encodes and decodes bundles of 100 messages with a typical reliability
header (seqno, conn-id, first flag) for 100 B and 1 KB payloads, and times
``msgpack.packb(payload)`` / ``msgpack.unpackb`` of the bare payloads in the
same run. Usage: ``python benchmarks/bench_wire.py``.
"""

from __future__ import annotations

import timeit
from typing import NamedTuple

import msgpack

from triogroups import Address, Message, WireCodec, register_header

BUNDLE = 100


class _BenchHeader(NamedTuple):
    seqno: int
    conn_id: int
    first: bool


register_header(65000, _BenchHeader)


def _per_message_us(fn: object, repeat: int, per_call: int) -> float:
    best = min(timeit.repeat(fn, number=repeat, repeat=5))  # type: ignore[arg-type]
    return best / repeat / per_call * 1e6


def _row(codec: WireCodec, size: int) -> None:
    a, b = Address.random("A"), Address.random("B")
    payload = b"x" * size
    msgs = [Message(b, payload, headers={65000: _BenchHeader(i, 42, False)}) for i in range(BUNDLE)]
    data = codec.encode(b, a, msgs)
    packed = [msgpack.packb(payload) for _ in range(BUNDLE)]
    enc = _per_message_us(lambda: codec.encode(b, a, msgs), 200, BUNDLE)
    dec = _per_message_us(lambda: codec.decode(data), 200, BUNDLE)
    pk = _per_message_us(lambda: [msgpack.packb(payload) for _ in range(BUNDLE)], 200, BUNDLE)
    upk = _per_message_us(lambda: [msgpack.unpackb(p) for p in packed], 200, BUNDLE)
    print(
        f"{size:<9}{enc:>8.2f}u{dec:>8.2f}u{pk:>8.2f}u{upk:>8.2f}u{enc / pk:>8.1f}{dec / upk:>8.1f}"
    )


def main() -> None:
    codec = WireCodec("bench", max_size=1 << 20)
    print(f"per message (us), bundles of {BUNDLE}, header (seqno, conn_id, first)")
    print(
        f"{'payload':<9}{'encode':>9}{'decode':>9}{'packb':>9}{'unpackb':>9}"
        f"{'enc x':>8}{'dec x':>8}"
    )
    for size in (100, 1024):
        _row(codec, size)


if __name__ == "__main__":
    main()
