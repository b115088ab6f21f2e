"""The actor runtime: actors with bounded mailboxes, spawn, and supervisors with restart
strategies. Import from here; the modules behind it are private."""

from ._actor import Actor, ActorRef, spawn
from ._errors import (
    ActorCrashed,
    ActorGone,
    CrashReport,
    MailboxFull,
    PermanentError,
    RestartIntensityExceeded,
)
from ._spec import Restart, Strategy
from ._supervisor import ChildSpec, Supervisor

__all__ = [
    "Actor",
    "ActorCrashed",
    "ActorGone",
    "ActorRef",
    "ChildSpec",
    "CrashReport",
    "MailboxFull",
    "PermanentError",
    "Restart",
    "RestartIntensityExceeded",
    "Strategy",
    "Supervisor",
    "spawn",
]
