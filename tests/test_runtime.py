"""`tune_gc`: the collector settings a member process runs with."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from triogroups.runtime import tune_gc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    """Put the collector back as the test found it (thresholds, frozen objects)."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_tune_gc_default_lets_the_young_generation_reach_100_000(restored_gc: None) -> None:
    _, middle, old = gc.get_threshold()
    tune_gc()
    assert gc.get_threshold() == (100_000, middle, old)


def test_tune_gc_freezes_what_start_up_allocated(restored_gc: None) -> None:
    gc.unfreeze()
    tune_gc()
    assert gc.get_freeze_count() > 0


def test_tune_gc_takes_another_threshold(restored_gc: None) -> None:
    tune_gc(20_000)
    assert gc.get_threshold()[0] == 20_000


def test_tune_gc_refuses_a_threshold_below_cpythons_default(restored_gc: None) -> None:
    before = gc.get_threshold()
    with pytest.raises(ValueError, match="young_threshold must be >= 700"):
        tune_gc(699)
    assert gc.get_threshold() == before


def test_tune_gc_keeps_messages_queued_between_layers_out_of_young_collections(
    restored_gc: None,
) -> None:
    """What the default is for: objects that outlive their moment in the tens of
    thousands (messages kept until STABLE purges them) trigger no collection."""
    tune_gc()
    collections = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    kept: list[list[int]] = []
    gc.callbacks.append(count)
    try:
        for _ in range(5):
            kept.extend([i] for i in range(40_000))  # tracked objects, alive for a while
            del kept[:]
    finally:
        gc.callbacks.remove(count)
    assert collections == []
