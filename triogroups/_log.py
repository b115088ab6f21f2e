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

__all__ = ["warn_once"]

_warned: set[tuple[str, Hashable]] = set()


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
    logger.warning(msg, *args)
    return True
