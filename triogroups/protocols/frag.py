"""FRAG: split large messages into fragments and reassemble them (JGroups FRAG2).

A message whose payload is larger than ``frag_size`` leaves as
``ceil(len / frag_size)`` fragments: copies of the message (destination,
flags and the headers of the layers above) each carrying a slice of the
payload and a `FragHeader(id, frag_id, num_frags)`; ``id`` counts this sender's
fragmented messages. Fragments are ordinary messages to the layers below, so
with a reliability layer there (NAKACK2, UNICAST3) they are retransmitted,
deduplicated and ordered like any other message, and the whole message
arrives over a lossy network too. The receiver collects fragments per
(sender, id) in any order and passes the message up, once, when the last
one is in; it takes the place of that last fragment in the batch.

Size limit. A payload larger than ``max_message_size`` is refused. A
sans-IO layer cannot raise into the sender's ``await`` (an exception here
would crash the layer and restart the stack), so the application side
refuses at send time, before the message enters the stack: the channel
calls `Frag.check_size`, which raises ValueError naming the size and the
limit. As defence in depth, anything larger that reaches FRAG anyway is
dropped and counted (``refused_oversized``), never sent.

Bounded memory. Partial messages from a member that leaves the view are
discarded at the view change. Each sender may hold at most
``max_pending_size`` bytes of unfinished messages (at least
``max_message_size``, so one message of the largest size always fits);
beyond it the sender's oldest partial messages are dropped (``evicted``);
a fragment that completes its message needs no room. Deduplication is the
job of the reliability layers below, but the ids of the last few finished
messages per sender are remembered, so a late or duplicate fragment of one
(over a bare lossy transport) is dropped (``stale``) instead of starting a
partial message that could never complete. Malformed or inconsistent
fragment headers are dropped and counted.

Sans-IO: never awaits, never reads a clock.
"""

from __future__ import annotations

import logging
from collections import deque
from types import ModuleType
from typing import Any, NamedTuple

from triogroups import _compiled
from triogroups.address import Address
from triogroups.message import Message
from triogroups.properties import PropertyError, Size, positive
from triogroups.protocol import Passes, Protocol
from triogroups.protocols import ids
from triogroups.protocols._batch import carries
from triogroups.view import View
from triogroups.wire import register_header

__all__ = ["Frag", "FragHeader"]

_ID = ids.FRAG
_log = logging.getLogger(__name__)
#: The send path's loops (`triogroups.protocols._down_loops`: `largest_payload`) in the form
#: this process runs: compiled where the build made it.
DOWN_LOOPS: ModuleType = _compiled.load("protocols._down_loops")

#: Ids of finished (delivered or dropped) messages remembered per sender, so a
#: late or duplicate fragment of one does not start a partial that never ends.
REMEMBERED = 64

#: Room a fragment leaves in a bundle for the headers of the layers below,
#: the addresses and the bundle prefix (checked against the transport).
HEADROOM = 1024


class FragHeader(NamedTuple):
    """Fragment ``frag_id`` of ``num_frags`` of the sender's fragmented message ``id``.

    Field names as in JGroups (``index`` and ``count`` would shadow tuple methods).
    """

    id: int
    frag_id: int
    num_frags: int


register_header(_ID, FragHeader)


class _Partial:
    """The fragments of one message received so far."""

    __slots__ = ("count", "parts", "size", "template")

    def __init__(self, count: int) -> None:
        self.count = count
        self.parts: dict[int, bytes] = {}
        self.size = 0
        self.template: Message | None = None  # fragment 0: dest, flags, upper headers


def _check_sizes(max_message_size: int, max_pending_size: int) -> None:
    if max_pending_size < max_message_size:
        raise PropertyError(
            f"FRAG.max_pending_size must be >= max_message_size ({max_message_size}), "
            f"got {max_pending_size}"
        )


