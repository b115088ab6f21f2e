"""Shared set-up of the inspector tests: real answers from simulated members, on virtual time."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import trio

from triogroups.inspector import build_report
from triogroups.testing import SimMember


def answers(members: Iterable[SimMember]) -> list[dict[str, Any]]:
    """One round of `build_report` answers, each stamped with the virtual clock instead of the
    wall clock, so rates are per virtual second (what the members lived through)."""
    now = trio.current_time()
    return [{**build_report(m.stack), "time": now} for m in members]
