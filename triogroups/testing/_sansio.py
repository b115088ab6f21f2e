"""Sans-IO protocol objects joined by an in-memory link: the shared unit-test harness.

In the spirit of h11's ``ConnectionPair``: a test builds two or more members,
each one protocol object or a small stack of them (bottom first), hosts them
the way the stack host does (minus Trio), joins them with a link it drives
itself, and asserts what each side emitted and delivered. Nothing here awaits
or reads a clock: time is `SansIONetwork.now`, moved by the test (``now=`` on
every input, `SansIONetwork.step`, `SansIONetwork.run`).

- A `SansIOMember` forwards whatever a layer emits to its neighbour at once,
  in order (run to completion); application sends wait at the top while a
  layer `blocks_down`; `tick` runs the layers that are due and fails when a
  tick leaves its deadline due, as the host does. What its top sends up is
  captured in `SansIOMember.delivered` and `SansIOMember.events`.
- Whatever leaves a member's bottom is routed as the transports route it (a
  unicast to oneself and a multicast's loopback stay local) and crosses the
  real wire codec, one message per datagram, so every header is encoded and
  validated on the way. Every input returns what it made leave the bottom,
  as a receiver decodes it: a test may hand that to a peer itself
  (`SansIOMember.receive`) or let the link carry it (`SansIONetwork.deliver_all`),
  never both.
- The link is lossless and FIFO unless told otherwise: ``loss``,
  ``duplicate`` and ``reorder`` are probabilities drawn from a
  ``random.Random(seed)``, so a failing run replays; ``drop`` picks datagrams
  by hand.

The module-level helpers serve tests that drive one protocol object
directly: `started` (start it and install a view), `down_messages` /
`up_messages` / `up_payloads` (take an outbox, keep the messages, optionally
after a trip through the wire codec), `split`.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from triogroups.address import Address
from triogroups.events import Event, InjectView, Item, ViewChange
from triogroups.message import Message
from triogroups.protocol import Protocol
from triogroups.transports._bundler import route
from triogroups.view import View
from triogroups.wire import MAX_DATAGRAM, WireCodec, WireError

__all__ = [
    "Livelock",
    "SansIOMember",
    "SansIONetwork",
    "addresses",
    "down_messages",
    "split",
    "started",
    "up_messages",
    "up_payloads",
    "view_of",
]

P = TypeVar("P", bound=Protocol)

#: ``drop(src, dest, msg)``: True drops that datagram on its way to ``dest``.
Drop = Callable[[Address, Address, Message], bool]

#: What one run may move before it is called a livelock (a protocol answering itself for ever).
MAX_PACKETS = 200_000
#: A UDP datagram's largest payload: the codec's limit unless a test sets ``max_bundle_size``.


_CODEC = WireCodec("test")


class Livelock(AssertionError):
    """The link never went quiet: some layer keeps emitting (or keeps its timer due)."""


# --- one protocol object, driven by hand ----------------------------------------------------


def addresses(names: str | Iterable[str]) -> list[Address]:
    """One address per name, uuids counting from 1: ``A, B, C = addresses("ABC")``."""
    return [Address(i + 1, name) for i, name in enumerate(names)]


def view_of(*members: Address, counter: int = 1) -> View:
    """The view of ``members`` (the first is the coordinator) with id ``counter``."""
    return View.create(members[0], counter, members)


def started(
    proto: P,
    address: Address,
    *,
    view: View | None = None,
    cluster: str = "test",
    now: float = 0.0,
) -> P:
    """``proto`` started at ``address``, ``view`` installed (a `ViewChange` going down),
    and both outboxes emptied: ready for a test to feed it input and read what it emits."""
    proto.start(address, cluster, now)
    if view is not None:
        proto.down_event(ViewChange(view), now)
    proto.take_down()
    proto.take_up()
    return proto


def split(items: Iterable[Item]) -> tuple[list[Message], list[Event]]:
    """An outbox's items as (every message of its batches, in order; its events, in order)."""
    msgs: list[Message] = []
    events: list[Event] = []
    for item in items:
        if type(item) is list:
            msgs.extend(item)
        else:
            events.append(item)  # type: ignore[arg-type]
    return msgs, events


def down_messages(proto: Protocol, *, wire: bool = False) -> list[Message]:
    """Take ``proto``'s down outbox and return the messages in it (events are dropped).

    With ``wire``, each message crosses the real wire codec as a datagram of
    its own, as a receiver decodes it: a copy, ``src`` stamped with
    ``proto.local_address``, every header encoded and validated on the way.
    """
    msgs = split(proto.take_down())[0]
    if not wire:
        return msgs
    src = proto.local_address
    if src is None:
        raise RuntimeError("wire=True needs a started protocol (local_address is None)")
    return [_CODEC.decode(_CODEC.encode(m.dest, src, [m])).messages[0] for m in msgs]


