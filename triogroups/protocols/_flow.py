"""Credit-based flow control: what UFC (unicasts) and MFC (multicasts) share.

JGroups' FlowControl model. A sender holds *credits* (bytes) per receiver and
spends a message's payload length on each send; with too few credits the
message waits and new sends wait at the top of the stack (`blocks_down`), so a slow receiver
throttles its senders instead of growing their memory. A receiver counts what
it received from each sender; once that sender's credits as it sees them fall
to ``min_credits`` (``max_credits * min_threshold`` unless set), it sends a
REPLENISH with what was used. A sender blocked longer than ``max_block_time``
sends CREDIT_REQUEST to the members it lacks credits from; the receiver
answers with a REPLENISH at once. A view change adds members with
``max_credits`` and forgets those that left, which releases senders waiting on
them.

Rules beyond JGroups, because here one down loop carries every sender:

- Messages wait in a FIFO queue per destination (one queue for all
  multicasts in MFC); while any queue is non-empty the layer blocks the
  senders above. A message waits behind the queue of its destination even if
  credits would cover it, so per-sender order holds.
- OOB messages spend credits too, but may overtake waiting messages when
  their credits suffice.
- NO_FC messages spend nothing and never make a queue, but keep their place
  behind an existing one (per-sender FIFO).
- DONT_BLOCK messages that cannot go at once are dropped and counted.
- Empty payloads cost nothing (JGroups: length 0 is not flow controlled).
- A message larger than ``max_credits`` goes once the credits are full
  (JGroups would block it for ever); credits then drop to 0.
- ``max_block_time = 0`` never sends CREDIT_REQUEST (JGroups: wait for ever).
- Once the member has left the group (`Disconnected` from GMS below; `Disconnect`
  when GMS is not below) nobody replenishes any more: what waits for credits goes
  on at once (``released_at_leave``) and later messages pass without credits, as
  JGroups' stopped FlowControl unblocks its senders. No sender stays blocked; the
  reliability layer below decides what a message after the leave is worth (MCAST
  drops it).

Never awaits, never reads a clock: ``now`` is passed in.
"""

from __future__ import annotations

import math
from collections import deque
from types import ModuleType
from typing import Any, ClassVar, NamedTuple

from triogroups import _compiled
from triogroups.address import Address
from triogroups.events import Disconnect, Disconnected, Event
from triogroups.message import Flag, Message
from triogroups.properties import Duration, Float, Size, at_least, between, positive
from triogroups.protocol import Protocol
from triogroups.view import View

__all__ = ["CREDIT_REQUEST", "REPLENISH", "FcHeader", "FlowControl"]

REPLENISH = 1
CREDIT_REQUEST = 2

_OOB = int(Flag.OOB)
_NO_FC = int(Flag.NO_FC)
_DONT_BLOCK = int(Flag.DONT_BLOCK)
_CONTROL_FLAGS = int(Flag.OOB | Flag.INTERNAL)
#: The send path's loops (`triogroups.protocols._down_loops`: `flow_cost`, and MFC's
#: `unlooped_bytes`) in the form this process runs: compiled where the build made it.
DOWN_LOOPS: ModuleType = _compiled.load("protocols._down_loops")

#: The byte counts of every batch that comes up, compiled or pure (`triogroups._compiled`).
UP_SCANS: ModuleType = _compiled.load("protocols._up_scans")


class FcHeader(NamedTuple):
    """A REPLENISH (credits granted) or a CREDIT_REQUEST (credits asked for)."""

    type: int
    credits: int


