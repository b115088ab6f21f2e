"""Single keys from the terminal, without waiting for Enter and without echo.

`raw_keys` puts the terminal in non-canonical mode with echo and signal keys
off (so Ctrl-C arrives as a key and quits cleanly) but output processing on
(so rich's newlines still work), and restores the saved settings in a
``finally``: whatever ends the inspector, the terminal comes back as it was.
"""

from __future__ import annotations

import os
import termios
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

__all__ = ["parse_keys", "raw_keys"]

_SEQUENCES = {
    b"\x1b[A": "up",
    b"\x1b[B": "down",
    b"\x1b[C": "right",
    b"\x1b[D": "left",
    b"\x1bOA": "up",
    b"\x1bOB": "down",
    b"\x1bOC": "right",
    b"\x1bOD": "left",
    b"\x1b[Z": "shift-tab",
}
_CONTROLS = {
    b"\x03": "ctrl-c",
    b"\t": "tab",
    b"\r": "enter",
    b"\n": "enter",
    b"\x1b": "escape",
    b"\x7f": "backspace",
    b"\x08": "backspace",
}


def parse_keys(data: bytes) -> list[str]:
    """The keys in one read: arrows by name, control keys by name, others as text."""
    keys = []
    i = 0
    while i < len(data):
        for seq, name in _SEQUENCES.items():
            if data.startswith(seq, i):
                keys.append(name)
                i += len(seq)
                break
        else:
            byte = data[i : i + 1]
            keys.append(_CONTROLS.get(byte) or byte.decode("latin-1"))
            i += 1
    return keys


@asynccontextmanager
async def raw_keys(fd: int) -> AsyncIterator[AsyncIterator[str]]:
    """Keys typed on the terminal ``fd`` for the body; the terminal is restored after."""
    saved = termios.tcgetattr(fd)
    mode = termios.tcgetattr(fd)
    mode[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG)
    mode[6][termios.VMIN] = 1
    mode[6][termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSANOW, mode)
    try:
        yield _read(fd)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def _read(fd: int) -> AsyncIterator[str]:
    while True:
        await trio.lowlevel.wait_readable(fd)
        data = os.read(fd, 64)
        if not data:
            return
        for key in parse_keys(data):
            yield key
