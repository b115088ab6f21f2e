"""A Spark cluster's whole run done once per test run, however many pytest-xdist workers
run the tests that check it.

``dev.py test`` runs four workers that steal each other's queued tests, so the tests of one
module can end up in several workers, and a module-scoped fixture then runs in each of
them: every worker started its own standalone cluster and submitted the same driver. With
`once_per_run` the first worker to ask (under a lock in the directory all workers of one
run share, the base temp's parent) starts the cluster, runs everything the tests check
against it, stops it and writes what it saw; the others wait for the lock and read that.
The cluster lives only inside that one call, so its teardown is that call's ``finally``,
whichever tests run where, and no worker has to wait for another to be done with it.
"""

from __future__ import annotations

import fcntl
import json
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

__all__ = ["once_per_run"]


def once_per_run(
    factory: pytest.TempPathFactory, name: str, produce: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    """``produce(directory)`` (JSON-able), run once per test run for ``name``: by this
    process without pytest-xdist, else by the first worker that asks, the others getting its
    result. A skip or an error in that run is every worker's (a worker killed during it
    leaves nothing behind, and the next one to ask runs it again)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        alone: dict[str, Any] = json.loads(json.dumps(produce(factory.mktemp(name))))
        return alone
    shared = factory.getbasetemp().parent / name
    shared.mkdir(exist_ok=True)
    outcome_file = shared / "outcome.json"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or its process dies
        if outcome_file.exists():
            outcome = json.loads(outcome_file.read_text())
        else:
            directory = shared / "run"
            directory.mkdir(exist_ok=True)
            try:
                result = produce(directory)
            except pytest.skip.Exception as exc:
                outcome_file.write_text(json.dumps({"skip": exc.msg}))
                raise
            except Exception:
                outcome_file.write_text(json.dumps({"error": traceback.format_exc()[-5000:]}))
                raise
            outcome_file.write_text(json.dumps({"result": result}))
            outcome = json.loads(outcome_file.read_text())  # as the other workers see it
    if "skip" in outcome:
        pytest.skip(outcome["skip"])
    if "error" in outcome:
        pytest.fail(f"the {name} run failed in another pytest-xdist worker:\n{outcome['error']}")
    result: dict[str, Any] = outcome["result"]
    return result
