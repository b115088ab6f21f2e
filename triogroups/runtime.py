"""Process-wide settings for a process that hosts members.

Messages queued between layers live longer than a plain function call's
temporaries, so with CPython's default collector thresholds young messages
get promoted and re-scanned. A member process calls `tune_gc` once after
start-up: it freezes what start-up allocated (modules, classes) out of
future collections and lets the young generation grow larger before it is
collected. A library import never does this by itself; the member processes
of `triogroups launch` and the demo do, and an application that hosts members may.
"""

from __future__ import annotations

import gc

__all__ = ["tune_gc"]


def tune_gc(young_threshold: int = 100_000) -> None:
    """Freeze start-up objects and collect the young generation less often.

    The young generation's count is allocations less deallocations of tracked
    objects, so it reaches a threshold only when that many objects outlive their
    moment: at full speed the messages NAKACK2 keeps until STABLE purges them
    (tens of thousands in a three-member group) rise and fall by more than 10,000
    all the time. At 10,000 a member collected ten times a second, each time
    scanning those messages only to promote them, 6-9% of its CPU with nothing
    to collect (the GC column of `benchmarks/bench_channel.py`); at 100,000 it
    hardly ever collects while the table stays the size it is. Cyclic garbage,
    which only the collector frees, waits for the count like anything else.
    """
    if young_threshold < 700:
        raise ValueError(f"young_threshold must be >= 700 (the default), got {young_threshold}")
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)
