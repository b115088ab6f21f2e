"""The member side of the JSON lines that the test kit's member processes print.

Both member programs, `member_process` (a bare stack driven by hand) and `group_member`
(a channel that joins by itself), run under the process supervisor: they read their
commands from `member_commands` and print events as JSON lines on stdout with UUIDs as 32
hex digits (`emit`, `uuid_hex`), which reach the parent (`processes`) as output lines. That
contract lives here once, so the two programs cannot drift apart from each other or from
the parent. What the commands mean stays with each program.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from triogroups.address import Address

__all__ = ["emit", "uuid_hex"]


def emit(event: str, **fields: Any) -> None:
    """Print one event line (flushed: the parent waits on it)."""
    sys.stdout.write(json.dumps({"event": event, **fields}, default=str) + "\n")
    sys.stdout.flush()


def uuid_hex(address: Address) -> str:
    """How events and commands name a member: its UUID as 32 hex digits."""
    return f"{address.uuid:032x}"
