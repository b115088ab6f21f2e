"""Log formats of a process group: ``text`` for people, ``json`` for tools.

A member configures its logging here (`configure_member_logging`): in ``text`` its records
are ``LEVEL logger: message`` lines, in ``json`` one JSON object per record (level, logger,
message, time). The supervisor side (`json_line`) turns any line a member printed into one JSON
object with the member's name: a record the member wrote as JSON keeps its fields, any other
line (a plain ``print``) becomes a record of logger ``stdout`` at level INFO.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "check_log_options",
    "configure_member_logging",
    "json_line",
]

LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        fields = {
            "level": record.levelname,
            "logger": record.name,
            "message": message,
            "time": record.created,
        }
        return json.dumps(fields)


def check_log_options(log_format: str, log_level: str) -> None:
    """Raise `ValueError` naming ``log_format`` or ``log_level`` when it is not one we know."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    if log_level not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}")


def configure_member_logging(log_format: str, log_level: str = "WARNING") -> None:
    """Send the member's log records from ``log_level`` up to stderr (which the supervisor
    reads) in ``log_format``."""
    check_log_options(log_format, log_level)
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(log_level)


def json_line(member: str, line: str, **extra: Any) -> str:
    """One JSON object for ``line`` printed by ``member``: member, level, logger, message, time."""
    try:
        parsed = json.loads(line)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "message" in parsed:
        record = {"member": member, **parsed, **extra}
    else:
        record = {
            "member": member,
            "level": "INFO",
            "logger": "stdout",
            "message": line,
            "time": time.time(),
            **extra,
        }
    return json.dumps(record)
