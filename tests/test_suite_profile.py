"""The suite does not depend on the machine's speed: Hypothesis runs without deadlines."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def test_hypothesis_profile_has_no_deadline_nor_too_slow_check() -> None:
    """The profile tests/conftest.py loads; a test's own ``@settings(max_examples=...)``
    (as the wire fuzz tests have) inherits it."""
    for current in (settings.default, settings(max_examples=5)):
        assert current.deadline is None
        assert HealthCheck.too_slow in current.suppress_health_check