class FlowControl(Protocol):
    """The shared half of UFC and MFC; subclasses supply the sender's credit book.

    Subclass hooks: `_take` (spend ``cost`` for ``key`` if the credits allow it),
    `_credit` (a REPLENISH arrived), `_short_of` (whom to ask for credits),
    `_view_members` (a view arrived) and `_credit_stats`.
    """

    COUNTERS = (
        "blockings",
        "dont_block_drops",
        "credit_requests_sent",
        "credit_requests_received",
        "replenishments_sent",
        "replenishments_received",
        "bytes_sent",
        "bytes_received",
        "malformed",
        "released_at_leave",
    )
    DURATIONS = ("time_blocked",)

    #: True: flow-control multicasts (MFC); False: unicasts (UFC).
    multicast: ClassVar[bool] = False

    max_credits = Size(
        5_000_000,
        doc="bytes a sender may send to a receiver before it must get credits back",
        check=positive,
    )
    min_threshold = Float(
        0.40,
        doc="a receiver replenishes once a sender's credits fall to max_credits * this",
        check=between(0, 1),
    )
    min_credits = Size(
        0,
        doc="replenish threshold in bytes; 0: max_credits * min_threshold",
        check=at_least(0),
    )
    max_block_time = Duration(
        0.5,
        doc="how long a sender waits before it sends CREDIT_REQUEST (0: never)",
        check=at_least(0),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._received: dict[Address, int] = {}
        self._queues: dict[Address | None, deque[Message]] = {}
        self._blocked_since: float | None = None
        self._next_request = math.inf
        self._gms_below = False
        self._has_left = False  # the member left the group: credits no longer apply

    def _threshold(self) -> int:
        return self.min_credits or int(self.max_credits * self.min_threshold)

    # --- subclass hooks ------------------------------------------------------------

    def _take(self, key: Address | None, cost: int) -> bool:
        raise NotImplementedError

    def _take_all(self, key: Address | None, total: int) -> bool:
        """Spend ``total`` only if ``key``'s credits cover all of it; False changes nothing.

        Messages whose costs add up to ``total`` would each pass `_take` in turn.
        """
        raise NotImplementedError

    def _credit(self, member: Address, credits: int) -> None:
        raise NotImplementedError

    def _short_of(self, key: Address | None, cost: int) -> list[tuple[Address, int]]:
        raise NotImplementedError

    def _view_members(self, view: View) -> None:
        raise NotImplementedError

    def _credit_stats(self) -> dict[str, Any]:
        raise NotImplementedError

    # --- leaving -------------------------------------------------------------------

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        self._gms_below = any(p.name == "GMS" for p in below)

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, Disconnect) and not self._gms_below:
            self._left_group(now)  # below GMS (or without it) a Disconnect means it left
        super().down_event(event, now)

    def up_event(self, event: Event, now: float) -> None:
        if isinstance(event, Disconnected):
            self._left_group(now)
        super().up_event(event, now)

    def _left_group(self, now: float) -> None:
        """The member left: release what waits for credits, and gate nothing from now on."""
        if self._has_left:
            return
        self._has_left = True
        waiting = [m for queue in self._queues.values() for m in queue]
        self._queues.clear()
        self.counters["released_at_leave"] += len(waiting)
        self.send_down(waiting)
        self._update_blocked(now)

    # --- sending -------------------------------------------------------------------

    def _handles(self, msg: Message) -> bool:
        return (msg.dest is None) is self.multicast

    @staticmethod
    def _cost(msg: Message) -> int:
        return 0 if msg.flags & _NO_FC else len(msg.payload)

    def down(self, batch: list[Message], now: float) -> None:
        if self._has_left:
            self.send_down(batch)  # nobody grants credits any more
            return
        if not self._queues and self._down_at_once(batch, now):
            return
        out: list[Message] = []
        queues = self._queues
        take = self._take
        multicast = self.multicast
        spent = 0
        for msg in batch:
            key = msg.dest
            if (key is None) is not multicast:
                out.append(msg)
                continue
            flags = msg.flags
            cost = 0 if flags & _NO_FC else len(msg.payload)
            queue = queues.get(key) if queues else None
            if (not queue or flags & _OOB) and take(key, cost):
                spent += cost
                out.append(msg)
            elif flags & _DONT_BLOCK:
                self.counters["dont_block_drops"] += 1
            elif queue is None:
                queues[key] = deque((msg,))
            else:
                queue.append(msg)
        self.counters["bytes_sent"] += spent
        self.send_down(out)
        self._sent_locally(out)
        self._update_blocked(now)

    def _down_at_once(self, batch: list[Message], now: float) -> bool:
        """The common case in one pass: nothing waits, the batch's flow-controlled
        messages all go to one destination, and its credits cover them all.

        Then every message would pass `_take` in turn, so the batch goes as it
        is, for one credit check instead of one per message. False (a second
        destination, too few credits) changes nothing: `down` takes them one by one.
        """
        cost = DOWN_LOOPS.flow_cost(batch, self.multicast)
        if cost is None:
            return False
        key, total = cost
        if total and not self._take_all(key, total):
            return False
        self.counters["bytes_sent"] += total
        self.send_down(batch)
        self._sent_locally(batch)
        self._update_blocked(now)
        return True

    def _sent_locally(self, sent: list[Message]) -> None:
        """Hook: MFC credits itself for DONT_LOOPBACK multicasts it will never receive."""

    def _drain(self, now: float) -> None:
        """Send waiting messages, in order per destination, while credits allow."""
        out: list[Message] = []
        for key in list(self._queues):
            queue = self._queues[key]
            while queue:
                cost = self._cost(queue[0])
                if not self._take(key, cost):
                    break
                self.counters["bytes_sent"] += cost
                out.append(queue.popleft())
            if not queue:
                del self._queues[key]
        self.send_down(out)
        self._sent_locally(out)
        self._update_blocked(now)

    def _update_blocked(self, now: float) -> None:
        if self._queues and self._blocked_since is None:
            self._blocked_since = now
            self.counters["blockings"] += 1
            if self.max_block_time > 0:
                self._next_request = now + self.max_block_time
        elif not self._queues and self._blocked_since is not None:
            self.durations["time_blocked"] += now - self._blocked_since
            self._blocked_since = None
            self._next_request = math.inf

    def blocks_down(self) -> bool:
        return bool(self._queues)

    def next_deadline(self) -> float:
        return self._next_request

    def tick(self, now: float) -> None:
        """Blocked for max_block_time: ask the members we lack credits from."""
        if not self._queues or self.max_block_time <= 0:
            self._next_request = math.inf
            return
        asked: set[Address] = set()
        for key, queue in self._queues.items():
            for member, left in self._short_of(key, self._cost(queue[0])):
                if member not in asked:
                    asked.add(member)
                    self._control(member, CREDIT_REQUEST, max(0, self.max_credits - left))
                    self.counters["credit_requests_sent"] += 1
        self._next_request = now + self.max_block_time

    def _control(self, to: Address, kind: int, credits: int) -> None:
        header = FcHeader(kind, credits)
        self.send_down_one(Message(to, flags=_CONTROL_FLAGS, headers={self.id: header}))

    # --- receiving ------------------------------------------------------------------

    def up(self, batch: list[Message], now: float) -> None:
        """Count what each sender used, pass the data on, handle REPLENISH / CREDIT_REQUEST.

        The bytes each sender used are `bytes_by_sender`'s, the compiled core's loop
        over the batch. Control messages are rare: they are handled after it (they only
        spend or grant credits, so their order against the counting does not matter),
        and only then is the batch copied without them; otherwise it goes up as it is.
        """
        used: dict[Address, int] = {}
        pid = self.id
        controls = UP_SCANS.bytes_by_sender(batch, pid, self.multicast, used)
        credited = False
        if controls:
            for msg in batch:
                if pid in msg.headers:
                    credited = self._on_control(msg.src, msg.headers[pid]) or credited
            batch = [msg for msg in batch if pid not in msg.headers]
        self.send_up(batch)
        for sender, length in used.items():
            self.counters["bytes_received"] += length
            self._account(sender, length)
        if credited:
            self._drain(now)

    def _account(self, sender: Address, length: int) -> None:
        """Receiver: spend ``sender``'s credits as we see them; replenish at the threshold."""
        left = self._received.get(sender)
        if left is None:
            return
        left = max(0, left - length)
        if left <= self._threshold():
            self._received[sender] = self.max_credits
            self._control(sender, REPLENISH, self.max_credits - left)
            self.counters["replenishments_sent"] += 1
        else:
            self._received[sender] = left

    def _on_control(self, src: Address | None, hdr: FcHeader) -> bool:
        """Handle REPLENISH / CREDIT_REQUEST; True if our credits grew."""
        if src is None or hdr.credits < 0 or hdr.type not in (REPLENISH, CREDIT_REQUEST):
            self.counters["malformed"] += 1
            return False
        credits = min(hdr.credits, self.max_credits)
        if hdr.type == REPLENISH:
            self.counters["replenishments_received"] += 1
            self._credit(src, credits)
            return True
        if hdr.type == CREDIT_REQUEST:
            self.counters["credit_requests_received"] += 1
            left = self._received.get(src)
            if left is not None and credits > 0:
                self._received[src] = min(self.max_credits, left + credits)
                self._control(src, REPLENISH, credits)
                self.counters["replenishments_sent"] += 1
        return False

    # --- views ---------------------------------------------------------------------------

    def view_changed(self, view: View, now: float) -> None:
        super().view_changed(view, now)
        received = self._received
        for member in [m for m in received if m not in view]:
            del received[member]
        for member in view.members:
            received.setdefault(member, self.max_credits)
        self._view_members(view)
        self._drain(now)

    def gauges(self) -> dict[str, Any]:
        waiting = [m for q in self._queues.values() for m in q]
        return {
            **self._credit_stats(),
            "receiver_credits": {str(m): c for m, c in self._received.items()},
            "blocked": bool(self._queues),
            "queued_messages": len(waiting),
            "queued_bytes": sum(len(m.payload) for m in waiting),
            "blocked_since": self._blocked_since,
        }
