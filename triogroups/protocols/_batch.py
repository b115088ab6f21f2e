"""The receive path's shortcut for layers whose header most messages lack.

Most layers of a stack (MERGE3, VERIFY_SUSPECT, GMS, FRAG, UNICAST3 for
multicasts, ...) see their own header on a handful of control messages and
pass everything else up untouched. Copying each batch message by message to
drop those few would cost an append and a header lookup per message in every
layer; `carries` answers "any of mine here?" in one tight loop, and a batch
without any goes up as it is (a protocol may forward a batch it was handed).

Sans-IO, plain Python.
"""

from __future__ import annotations

from triogroups.message import Message

__all__ = ["carries"]


def carries(batch: list[Message], protocol_id: int) -> bool:
    """True if a message of ``batch`` has a header of ``protocol_id``."""
    for msg in batch:  # noqa: SIM110  (a plain loop: no generator resumed per message)
        if protocol_id in msg.headers:
            return True
    return False