def up_messages(proto: Protocol) -> list[Message]:
    """Take ``proto``'s up outbox and return the messages in it (events are dropped)."""
    return split(proto.take_up())[0]


def up_payloads(proto: Protocol) -> list[bytes]:
    """Take ``proto``'s up outbox and return the payloads of the messages in it."""
    return [m.payload for m in split(proto.take_up())[0]]


# --- members on a link ----------------------------------------------------------------------


class SansIOMember:
    """One member: its layers (bottom first), what reached its top, what it holds back.

    Built by `SansIONetwork.add`. Every input takes an optional ``now`` (which
    sets the network's clock) and returns what left the bottom meanwhile,
    wire-decoded, in order; it is also in flight on the link.
    """

    def __init__(self, net: SansIONetwork, address: Address, layers: list[Protocol]) -> None:
        if not layers:
            raise ValueError("layers must not be empty")
        self.net = net
        self.address = address
        self.layers = layers
        self._delivered: list[Message] = []
        #: events the top layer sent up, in order
        self.events: list[Event] = []
        #: events the bottom layer passed down (a transport would consume them)
        self.events_below: list[Event] = []
        self._pending: deque[list[Message]] = deque()
        self._sent: list[Message] = []
        for layer in layers:
            layer.start(address, net.cluster, net.now)

    def __repr__(self) -> str:
        return f"SansIOMember({self.address}, {[layer.name for layer in self.layers]})"

    @property
    def top(self) -> Protocol:
        """The layer the application talks to."""
        return self.layers[-1]

    @property
    def bottom(self) -> Protocol:
        """The layer next to the link."""
        return self.layers[0]

    @property
    def delivered(self) -> list[Message]:
        """The messages the top layer sent up, in order (the list itself, not a copy)."""
        return self._delivered

    @property
    def payloads(self) -> list[bytes]:
        """The payloads of `delivered`, in order."""
        return [m.payload for m in self._delivered]

    @property
    def view(self) -> View | None:
        """The newest view the top sent up as a `ViewChange`, or None."""
        for event in reversed(self.events):
            if isinstance(event, ViewChange):
                return event.view
        return None

    def stats(self) -> dict[str, Any]:
        """The top layer's ``stats()``."""
        stats: dict[str, Any] = self.top.stats()
        return stats

    # --- input --------------------------------------------------------------------

    def send(
        self,
        dest: SansIOMember | Address | None,
        *payloads: bytes,
        flags: int = 0,
        now: float | None = None,
    ) -> list[Message]:
        """The application sends one message per payload to ``dest`` (None: the group)."""
        to = dest.address if isinstance(dest, SansIOMember) else dest
        return self.send_batch([Message(to, p, flags=flags) for p in payloads], now=now)

    def send_batch(self, msgs: list[Message], *, now: float | None = None) -> list[Message]:
        """The application sends ``msgs``: queued at the top, released while no layer blocks."""
        self._at(now)
        self._pending.append(msgs)
        self._release()
        return self._take_sent()

    def receive(self, msgs: Iterable[Message], now: float | None = None) -> list[Message]:
        """``msgs`` arrive from the network: handed to the bottom layer's `up`."""
        return self.up_at(0, list(msgs), now=now)

    def up_at(self, index: int, batch: list[Message], now: float | None = None) -> list[Message]:
        """Hand ``batch`` to layer ``index``'s `up` (network input for that layer)."""
        self.layers[index].up(batch, self._at(now))
        self.drain()
        return self._take_sent()

    def up_event_at(self, index: int, event: Event, now: float | None = None) -> list[Message]:
        """Hand ``event`` to layer ``index``'s `up_event` (from the layers below)."""
        self.layers[index].up_event(event, self._at(now))
        self.drain()
        return self._take_sent()

    def event_down(self, event: Event, now: float | None = None) -> list[Message]:
        """The application passes ``event`` down (a view, a digest, a disconnect...)."""
        self.top.down_event(event, self._at(now))
        self.drain()
        return self._take_sent()

    def install(self, view: View, now: float | None = None) -> list[Message]:
        """Install ``view`` here, past any GMS: a `ViewChange` going down."""
        return self.event_down(ViewChange(view), now=now)

    def tick(self, now: float | None = None, *, force: bool = False) -> list[Message]:
        """Tick every layer whose deadline is due, as the host does; with ``force``, every
        layer, due or not (a unit test running a timer by hand).

        Raises AssertionError when a tick leaves its own deadline due (the host
        would crash that layer: on a virtual clock time would stand still).
        """
        now = self._at(now)
        for layer in self.layers:
            if force or layer.next_deadline() <= now:
                layer.tick(now)
                if layer.next_deadline() <= now:
                    raise AssertionError(f"{layer.name}.tick left its deadline due at {now}")
                self.drain()
        return self._take_sent()

    def next_deadline(self) -> float:
        """The earliest deadline of any layer (inf for none)."""
        return min(layer.next_deadline() for layer in self.layers)

    def blocked(self) -> bool:
        """True while application sends wait at the top for a layer that blocks."""
        return bool(self._pending)

    # --- hosting ------------------------------------------------------------------

    def _at(self, now: float | None) -> float:
        if now is not None:
            self.net.now = now
        return self.net.now

    def _take_sent(self) -> list[Message]:
        sent, self._sent = self._sent, []
        return sent

    def drain(self) -> None:
        """Forward every layer's outboxes until all are empty (run to completion)."""
        layers, now, top = self.layers, self.net.now, len(self.layers) - 1
        moved = True
        while moved:
            moved = False
            for i, layer in enumerate(layers):
                down, up = layer.take_down(), layer.take_up()
                if down or up:
                    moved = True
                for item in down:
                    if i == 0:
                        if type(item) is list:
                            self._sent.extend(self.net.transmit(self, item))
                        else:
                            self.events_below.append(item)  # type: ignore[arg-type]
                    elif type(item) is list:
                        layers[i - 1].down(item, now)
                    else:
                        layers[i - 1].down_event(item, now)  # type: ignore[arg-type]
                for item in up:
                    if i == top:
                        if type(item) is list:
                            self._delivered.extend(item)
                        else:
                            self.events.append(item)  # type: ignore[arg-type]
                    elif type(item) is list:
                        layers[i + 1].up(item, now)
                    else:
                        layers[i + 1].up_event(item, now)  # type: ignore[arg-type]
        self._release()

    def _release(self) -> None:
        while self._pending and not any(layer.blocks_down() for layer in self.layers):
            self.top.down(self._pending.popleft(), self.net.now)
            self.drain()


