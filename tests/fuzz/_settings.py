"""Fuzz settings: a fixed, derandomized number of examples in the normal suite.

``TRIOGROUPS_FUZZ_LONG=N`` multiplies every fuzz target's examples by N and
lets Hypothesis draw fresh random examples (not derandomized), for long runs:
``TRIOGROUPS_FUZZ_LONG=50 pytest tests/fuzz``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from tests import _kinds

LONG = int(os.environ.get("TRIOGROUPS_FUZZ_LONG", "0") or 0)


def fuzz_settings(examples: int) -> settings:
    """``examples`` in the normal suite (deterministic for CI), ``examples * LONG`` in long runs,
    at most a handful in the quick loop (`tests._kinds.examples`)."""
    return settings(
        max_examples=examples * LONG if LONG else _kinds.examples(examples),
        deadline=None,
        derandomize=not LONG,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )
