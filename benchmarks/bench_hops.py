"""What the layer host's scan costs per message per layer, compiled against pure Python.

    python benchmarks/bench_hops.py [--repeat 7] [--instructions]

A layer that promises to pass some messages on untouched (`Protocol.passes_up`: NAKACK2,
GMS, MERGE3, FRAG, UFC, MFC, STABLE, ...) is skipped for a batch made only of those; the host
finds that out with `triogroups._layer._ways.passes`, which reads every message of the
batch, at every such layer, up and down (issue 43 compiles its scans:
`triogroups._layer._scan`). This times `passes` over a batch of 100 multicasts that pass,
as the data path's batches do, for each kind of promise ("all", "multicasts", and
"unicasts", which stops at the first message), with each form of the scans behind it, in
turns (compiled, pure, pure, compiled, ...): the medians of CPU per message and their ratio.
``--instructions`` counts the machine instructions per message of the same work with
valgrind's callgrind instead, which the load of a shared machine does not move.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from types import ModuleType

from _callgrind import instructions_per, require_valgrind

from triogroups import Message, _compiled
from triogroups._layer import _ways
from triogroups.protocol import Passes, Protocol

BATCH = 100
PID = 57  # a header id none of the batch's messages carries: every scan reads the whole batch
OTHER = 58  # the header they carry (the one a layer above numbered them with)
KINDS: tuple[Passes, ...] = ("all", "multicasts", "unicasts")


def _forms() -> dict[str, ModuleType]:
    """The scans by form; "compiled" only where the build made it."""
    forms = {"pure": _compiled.pure("_layer._scan")}
    built = importlib.import_module("triogroups._layer._scan")
    if _compiled.is_compiled(built):
        forms = {"compiled": built, **forms}
    return forms


def _work(form: ModuleType, kind: Passes) -> Callable[[], object]:
    """One `passes` call over a batch of multicasts, with ``form``'s scans behind it."""
    proto = type("Bench", (Protocol,), {"passes_up": kind})()
    batch = [Message(None, b"x" * 100, headers={OTHER: i}) for i in range(BATCH)]
    passes = _ways.passes
    _ways.SCAN = form  # this process runs one form at a time (--run), or sets it per turn

    def work() -> object:
        _ways.SCAN = form
        return passes(proto, _ways.PASS_ASK_UP, batch, PID)

    return work


def compare(repeat: int, batches: int = 4000) -> None:
    """CPU per message of each form, in turns, medians of ``repeat``, and their ratio."""
    forms = _forms()
    if "compiled" not in forms:
        print("no compiled core in this install: pure Python only")
    print(f"`passes` over a batch of {BATCH} multicasts, CPU per message (ns), medians of {repeat}")
    print(f"{'promise':<12}" + "".join(f"{name:>10}" for name in forms) + f"{'ratio':>8}")
    for kind in KINDS:
        works = {name: _work(form, kind) for name, form in forms.items()}
        samples: dict[str, list[float]] = {name: [] for name in forms}
        for turn in range(repeat):
            for name in list(works)[:: 1 if turn % 2 == 0 else -1]:
                work = works[name]
                start = time.process_time()
                for _ in range(batches):
                    work()
                samples[name].append((time.process_time() - start) / batches / BATCH * 1e9)
        medians = {name: statistics.median(values) for name, values in samples.items()}
        ratio = medians["compiled"] / medians["pure"] if "compiled" in medians else 1.0
        cells = "".join(f"{value:>10.1f}" for value in medians.values())
        print(f"{kind:<12}{cells}{ratio:>7.2f}x")


def _instructions(form: str, kind: str, batches: int) -> float:
    """Instructions per message of ``passes`` with ``form``'s scans (`instructions_per`)."""

    def args(n: int) -> list[str]:
        return ["--run", form, kind, str(n)]

    return instructions_per(__file__, args, batches) / BATCH


def count_instructions(batches: int) -> None:
    """Instructions per message of each form (`instructions_per`)."""
    require_valgrind()
    forms = list(_forms())
    print(f"`passes` over a batch of {BATCH} multicasts, instructions per message")
    print(f"{'promise':<12}" + "".join(f"{name:>10}" for name in forms) + f"{'ratio':>8}")
    for kind in KINDS:
        counts = {name: _instructions(name, kind, batches) for name in forms}
        ratio = counts["compiled"] / counts["pure"] if "compiled" in counts else 1.0
        cells = "".join(f"{value:>10,.1f}" for value in counts.values())
        print(f"{kind:<12}{cells}{ratio:>7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="turns of each form (default 7)")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions with callgrind"
    )
    parser.add_argument("--run", nargs=3, help=argparse.SUPPRESS)  # form kind batches
    opts = parser.parse_args()
    if opts.repeat < 1:
        sys.exit(f"--repeat must be >= 1, got {opts.repeat}")
    if opts.run:
        name, kind, count = opts.run
        work = _work(_forms()[name], kind)
        for _ in range(int(count)):
            work()
        return
    if opts.instructions:
        count_instructions(batches=2000)
        return
    compare(opts.repeat)


if __name__ == "__main__":
    main()
