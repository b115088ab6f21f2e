"""Wire codec cost per message, beside the least a msgpack decoder can do.

Encodes and decodes bundles of 100 messages, with a typical reliability
header (seqno, conn-id, first flag) and without headers, for 100 B and 1 KB
payloads. In the same run it times the floors a pure-Python receiver cannot
go below: ``unpackb`` of the same entries alone, and ``unpackb`` plus one
``Message(...)`` per entry with no checks at all (the decoder builds messages
without ``Message.__init__``, so it can come in under the second). Usage:
``python benchmarks/bench_wire.py``.
"""

from __future__ import annotations

import timeit
from typing import NamedTuple

import msgpack

from triogroups import Address, Message
from triogroups.extend import WireCodec, register_header

BUNDLE = 100


class _BenchHeader(NamedTuple):
    seqno: int
    conn_id: int
    first: bool


register_header(65000, _BenchHeader)


def _per_message_us(fn: object, repeat: int = 200) -> float:
    best = min(timeit.repeat(fn, number=repeat, repeat=7))  # type: ignore[arg-type]
    return best / repeat / BUNDLE * 1e6


def _row(codec: WireCodec, size: int) -> None:
    a, b = Address.random("A"), Address.random("B")
    payload = b"x" * size
    msgs = [Message(b, payload, headers={65000: _BenchHeader(i, 42, False)}) for i in range(BUNDLE)]
    plain = [Message(b, payload) for _ in range(BUNDLE)]
    data = codec.encode(b, a, msgs)
    data_plain = codec.encode(b, a, plain)
    entries = msgpack.packb([(0, None, payload)] * BUNDLE)

    def unpack_and_build() -> list[Message]:
        return [Message(b, p, src=a, flags=f) for f, _, p in msgpack.unpackb(entries)]

    enc = _per_message_us(lambda: codec.encode(b, a, msgs))
    dec = _per_message_us(lambda: codec.decode(data))
    dec_plain = _per_message_us(lambda: codec.decode(data_plain))
    upk = _per_message_us(lambda: msgpack.unpackb(entries))
    floor = _per_message_us(unpack_and_build)
    print(f"{size:<9}{enc:>8.2f}{dec:>8.2f}{dec_plain:>11.2f}{upk:>10.2f}{floor:>18.2f}")


def main() -> None:
    codec = WireCodec("bench", max_size=1 << 20)
    print(f"per message (us), bundles of {BUNDLE}; header = (seqno, conn_id, first)")
    print(
        f"{'payload':<9}{'encode':>8}{'decode':>8}{'decode':>11}{'unpackb':>10}"
        f"{'unpackb+Message()':>18}"
    )
    print(f"{'':<9}{'header':>8}{'header':>8}{'no header':>11}{'no header':>10}{'no header':>18}")
    for size in (100, 1024):
        _row(codec, size)


if __name__ == "__main__":
    main()
