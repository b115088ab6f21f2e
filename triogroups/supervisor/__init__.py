"""OS-process members: launch an application as N member processes, watch and restart them.

The same supervision model as the actor runtime (`triogroups.actors`): strategies, restart
policies, restart intensity with backoff, escalation. Import the public names from
`triogroups`; the modules behind this package are private.
"""

from triogroups.supervisor._app import AppError
from triogroups.supervisor._commands import MemberCommands, member_commands
from triogroups.supervisor._events import (
    GroupEvent,
    MemberCrashed,
    MemberExited,
    MemberJoined,
    MemberRestarted,
    MemberView,
    ProcessGroupFailed,
)
from triogroups.supervisor._group import ProcessGroup, open_process_group
from triogroups.supervisor._members import MemberInfo

__all__ = [
    "AppError",
    "GroupEvent",
    "MemberCommands",
    "MemberCrashed",
    "MemberExited",
    "MemberInfo",
    "MemberJoined",
    "MemberRestarted",
    "MemberView",
    "ProcessGroup",
    "ProcessGroupFailed",
    "member_commands",
    "open_process_group",
]
