"""Counting how often one Trio task runs, for tests that pin a path that must not wake it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio


class TaskSteps(trio.abc.Instrument):
    """Counts the steps one task runs."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


@contextmanager
def counting_steps(task: trio.lowlevel.Task) -> Iterator[TaskSteps]:
    """The steps ``task`` runs inside the block."""
    steps = TaskSteps(task)
    trio.lowlevel.add_instrument(steps)
    try:
        yield steps
    finally:
        trio.lowlevel.remove_instrument(steps)