_Datagram = tuple[Address, Address | None, bytes | list[Message]]


class SansIONetwork:
    """Members joined by an in-memory link with a virtual clock.

    ``loss``, ``duplicate`` and ``reorder`` are per-datagram probabilities
    (a loss or duplicate per receiver; a reorder takes a random datagram in
    flight instead of the oldest) drawn from ``random.Random(seed)``; own
    loopbacks are never lost. ``max_bundle_size`` sets the codec's limit: a
    message that does not encode within it is dropped, as a transport drops
    it, and kept in `oversized`; without it an encoding error is raised.
    More than ``max_packets`` datagrams delivered (or timer steps in one
    `run`) is a `Livelock`.
    """

    def __init__(
        self,
        *,
        cluster: str = "test",
        seed: int = 0,
        loss: float = 0.0,
        duplicate: float = 0.0,
        reorder: float = 0.0,
        max_bundle_size: int | None = None,
        max_packets: int = MAX_PACKETS,
    ) -> None:
        for name, p in (("loss", loss), ("duplicate", duplicate), ("reorder", reorder)):
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {p}")
        self.cluster = cluster
        #: the virtual clock: moved by ``now=`` on a member's input, `step` and `run`
        self.now = 0.0
        self.members: dict[Address, SansIOMember] = {}
        self.codec = WireCodec(cluster, max_size=max_bundle_size or MAX_DATAGRAM)
        self.loss, self.duplicate, self.reorder = loss, duplicate, reorder
        self.random = random.Random(seed)
        self._limited = max_bundle_size is not None
        self.max_packets = max_packets
        self._queue: deque[_Datagram] = deque()
        #: datagrams delivered so far (loopbacks included); `Livelock` past MAX_PACKETS
        self.packets = 0
        #: with `record` set: every message put on the wire, as (sender, wire-decoded message)
        self.wire: list[tuple[Address, Message]] = []
        self.record = False
        #: messages that did not encode within ``max_bundle_size`` (never sent)
        self.oversized: list[Message] = []
        #: (sender, receiver, message) the link lost or ``drop`` refused
        self.dropped: list[tuple[Address, Address, Message]] = []

    def add(self, address: Address, layers: Protocol | Sequence[Protocol]) -> SansIOMember:
        """A member at ``address`` running ``layers`` (one protocol or a list, bottom first),
        started at `now`."""
        stack = [layers] if isinstance(layers, Protocol) else list(layers)
        member = self.members[address] = SansIOMember(self, address, stack)
        return member

    def __getitem__(self, address: Address) -> SansIOMember:
        return self.members[address]

    # --- the link -----------------------------------------------------------------

    def transmit(self, member: SansIOMember, batch: list[Message]) -> list[Message]:
        """Put what left ``member``'s bottom in flight; returns it as a receiver decodes it."""
        src = member.address
        by_dest, local = route(batch, src)
        out: list[Message] = []
        for dest, msgs in by_dest.items():
            for msg in msgs:  # one datagram per message: nothing is too large for the codec
                try:
                    data = self.codec.encode(dest, src, [msg])
                except ValueError:
                    if not self._limited:
                        raise
                    self.oversized.append(msg)
                    continue
                (decoded,) = self.codec.decode(data).messages
                out.append(decoded)
                if self.record:
                    self.wire.append((src, decoded))
                self._queue.append((src, dest, data))
        if local:  # looped back after what is already in flight, never re-entrantly
            self._queue.append((src, src, [m.copy() for m in local]))
        return out

    def in_flight(self) -> int:
        """Datagrams sent and not yet delivered."""
        return len(self._queue)

    def deliver_all(self, *, drop: Drop | None = None) -> int:
        """Deliver every datagram in flight, and what that provokes, until quiet.

        Returns how many datagrams were delivered. ``drop(src, dest, msg)``
        refuses chosen ones (loopbacks included).
        """
        delivered = 0
        queue, rng = self._queue, self.random
        while queue:
            self.packets += 1
            delivered += 1
            if self.packets > self.max_packets:
                raise Livelock(f"more than {self.max_packets} datagrams: the link never went quiet")
            if self.reorder and len(queue) > 1 and rng.random() < self.reorder:
                queue.rotate(-rng.randrange(1, len(queue)))
            src, dest, data = queue.popleft()
            if type(data) is list:
                if drop is not None:
                    kept = [m for m in data if not self._refused(drop, src, src, m)]
                    data = kept
                if data:
                    self.members[src].receive(data)
                continue
            assert isinstance(data, bytes)
            if dest is None:
                targets = [a for a in self.members if a != src]
            else:
                targets = [dest] if dest in self.members else []
            for target in targets:
                copies = 2 if self.duplicate and rng.random() < self.duplicate else 1
                for _ in range(copies):
                    msgs = self.codec.decode(data).messages
                    if self.loss and rng.random() < self.loss:
                        self.dropped.append((src, target, msgs[0]))
                        continue
                    if drop is not None and self._refused(drop, src, target, msgs[0]):
                        continue
                    self.members[target].receive(msgs)
        return delivered

    def _refused(self, drop: Drop, src: Address, dest: Address, msg: Message) -> bool:
        if drop(src, dest, msg):
            self.dropped.append((src, dest, msg))
            return True
        return False

    # --- time ---------------------------------------------------------------------

    def next_deadline(self) -> float:
        """The earliest deadline of any member (inf for none)."""
        return min((m.next_deadline() for m in self.members.values()), default=math.inf)

    def step(self, *, drop: Drop | None = None) -> float:
        """Deliver what is in flight, move `now` to the next deadline, tick every member
        that is due there and deliver again; returns the new `now` (inf: nothing is armed,
        and the clock stays)."""
        self.deliver_all(drop=drop)
        due = self.next_deadline()
        if due == math.inf:
            return due
        self.now = max(self.now, due)
        for member in list(self.members.values()):
            member.tick()
        self.deliver_all(drop=drop)
        return self.now

    def run(self, duration: float, *, drop: Drop | None = None) -> None:
        """Advance the clock by ``duration``, ticking every due layer, delivering as it goes."""
        end = self.now + duration
        steps = 0
        while True:
            self.deliver_all(drop=drop)
            if self.next_deadline() > end:
                break
            steps += 1
            if steps > self.max_packets:
                raise Livelock(f"more than {self.max_packets} timer steps in {duration} s")
            self.step(drop=drop)
        self.now = end

    # --- views and the codec -------------------------------------------------------

    def install(self, view: View, *, inject: bool = False) -> None:
        """Install ``view`` at every member in it, through GMS (``inject``: an `InjectView`)
        or past it (a `ViewChange`), then deliver what that sends."""
        for address in view.members:
            member = self.members.get(address)
            if member is not None:
                member.event_down(InjectView(view) if inject else ViewChange(view))
        self.deliver_all()

    def wire_round_trip(self, msg: Message, src: Address) -> Message | None:
        """``msg`` as a receiver would decode it, or None if the codec refuses it."""
        try:
            data = self.codec.encode(msg.dest, src, [msg])
        except (ValueError, TypeError, OverflowError):
            return None
        try:
            return self.codec.decode(data).messages[0]
        except WireError:
            return None
