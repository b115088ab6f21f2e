"""The compiled core's per-message loops beyond the codec's, compiled against pure Python.

    python benchmarks/bench_core.py [--repeat 7] [--instructions]

Issue 43 compiles the loops that run once per message (the codec's: `bench_wire.py`).
Here, the others, each over a batch of 100 multicasts of 100 B with each form behind it, in
turns (compiled, pure, pure, compiled, ...): the medians of CPU per message and their
ratio. ``--instructions`` counts the machine instructions per message of the same work
with valgrind's callgrind instead, which the load of a shared machine does not move.

- ``passes all``, ``passes multicasts``: the layer host's scan (`triogroups._layer._scan`).
  A layer that promises to pass some messages on untouched (`Protocol.passes_up`: NAKACK2,
  GMS, MERGE3, FRAG, UFC, MFC, STABLE, ...) is skipped for a batch made only of those; the
  host finds that out with `triogroups._layer._ways.passes`, which reads every message of
  the batch, at every such layer, up and down (about 10 messages scanned per multicast in
  `bench_loopback.py`'s udp preset).
- ``route+pack``: the bundler's loops (`triogroups.transports._bundle_loop`), once per
  message a transport sends: stamping the source and grouping by destination, then
  splitting into bundles below the size limit.
- ``number``: NAKACK2's send loop (`triogroups.protocols._down_loops.number_multicasts`):
  a seqno per multicast, and the copy NAKACK2 delivers at once.
- ``down scans``: FRAG's, UFC's, MFC's and STABLE's loops over a batch going down
  (`largest_payload`, `flow_cost`, `unlooped_bytes`, same module).
- ``send``: the channel's message per `Channel.send` of bytes
  (`triogroups._channel._send_loop.multicast`), numbered.
- ``hand-off``: the channel's hand-off to the receive queue
  (`triogroups._channel._handoff`), once per message delivered to the application: each
  message of a run of one sender's ordered multicasts aligned with the state and made into
  the `Received` record the application reads.
- ``up scans``: the reads protocols make of every batch that comes up
  (`triogroups.protocols._up_scans`): STABLE's and flow control's (MFC) byte counts and
  NAKACK2's look for a VIEW, each reading every message.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

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

from triogroups import Address, Flag, Message, Received
from triogroups._channel._state import Alignment
from triogroups._layer import _ways
from triogroups.protocol import Protocol
from triogroups.protocols import ids

BATCH = 100
PID = 57  # a header id none of the batch's messages carries: every scan reads the whole batch
OTHER = 58  # the header they carry (the one a layer above numbered them with)
PARTS = (
    "passes all",
    "passes multicasts",
    "route+pack",
    "number",
    "down scans",
    "send",
    "hand-off",
    "up scans",
)
MODULES = {
    "passes": "_layer._scan",
    "route+pack": "transports._bundle_loop",
    "number": "protocols._down_loops",
    "down": "protocols._down_loops",
    "send": "_channel._send_loop",
    "hand-off": "_channel._handoff",
    "up": "protocols._up_scans",
}
ME = Address.random("A")


def _forms(part: str) -> dict[str, ModuleType]:
    """The module of ``part`` by form; "compiled" only where the build made it."""
    return module_forms(MODULES[part.split()[0]])


def _work(form: ModuleType, part: str) -> Callable[[], object]:
    """One batch of ``part``'s work, with ``form``'s loops."""
    batch = [Message(None, b"x" * 100, headers={OTHER: i}) for i in range(BATCH)]
    if part == "route+pack":
        route, pack = form.route, form.pack

        def bundle() -> object:
            by_dest, _ = route(batch, ME)
            return pack(by_dest[None], 65_000)

        return bundle
    if part == "number":
        number = form.number_multicasts
        loopback = int(Flag.DONT_LOOPBACK)

        def numbered() -> object:
            for msg in batch:  # each batch goes down afresh: copied and flagged again
                msg.flags &= ~loopback
            return number(batch, 0, ME, PID)

        return numbered
    if part == "down scans":
        largest, cost, unlooped = form.largest_payload, form.flow_cost, form.unlooped_bytes
        return lambda: (largest(batch), cost(batch, True), unlooped(batch, 0))
    if part == "send":
        multicast = form.multicast
        payload = b"x" * 100
        return lambda: [multicast(payload, seqno) for seqno in range(BATCH)]
    if part == "hand-off":
        ready_run = form.ready_run
        align = Alignment()
        ordered = [
            Message(None, b"x" * 100, src=ME, headers={ids.APP_SEQNO: i + 1}) for i in range(BATCH)
        ]

        def hand_off() -> object:
            align.delivered.clear()  # each batch is the sender's seqnos 1..BATCH again
            out: list[Received] = []
            return ready_run(ordered, 0, out, BATCH, align, False)

        return hand_off
    if part == "up scans":
        multicast_bytes, bytes_by_sender = form.multicast_bytes, form.bytes_by_sender
        any_flagged = form.any_flagged
        received = [Message(None, b"x" * 100, src=ME, headers={OTHER: i}) for i in range(BATCH)]

        def count() -> object:
            return (
                multicast_bytes(received, ids.STABLE),
                bytes_by_sender(received, ids.MFC, True, {}),
                any_flagged(received, int(Flag.INTERNAL)),
            )

        return count
    proto = type("Bench", (Protocol,), {"passes_up": part.split()[1]})()
    passes = _ways.passes

    def scan() -> object:
        _ways.SCAN = form
        return passes(proto, _ways.PASS_ASK_UP, batch, PID)

    return scan


def compare(repeat: int, batches: int = 4000) -> None:
    """CPU per message of each form, in turns, medians of ``repeat``, and their ratio."""
    title = f"batches of {BATCH} multicasts, CPU per message (ns), medians of {repeat} in turns"
    print_header(title, "part")
    for part in PARTS:
        works = {name: _work(form, part) for name, form in _forms(part).items()}
        print_row(part, in_turns(works, repeat, batches, 1e9 / BATCH), ".1f")


def _instructions(form: str, part: str, batches: int) -> float:
    """Instructions per message of ``part`` with ``form``'s loops (`instructions_per`)."""

    def args(n: int) -> list[str]:
        return ["--run", form, part, str(n)]

    return instructions_per(__file__, args, batches) / BATCH


def count_instructions(batches: int) -> None:
    """Instructions per message of each form (`instructions_per`)."""
    require_valgrind()
    print_header(f"batches of {BATCH} multicasts, instructions per message", "part")
    for part in PARTS:
        print_row(part, {name: _instructions(name, part, batches) for name in _forms(part)}, ",.1f")


def main() -> None:
    parser = forms_parser(__doc__.split("\n\n")[0], "form part batches")
    opts = parser.parse_args()
    check_repeat(parser, opts.repeat)
    if opts.run:
        name, part, count = opts.run
        work = _work(_forms(part)[name], part)
        for _ in range(int(count)):
            work()
        return
    if opts.instructions:
        count_instructions(batches=2000)
        return
    compare(opts.repeat)


if __name__ == "__main__":
    main()
