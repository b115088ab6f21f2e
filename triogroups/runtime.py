"""Process-wide settings for a process that hosts members.

Messages queued between layers live longer than a plain function call's
temporaries, so with CPython's default collector thresholds young messages
get promoted and re-scanned. A member process calls `tune_gc` once after
start-up: it freezes what start-up allocated (modules, classes) out of
future collections and lets the young generation grow larger before it is
collected. A library import never does this by itself; `triogroups member`
and the demo do, and an application that hosts members may.
"""

from __future__ import annotations

import gc

__all__ = ["tune_gc"]


def tune_gc(young_threshold: int = 10_000) -> None:
    """Freeze start-up objects and collect the young generation less often."""
    if young_threshold < 700:
        raise ValueError(f"young_threshold must be >= 700 (the default), got {young_threshold}")
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)
