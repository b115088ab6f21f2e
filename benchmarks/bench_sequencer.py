"""CPU per message of SEQUENCER's hot paths alone, sans-IO, and of the codec on its BCASTs.

    python benchmarks/bench_sequencer.py [--batches 300] [--instructions] [--paths member,coord]

One `Sequencer` object of a three-member view (A the coordinator), batches of 64
messages of 1 KB, in runs of 16 from one forwarder (as a coordinator's bundles bring
them):

- ``member``: a member's ``up`` delivering the coordinator's BCASTs (every ordered
  multicast, at every member: the delivery table, the log, its own messages back);
- ``coord``: the coordinator's ``up`` turning FORWARDs into BCASTs;
- ``down``: a forwarder's ``down`` turning its multicasts into FORWARDs;
- ``own``: a forwarder's ``up`` delivering its own multicasts back in the order while
  ``IN_FLIGHT`` more wait in its forward table (flow control lets thousands be in
  flight): each takes its entry out of the table;
- ``encode`` and ``decode``: the wire codec on the coordinator's bundle of the same
  BCASTs (the coordinator encodes each once, every member decodes it): each names its
  forwarder, an address in every header, which the other multicasts do not carry.

The table shows microseconds of CPU per message (``process_time`` around the call
only, best of 7 runs with the collector off). ``--instructions`` counts
instructions instead, with valgrind's callgrind (it must be installed): each path
runs in a child process with ``--batches`` and twice as many, with and without the
protocol call, and the difference leaves out start-up and building the messages
(``--batches`` defaults to 60 there; a few minutes on a loaded machine). Instruction
counts do not move with other load; timings on the shared 2-core machine do.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable

from _callgrind import instructions_per, require_valgrind

from triogroups import Message
from triogroups.protocols import ids
from triogroups.protocols.sequencer import BCAST, Sequencer, SequencerHeader
from triogroups.testing import addresses, started, view_of
from triogroups.wire import WireCodec

A, B, C = addresses("ABC")
BATCH = 64
RUN = 16  # messages of one forwarder in a row
PAYLOAD = bytes(1000)
_ID = ids.SEQUENCER
OTHER = 99  # an upper layer's header id, carried along


def _member_batch(first: int) -> list[Message]:
    """BCASTs from coordinator A, runs of B's (ours) and C's messages."""
    return [
        Message(
            None,
            PAYLOAD,
            src=A,
            headers={
                _ID: SequencerHeader(BCAST, first + i, C if (i // RUN) % 2 else B, 0, 1),
                ids.NAKACK2: first + i,
                OTHER: 1,
            },
        )
        for i in range(BATCH)
    ]


def _coord_batch(first: int) -> list[Message]:
    """FORWARDs to A, runs from B and from C, with UNICAST3's header."""
    return [
        Message(
            A,
            PAYLOAD,
            src=B if (i // RUN) % 2 else C,
            headers={_ID: first + i, ids.UNICAST3: 5, OTHER: 1},  # a FORWARD: its seqno
        )
        for i in range(BATCH)
    ]


IN_FLIGHT = 4000  # a forwarder's multicasts not yet back, for ``own``


def _own_batch(first: int) -> list[Message]:
    """BCASTs from coordinator A of B's (ours) seqnos ``first``.."""
    return [
        Message(
            None,
            PAYLOAD,
            src=A,
            headers={_ID: SequencerHeader(BCAST, first + i, B, 0, 1), ids.NAKACK2: first + i},
        )
        for i in range(BATCH)
    ]


def _down_batch(first: int) -> list[Message]:
    return [Message(None, PAYLOAD, headers={OTHER: 1}) for _ in range(BATCH)]


def _wire_batch(first: int) -> list[Message]:
    """The BCASTs coordinator A multicasts, as its transport gets them (only headers the
    codec knows)."""
    return [
        Message(
            None,
            PAYLOAD,
            headers={
                _ID: SequencerHeader(BCAST, first + i, C if (i // RUN) % 2 else B, 0, 1),
                ids.NAKACK2: first + i,
            },
        )
        for i in range(BATCH)
    ]


def run_wire(path: str, batches: int, call: bool = True) -> float:
    """CPU seconds the codec's ``encode`` or ``decode`` of ``batches`` bundles took (none
    with ``call`` false: the messages are only built, and for ``decode`` encoded)."""
    codec = WireCodec("bench", max_size=1 << 20)
    spent = 0.0
    for b in range(batches):
        batch = _wire_batch(1 + b * BATCH)
        if path == "encode":
            if call:
                start = time.process_time()
                codec.encode(None, A, batch)
                spent += time.process_time() - start
            continue
        data = codec.encode(None, A, batch)
        if call:
            start = time.process_time()
            codec.decode(data)
            spent += time.process_time() - start
    return spent


def run(path: str, batches: int, call: bool = True) -> float:
    """CPU seconds ``path``'s protocol calls took over ``batches`` batches (none with
    ``call`` false: the messages are only built)."""
    if path in WIRE_PATHS:
        return run_wire(path, batches, call)
    me = A if path == "coord" else B
    seq = started(Sequencer(), me, view=view_of(A, B, C))
    build = {
        "member": _member_batch,
        "coord": _coord_batch,
        "down": _down_batch,
        "own": _own_batch,
    }[path]
    handle: Callable[[list[Message], float], None] = seq.down if path == "down" else seq.up
    if path == "own":
        seq.down(_down_batch(0) * (IN_FLIGHT // BATCH), 0.0)
        seq.take_down()
    spent = 0.0
    for b in range(batches):
        if path == "own":  # the next ones sent (not timed), as many as come back
            seq.down(_down_batch(0), 0.0)
        batch = build(1 + b * BATCH)
        if call:
            start = time.process_time()
            handle(batch, 0.0)
            spent += time.process_time() - start
        seq.take_up()
        seq.take_down()
    return spent


WIRE_PATHS = ("encode", "decode")
PATHS = ("member", "coord", "down", "own", *WIRE_PATHS)


def main() -> None:
    parser = argparse.ArgumentParser(description="SEQUENCER's hot paths, sans-IO")
    parser.add_argument("--batches", type=int, default=0, help="batches of 64 per run")
    parser.add_argument("--instructions", action="store_true", help="count with callgrind")
    parser.add_argument("--paths", default=",".join(PATHS), help="which, comma-separated")
    opts = parser.parse_args()
    if opts.batches < 0:
        parser.error(f"--batches must be >= 0, got {opts.batches}")
    paths = opts.paths.split(",")
    unknown = sorted(set(paths) - set(PATHS))
    if unknown:
        parser.error(f"--paths: unknown {', '.join(unknown)}; choose from {', '.join(PATHS)}")
    gc.disable()
    if opts.instructions:
        require_valgrind()
        batches = opts.batches or 60
        print(f"instructions per message, {BATCH}-message batches (callgrind):")
        for path in paths:
            counts = [
                instructions_per(__file__, lambda n, p=path, c=c: ["_child", p, str(n), c], batches)
                for c in ("1", "0")
            ]
            print(f"  {path:<7} {(counts[0] - counts[1]) / BATCH:>9,.0f}", flush=True)
        return
    batches = opts.batches or 300
    print(f"us of CPU per message, {BATCH}-message batches, best of 7:")
    for path in paths:
        best = min(run(path, batches) for _ in range(7))
        print(f"  {path:<7} {best / (batches * BATCH) * 1e6:>6.3f}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "_child":
        gc.disable()
        run(sys.argv[2], int(sys.argv[3]), call=sys.argv[4] == "1")
    else:
        main()
