"""Warnings that would repeat on every start, restart or connection: logged once per process.

A member whose kernel grants smaller socket buffers than asked hits the same
limit on every start, every stack restart and every TCP connection, and a
host name that does not resolve fails the same way at every discovery run.
Saying it once is the news; saying it again is noise that hides the next
real warning. `warn_once` is the one place that remembers what was said.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

__all__ = ["said_elsewhere", "warn_once"]

_warned: set[tuple[str, Hashable]] = set()
_elsewhere: set[Hashable] = set()


def said_elsewhere(kind: Hashable) -> None:
    """Warnings of ``kind`` (the first item of a tuple key) are said by someone else, once
    for many processes: a process group's supervisor says a socket-buffer shortfall once for
    all its members and restarts. This process then logs them at INFO."""
    _elsewhere.add(kind)


def warn_once(logger: logging.Logger, key: Hashable, msg: str, *args: object) -> bool:
    """Log ``msg % args`` at WARNING on ``logger`` unless ``key`` was warned about there before.

    ``key`` names the condition, not the member that met it (the asked and
    granted sizes, the unresolved name), so every member of a process shares
    one warning. Returns True if this call logged.
    """
    marker = (logger.name, key)
    if marker in _warned:
        return False
    _warned.add(marker)
    kind = key[0] if isinstance(key, tuple) and key else key
    logger.log(logging.INFO if kind in _elsewhere else logging.WARNING, msg, *args)
    return True