class Frag(Protocol):
    """Fragmentation and reassembly (see the module docstring)."""

    name = "FRAG"
    COUNTERS = (
        "fragmented",
        "fragments_sent",
        "fragments_received",
        "reassembled",
        "refused_oversized",
        "malformed",
        "duplicates",
        "stale",
        "evicted",
        "discarded_left",
    )
    passes_up: Passes | None = "all"  # fragments carry its header; whole messages go on
    id = _ID

    frag_size = Size(
        60_000,
        doc="largest payload sent as one message; larger ones are split",
        check=positive,
    )
    max_message_size = Size(
        16 << 20,
        doc="largest payload accepted for sending; the channel refuses larger ones at send",
        check=positive,
    )
    max_pending_size = Size(
        32 << 20,
        doc="bytes of unfinished messages kept per sender (>= max_message_size)",
        check=positive,
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        _check_sizes(self.max_message_size, self.max_pending_size)
        self._next_id = 0
        self._partials: dict[Address | None, dict[int, _Partial]] = {}
        self._pending_bytes: dict[Address | None, int] = {}
        self._finished: dict[Address | None, deque[int]] = {}

    # --- configuration ---------------------------------------------------------------

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        limit = getattr(below[0], "max_bundle_size", None) if below else None
        if isinstance(limit, int) and self.frag_size > limit - HEADROOM:
            raise PropertyError(
                f"FRAG.frag_size must be <= {below[0].name}.max_bundle_size - {HEADROOM} "
                f"({limit - HEADROOM}), got {self.frag_size}"
            )

    def set_property(self, key: str, value: Any, now: float) -> None:
        if key in ("max_message_size", "max_pending_size"):
            new = self._properties[key].validate(self.name, value)
            message = new if key == "max_message_size" else self.max_message_size
            _check_sizes(message, new if key == "max_pending_size" else self.max_pending_size)
        super().set_property(key, value, now)

    def check_size(self, nbytes: int) -> None:
        """Raise ValueError if a payload of ``nbytes`` is too large to send.

        The channel calls this before a message enters the stack, so an
        oversized send fails in the sender's ``await`` with a clear error.
        """
        if nbytes > self.max_message_size:
            raise ValueError(
                f"message of {nbytes} bytes exceeds FRAG.max_message_size {self.max_message_size}"
            )

    # --- sending ---------------------------------------------------------------------

    def down(self, batch: list[Message], now: float) -> None:
        limit = self.frag_size
        largest = self.max_message_size
        passes = min(limit, largest)
        if DOWN_LOOPS.largest_payload(batch) <= passes:
            self.send_down(batch)
            return
        out: list[Message] = []
        for msg in batch:
            size = len(msg.payload)
            if size > largest:
                self._drop("refused_oversized", f"message of {size} bytes from above")
            elif size <= limit:
                out.append(msg)
            else:
                out.extend(self._fragment(msg, limit))
        self.send_down(out)

    def _fragment(self, msg: Message, limit: int) -> list[Message]:
        msg_id = self._next_id
        self._next_id += 1
        payload = msg.payload
        count = -(-len(payload) // limit)
        self.counters["fragmented"] += 1
        self.counters["fragments_sent"] += count
        return [
            Message(
                msg.dest,
                payload[i * limit : (i + 1) * limit],
                src=msg.src,
                flags=msg.flags,
                headers={**msg.headers, _ID: FragHeader(msg_id, i, count)},
            )
            for i in range(count)
        ]

    def _drop(self, counter: str, what: str) -> None:
        """Count a drop; log the 1st, 2nd, 4th, 8th ... of each kind."""
        n = self.counters[counter] = self.counters[counter] + 1
        if n & (n - 1) == 0:
            _log.warning("%s: FRAG dropped %s (%s: %d)", self.local_address, what, counter, n)

    # --- receiving -------------------------------------------------------------------

    def up(self, batch: list[Message], now: float) -> None:
        if not carries(batch, _ID):
            self.send_up(batch)
            return
        passed: list[Message] = []
        for msg in batch:
            hdr = msg.headers.get(_ID)
            if hdr is None:
                passed.append(msg)
            else:
                whole = self._add(msg, hdr)
                if whole is not None:
                    passed.append(whole)
        if passed:
            self.send_up(passed)

    def _add(self, msg: Message, hdr: FragHeader) -> Message | None:
        """Store one fragment; the whole message once it is complete."""
        self.counters["fragments_received"] += 1
        if not 0 <= hdr.frag_id < hdr.num_frags:
            self._drop("malformed", f"fragment {hdr.frag_id} of {hdr.num_frags} from {msg.src}")
            return None
        src = msg.src
        partials = self._partials.get(src)
        entry = None if partials is None else partials.get(hdr.id)
        if entry is None:
            if hdr.id in self._finished.get(src, ()):
                self.counters["stale"] += 1
                return None
            entry = _Partial(hdr.num_frags)
            self._partials.setdefault(src, {})[hdr.id] = entry
        elif entry.count != hdr.num_frags:
            self._drop("malformed", f"message {hdr.id} from {src} with two fragment counts")
            self._discard(src, hdr.id)
            return None
        if hdr.frag_id in entry.parts:
            self.counters["duplicates"] += 1
            return None
        size = len(msg.payload)
        completes = len(entry.parts) + 1 == entry.count  # leaves at once: needs no room
        if not completes and not self._make_room(src, size, hdr.id):
            return None
        entry.parts[hdr.frag_id] = msg.payload
        entry.size += size
        self._pending_bytes[src] = self._pending_bytes.get(src, 0) + size
        if hdr.frag_id == 0:
            entry.template = msg
        if len(entry.parts) < entry.count:
            return None
        self._discard(src, hdr.id)
        self.counters["reassembled"] += 1
        template = entry.template
        assert template is not None
        headers = dict(template.headers)
        del headers[_ID]
        payload = b"".join(entry.parts[i] for i in range(entry.count))
        return Message(template.dest, payload, src=src, flags=template.flags, headers=headers)

    def _make_room(self, src: Address | None, size: int, msg_id: int) -> bool:
        """Evict ``src``'s oldest partial messages until ``size`` more bytes fit.

        False if the message ``msg_id`` itself had to go (it is dropped).
        """
        partials = self._partials[src]
        while self._pending_bytes.get(src, 0) + size > self.max_pending_size:
            oldest = next(iter(partials))
            self._drop("evicted", f"a partial message from {src} (over max_pending_size)")
            self._discard(src, oldest)
            if oldest == msg_id:
                return False
        return True

    def _discard(self, src: Address | None, msg_id: int) -> None:
        """Forget message ``msg_id`` of ``src`` (complete or dropped) and remember it is done."""
        finished = self._finished.get(src)
        if finished is None:
            finished = self._finished[src] = deque(maxlen=REMEMBERED)
        finished.append(msg_id)
        partials = self._partials[src]
        entry = partials.pop(msg_id)
        left = self._pending_bytes.get(src, 0) - entry.size
        if partials:
            self._pending_bytes[src] = left
        else:
            del self._partials[src]
            self._pending_bytes.pop(src, None)

    def view_changed(self, view: View, now: float) -> None:
        """Partial messages from members that left can never complete: drop them."""
        super().view_changed(view, now)
        for src in [s for s in self._partials if s not in view]:
            self.counters["discarded_left"] += len(self._partials.pop(src))
            self._pending_bytes.pop(src, None)
        for src in [s for s in self._finished if s not in view]:
            del self._finished[src]

    def gauges(self) -> dict[str, Any]:
        return {
            "pending_messages": sum(len(p) for p in self._partials.values()),
            "pending_bytes": sum(self._pending_bytes.values()),
            "pending_senders": len(self._partials),
        }
