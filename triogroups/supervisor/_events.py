"""What a process group reports: member events, exit reasons and the error it fails with.

Plain data only; the supervisor (`_supervisor`) decides, this module describes. An exit is told the
way a shell would ("exited with status 3", "killed by SIGKILL"), because that is what the user
reads first when a member dies.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass

from triogroups._error_root import TriogroupsError
from triogroups.actors import CrashReport, RestartIntensityExceeded
from triogroups.address import Address
from triogroups.view import ViewId

__all__ = [
    "GroupEvent",
    "MemberCrashed",
    "MemberExited",
    "MemberJoined",
    "MemberRestarted",
    "MemberView",
    "ProcessGroupFailed",
    "exit_reason",
]


def exit_reason(returncode: int) -> str:
    """ "exited with status N" or "killed by SIGNAME" for a process's return code."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name}"


@dataclass(frozen=True)
class MemberJoined:
    """Incarnation ``incarnation`` of member ``name`` joined the group as ``address``."""

    name: str
    incarnation: int
    address: Address
    pid: int


@dataclass(frozen=True)
class MemberView:
    """Member ``name`` installed view ``view_id`` (counter, coordinator) of ``members``."""

    name: str
    address: Address
    view_id: ViewId
    members: tuple[Address, ...]


@dataclass(frozen=True)
class MemberExited:
    """A member process ended; ``output`` are its last lines of output.

    ``expected`` is True when the supervisor stopped it (a graceful stop, a manual restart or a
    sibling's restart under one_for_all / rest_for_one); only the others are judged by the
    restart policy. A restart shows as `MemberRestarted` once the new process runs.
    """

    name: str
    incarnation: int
    pid: int
    returncode: int
    output: tuple[str, ...]
    expected: bool

    @property
    def reason(self) -> str:
        """Why it ended, in words: ``exited with status 1``, ``killed by SIGKILL``."""
        return exit_reason(self.returncode)


@dataclass(frozen=True)
class MemberRestarted:
    """Member ``name`` was started again as incarnation ``incarnation`` (a new process)."""

    name: str
    incarnation: int
    pid: int


GroupEvent = MemberJoined | MemberView | MemberExited | MemberRestarted


class MemberCrashed(TriogroupsError):
    """A member process ended without being asked to; kept in the group's crash reports."""

    def __init__(self, member: str, returncode: int, output: Sequence[str]) -> None:
        super().__init__(f"member {member!r} {exit_reason(returncode)}")
        self.member = member
        self.returncode = returncode
        self.output = tuple(output)

    def __reduce__(self) -> tuple[type[MemberCrashed], tuple[str, int, tuple[str, ...]]]:
        return type(self), (self.member, self.returncode, self.output)


class ProcessGroupFailed(RestartIntensityExceeded):
    """The group's supervisor escalated: restarts beyond its intensity; every member stopped.

    The message names the member whose exit was one restart too many, why it ended, and its
    last lines of output; ``crash`` is that `MemberCrashed`, ``reports`` every crash inside the
    window (as for the actor supervisor, whose error this is a kind of).
    """

    def __init__(
        self,
        group: str,
        crash: MemberCrashed,
        reports: Sequence[CrashReport],
        max_restarts: int,
        restart_window: float,
    ) -> None:
        super().__init__(group, reports, max_restarts, restart_window)
        lines = "".join(f"\n  | {line}" for line in crash.output) or "\n  (no output)"
        self.args = (
            f"{crash}: more than max_restarts={max_restarts} restarts within {restart_window:g} s "
            "of running time, "
            f"group {group!r} stopped; last output:{lines}",
        )
        self.crash = crash

    def __reduce__(self) -> tuple[type[ProcessGroupFailed], tuple[object, ...]]:  # type: ignore[override]
        return type(self), (
            self.supervisor,
            self.crash,
            self.reports,
            self.max_restarts,
            self.restart_window,
        )
