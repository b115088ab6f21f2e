"""Errors of the actor runtime, and the crash report a supervisor keeps.

A crash keeps what tractor keeps for remote errors: the original exception object with its type,
the formatted original traceback and the name of the actor. This module holds data only; it never
decides anything about restarts.
"""

from __future__ import annotations

import traceback as _traceback
from collections.abc import Sequence
from dataclasses import dataclass

import trio

from triogroups._error_root import TriogroupsError
from triogroups._renamed import warn_renamed

__all__ = [
    "ActorCrashed",
    "ActorGone",
    "CrashReport",
    "MailboxFull",
    "PermanentError",
    "RestartIntensityExceeded",
]


def format_traceback(exception: BaseException) -> str:
    """The original traceback text of *exception*, as Python would print it."""
    return "".join(_traceback.format_exception(exception))


@dataclass(frozen=True)
class CrashReport:
    """One crash of one supervised child.

    ``actor`` is the dotted path through nested supervisors ("root.stack.UNICAST3");
    ``restart_count`` is how often that child had been restarted before this crash.
    """

    actor: str
    exception: BaseException
    traceback: str
    time: float
    restart_count: int

    def __repr__(self) -> str:
        """One line: the actor, the exception and the restart count (the traceback is in `str`)."""
        return (
            f"CrashReport(actor={self.actor!r}, exception={self.exception!r}, "
            f"time={self.time:.3f}, restart_count={self.restart_count})"
        )

    def __str__(self) -> str:
        """Readable: a header line, then the original traceback as Python prints it."""
        return (
            f"actor {self.actor!r} crashed at {self.time:.3f} "
            f"(restarted {self.restart_count} times before):\n{self.traceback.rstrip()}"
        )


class ActorCrashed(TriogroupsError):
    """An unsupervised actor raised; raised into the nursery it was spawned in.

    The original exception is kept with its type as ``exception`` and as ``__cause__``.
    """

    def __init__(self, actor: str, exception: BaseException, traceback: str) -> None:
        super().__init__(f"actor {actor!r} crashed: {type(exception).__name__}: {exception}")
        self.actor = actor
        self.exception = exception
        self.traceback = traceback
        self.__cause__ = exception

    def __reduce__(self) -> tuple[type[ActorCrashed], tuple[str, BaseException, str]]:
        return type(self), (self.actor, self.exception, self.traceback)


class RestartIntensityExceeded(TriogroupsError):
    """A supervisor saw more than ``max_restarts`` restarts within ``restart_window`` seconds.

    Raised by `Supervisor.run` after all its children were stopped; a parent supervisor treats it
    as a crash of that child. ``reports`` are the crash reports inside the window.
    """

    def __init__(
        self,
        supervisor: str,
        reports: Sequence[CrashReport],
        max_restarts: int,
        restart_window: float,
    ) -> None:
        super().__init__(
            f"supervisor {supervisor!r} exceeded its restart intensity: "
            f"more than max_restarts={max_restarts} restarts within {restart_window}s"
        )
        self.supervisor = supervisor
        self.reports = list(reports)
        self.max_restarts = max_restarts
        self.restart_window = restart_window

    def __reduce__(
        self,
    ) -> tuple[type[RestartIntensityExceeded], tuple[str, list[CrashReport], int, float]]:
        return type(self), (self.supervisor, self.reports, self.max_restarts, self.restart_window)

    @property
    def within(self) -> float:
        """Deprecated: the old name of ``restart_window`` (warns; goes in the next release)."""
        warn_renamed(f"{type(self).__name__}.within", "within", "restart_window", stacklevel=2)
        return self.restart_window


class PermanentError(TriogroupsError):
    """An error a restart cannot fix; raise it (or a subclass) from an actor to say so.

    A supervisor records the crash but restarts nothing: it stops all its children and `run`
    raises this error itself, so a parent supervisor sees it as permanent too and it reaches the
    top unchanged. (A child that crashes with any other error, even while starting, is restarted
    by its policy: a connection refused at start may well work the next time.)
    """


class ActorGone(TriogroupsError, RuntimeError):
    """The actor slot was stopped for good; its mailbox accepts nothing any more."""


class MailboxFull(TriogroupsError, trio.WouldBlock):
    """``send_nowait`` found the bounded mailbox full; ``send`` would have waited."""
