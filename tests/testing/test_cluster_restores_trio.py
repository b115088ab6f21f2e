"""The test kit's deterministic scheduling lasts as long as the cluster, not longer."""

from __future__ import annotations

import trio._core._run as _trio_run

from triogroups.testing import open_cluster


async def test_open_cluster_restores_trios_scheduling_flag_and_random_on_exit() -> None:
    before_flag = _trio_run._ALLOW_DETERMINISTIC_SCHEDULING
    before_state = _trio_run._r.getstate()
    async with open_cluster(2, seed=5):
        assert _trio_run._ALLOW_DETERMINISTIC_SCHEDULING is True
    assert _trio_run._ALLOW_DETERMINISTIC_SCHEDULING is before_flag
    assert _trio_run._r.getstate() == before_state


async def test_open_cluster_restores_them_when_the_body_raises() -> None:
    before_flag = _trio_run._ALLOW_DETERMINISTIC_SCHEDULING
    raised: list[BaseException] = []
    try:
        async with open_cluster(1, seed=6):
            raise RuntimeError("boom")
    except* RuntimeError as group:
        raised.extend(_leaves(group))
    assert [str(e) for e in raised] == ["boom"]
    assert _trio_run._ALLOW_DETERMINISTIC_SCHEDULING is before_flag


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
