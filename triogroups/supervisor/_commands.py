"""The command channel from a process group to one member: `ProcessGroup.send` in the
supervisor, `member_commands` in the member.

A pipe of its own per incarnation, beside stdin (which carries the payload and whose EOF means
the supervisor is gone) and the status pipe (member to supervisor): the supervisor writes one
JSON value per line, the member reads them in order. JSON, so a command is plain data that a
member of another version (or language) reads the same way, never code. The pipe ends with the
incarnation: a command is for the process it was sent to, and a restarted member starts with
an empty channel. Nothing here decides anything; the application gives commands their meaning.
"""

from __future__ import annotations

import json
from typing import Any

import trio

__all__ = ["MemberCommands", "attach", "encode_command", "member_commands"]

_fd: int | None = None  # the read end of this member process's command pipe
_reader: MemberCommands | None = None


def attach(fd: int) -> None:
    """Make ``fd`` the command pipe of this process (`_member` does, from its argv)."""
    global _fd
    _fd = fd


def encode_command(command: Any) -> bytes:
    """``command`` as one line of the pipe; TypeError if JSON cannot carry it."""
    try:
        text = json.dumps(command, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"command must be plain JSON data, got {command!r}: {exc}") from None
    return text.encode() + b"\n"


class MemberCommands:
    """The commands sent to this member, oldest first, as an async iterator of JSON values.

    Iteration ends when the supervisor closes the channel (this incarnation is stopping, or
    the supervisor is gone). One task reads at a time.
    """

    def __init__(self, fd: int) -> None:
        self._stream = trio.lowlevel.FdStream(fd)
        self._buffer = b""
        self._lines: list[bytes] = []
        self._ended = False

    def __aiter__(self) -> MemberCommands:
        return self

    async def __anext__(self) -> Any:
        while not self._lines:
            if self._ended:
                raise StopAsyncIteration
            chunk = await self._stream.receive_some(65536)
            if not chunk:
                self._ended = True
                continue
            *lines, self._buffer = (self._buffer + chunk).split(b"\n")
            self._lines = [line for line in lines if line.strip()]
        return json.loads(self._lines.pop(0))


def member_commands() -> MemberCommands:
    """The commands `ProcessGroup.send` sends to this member process, as an async iterator.

    Only in a member process that a process group started (RuntimeError elsewhere). Every
    call returns the same iterator: what one loop did not read, the next one gets.
    """
    global _reader
    if _reader is None:
        if _fd is None:
            raise RuntimeError("member_commands() works only in a member of a process group")
        _reader = MemberCommands(_fd)
    return _reader
