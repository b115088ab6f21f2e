"""The message: what travels through a stack and over the wire.

A message has a destination (``None`` means the whole group), a source,
flags, one header per protocol keyed by that protocol's small id, and the
payload bytes. Protocols add and read their own header; nothing else in a
message is theirs to change once it has been handed on.
"""

from __future__ import annotations

import enum
from typing import Any

from triogroups.address import Address

__all__ = ["Flag", "Message", "new_message"]


class Flag(enum.IntFlag):
    """Per-message flags, carried on the wire.

    OOB: reliable, but may be delivered before earlier regular messages.
    DONT_BUNDLE: the transport sends this message in a datagram of its own.
    DONT_LOOPBACK: a multicast that the sender does not deliver to itself.
    NO_RELIABILITY: no seqno, no retransmission (best effort).
    NO_FC: skips flow control.
    DONT_BLOCK: flow control drops it rather than block the sender.
    INTERNAL: sent by a protocol, not by the application.
    TAGGED: the payload starts with a channel's one-byte encoding tag (msgpack,
    pickle); a channel sends the application's bytes as they are, untagged, so
    that a receiver hands them over without copying them to strip a tag.
    """

    OOB = 1
    DONT_BUNDLE = 2
    DONT_LOOPBACK = 4
    NO_RELIABILITY = 8
    NO_FC = 16
    DONT_BLOCK = 32
    INTERNAL = 64
    TAGGED = 128


#: All flag bits a decoder accepts; anything else is malformed.
ALL_FLAGS = int(Flag.OOB | Flag.DONT_BUNDLE | Flag.DONT_LOOPBACK | Flag.NO_RELIABILITY)
ALL_FLAGS |= int(Flag.NO_FC | Flag.DONT_BLOCK | Flag.INTERNAL | Flag.TAGGED)


_new = object.__new__


class Message:
    """A message with per-protocol headers.

    ``flags`` is stored as a plain int so hot paths test bits without enum
    overhead (``msg.flags & OOB``). ``headers`` maps a protocol id to that
    protocol's header (a NamedTuple registered with the wire codec).
    """

    __slots__ = ("dest", "flags", "headers", "payload", "src")

    def __init__(
        self,
        dest: Address | None = None,
        payload: bytes = b"",
        *,
        src: Address | None = None,
        flags: int = 0,
        headers: dict[int, Any] | None = None,
    ) -> None:
        self.dest = dest
        self.src = src
        self.flags = int(flags)
        self.headers: dict[int, Any] = {} if headers is None else headers
        self.payload = payload

    def put_header(self, protocol_id: int, header: Any) -> Message:
        """Set the header of protocol ``protocol_id`` (replacing any); returns the message."""
        self.headers[protocol_id] = header
        return self

    def get_header(self, protocol_id: int) -> Any:
        """The header of protocol ``protocol_id``, or None."""
        return self.headers.get(protocol_id)

    def has_flag(self, flag: int) -> bool:
        """True if ``flag`` (a `Flag`) is set; for several or-ed flags, if any of them is."""
        return bool(self.flags & flag)

    def set_flag(self, flag: int) -> Message:
        """Set ``flag`` (a `Flag`, or several or-ed); returns the message."""
        self.flags |= int(flag)
        return self

    def copy(self) -> Message:
        """A copy that shares the payload and header objects but not the header map
        (`new_message`: a multicast is copied for retransmission or a duplicate)."""
        return new_message(self.dest, self.src, self.flags, self.headers.copy(), self.payload)

    def size(self) -> int:
        """Approximate wire size: payload plus a fixed allowance per header."""
        return len(self.payload) + 8 + 16 * len(self.headers)

    def __repr__(self) -> str:
        dest = "group" if self.dest is None else str(self.dest)
        flags = f" {Flag(self.flags)!s}" if self.flags else ""
        return (
            f"<Message {self.src}->{dest}{flags} hdrs={sorted(self.headers)} {len(self.payload)}B>"
        )


def new_message(
    dest: Address | None, src: Address | None, flags: int, headers: dict[int, Any], payload: bytes
) -> Message:
    """``Message(dest, payload, src=src, flags=flags, headers=headers)`` with the slots set
    directly, without ``__init__``'s keywords and ``int(flags)``: ``flags`` must be an int.

    The one fast form of the constructor, for the paths that make a message per message
    sent or received: the channel's send, NAKACK2's copy of a multicast for its own
    delivery, the wire decoder's loop, `Message.copy` (tests/test_model.py checks it
    equals the constructor in every slot, so a slot added to `Message` is set here too).
    The compiled core's modules call it as ``message.new_message``, which compiled is its
    C form in ``_message_layout.pxd`` (issue 43).
    """
    msg = _new(Message)
    msg.dest = dest
    msg.src = src
    msg.flags = flags
    msg.headers = headers
    msg.payload = payload
    return msg
