"""Wire codec cost per message, beside the least a msgpack decoder can do.

Encodes and decodes bundles of 100 messages, with a typical reliability
header (seqno, conn-id, first flag) and without headers, for 100 B and 1 KB
payloads. In the same run it times the floors a pure-Python receiver cannot
go below: ``unpackb`` of the same entries alone, and ``unpackb`` plus one
``Message(...)`` per entry with no checks at all (the decoder builds messages
without ``Message.__init__``, so it can come in under the second).

Then the compiled core against the pure-Python reference (issue 43), in the same run:
the per-message loops of both forms (`triogroups._compiled`) behind one codec each, timed
in turns (compiled, pure, pure, compiled, ...) as CPU per bundle of 100, decoding and
encoding, for the 3-field header and for a bare int header (the seqno NAKACK2's and MCAST's
multicasts carry); the medians and their ratio. ``--instructions`` counts the
machine instructions per message of the same work with valgrind's callgrind instead.
Usage: ``python benchmarks/bench_wire.py [--repeat 7] [--instructions]``.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable
from types import ModuleType
from typing import NamedTuple

import msgpack
from _callgrind import (
    check_repeat,
    forms_parser,
    in_turns,
    instructions_per,
    module_forms,
    print_header,
    print_row,
    require_valgrind,
)

from triogroups import Address, Message
from triogroups.extend import WireCodec, register_header

BUNDLE = 100
INT_ID = 65001  # a header that is one int, as NAKACK2's and MCAST's MSG seqno


class _BenchHeader(NamedTuple):
    seqno: int
    conn_id: int
    first: bool


register_header(65000, _BenchHeader)
register_header(INT_ID, int)


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


def _forms() -> dict[str, ModuleType]:
    """The per-message loops by form; "compiled" only where the build made it."""
    return module_forms("_wire_loop")


def _work(form: ModuleType, op: str, header: str) -> Callable[[], object]:
    """One bundle's encode or decode with the loops of ``form``."""
    codec_class = type("BenchCodec", (WireCodec,), {"_loop": form})
    codec = codec_class("bench", max_size=1 << 20)
    a, b = Address.random("A"), Address.random("B")
    payload = b"x" * 100
    msgs = [
        Message(None, payload, headers={65000: _BenchHeader(i, 42, False)})
        if header == "3-field"
        else Message(None, payload, headers={INT_ID: i})
        for i in range(BUNDLE)
    ]
    if op == "encode":
        return lambda: codec.encode(None, a, msgs)
    data = codec.encode(b, a, msgs)
    return lambda: codec.decode(data)


OPS = [("decode", "3-field"), ("decode", "int"), ("encode", "3-field"), ("encode", "int")]


def compare(repeat: int, bundles: int = 400) -> None:
    """CPU per bundle of each form, in turns, medians of ``repeat``, and their ratio."""
    forms = _forms()
    if "compiled" not in forms:
        print("no compiled core in this install: pure Python only")
    title = f"\nCPU per bundle of {BUNDLE} (us), 100 B payloads, medians of {repeat} in turns"
    print_header(title, "op", 18)
    for op, header in OPS:
        works = {name: _work(form, op, header) for name, form in forms.items()}
        print_row(f"{op} {header}", in_turns(works, repeat, bundles, 1e6), ".1f", 18)


def _instructions(form: str, op: str, header: str, bundles: int) -> float:
    """Instructions per message of ``op`` by ``form`` (`instructions_per`)."""

    def args(n: int) -> list[str]:
        return ["--run", form, op, header, str(n)]

    return instructions_per(__file__, args, bundles) / BUNDLE


def count_instructions(bundles: int) -> None:
    """Instructions per message of each form (`instructions_per`)."""
    require_valgrind()
    title = f"instructions per message, bundles of {BUNDLE}, 100 B payloads ({bundles} bundles)"
    print_header(title, "op", 18)
    for op, header in OPS:
        counts = {name: _instructions(name, op, header, bundles) for name in _forms()}
        print_row(f"{op} {header}", counts, ",.0f", 18)


def main() -> None:
    parser = forms_parser(__doc__.split("\n\n")[0], "form op header bundles")
    opts = parser.parse_args()
    check_repeat(parser, opts.repeat)
    if opts.run:
        name, op, header, count = opts.run
        work = _work(_forms()[name], op, header)
        for _ in range(int(count)):
            work()
        return
    if opts.instructions:
        count_instructions(bundles=200)
        return
    table()
    compare(opts.repeat)


def table() -> None:
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
