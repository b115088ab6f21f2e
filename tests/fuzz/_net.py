"""A sans-IO network of protocol stacks for the fuzz tests: hostile input in, a clean run after.

Each `Node` is a list of protocol objects (bottom first) hosted the way the
stack host does it, minus Trio: whatever a layer emits is handed at once to
its neighbour, in order; sends from the application wait while a layer
`blocks_down`; `tick` runs when a layer's deadline is due and must move it.
What leaves the bottom is routed as the transports do (`route`: a unicast to
oneself and a multicast's loopback stay local) and crosses the real wire
codec, so every header a protocol emits is encoded and validated on the way.
The network is lossless and FIFO: a clean exchange on it must deliver every
message exactly once and in order, whatever the fuzzer fed the layers before.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

from triogroups import Address, Message
from triogroups.events import Event, InjectView, ViewChange
from triogroups.protocol import Protocol
from triogroups.transports._bundler import route
from triogroups.view import View
from triogroups.wire import WireCodec, WireError

CLUSTER = "fuzz"
#: What one run may move before it is called a livelock (a protocol answering itself for ever).
MAX_PACKETS = 200_000


class Livelock(AssertionError):
    """The network never went quiet: some layer keeps emitting."""


class Node:
    """One member: its layers, what reached its top, and what it still has to send."""

    def __init__(self, net: Net, address: Address, layers: list[Protocol]) -> None:
        self.net = net
        self.address = address
        self.layers = layers
        self.delivered: list[Message] = []
        self.events: list[Event] = []
        self._pending: deque[list[Message]] = deque()
        for layer in layers:
            layer.start(address, CLUSTER, net.now)

    @property
    def view(self) -> View | None:
        for event in reversed(self.events):
            if isinstance(event, ViewChange):
                return event.view
        return None

    # --- input --------------------------------------------------------------------

    def send(self, msgs: list[Message]) -> None:
        """Application sends: queued at the top, released while no layer blocks."""
        self._pending.append(msgs)
        self._release()

    def event_down(self, event: Event) -> None:
        self.layers[-1].down_event(event, self.net.now)
        self.drain()

    def up_at(self, index: int, batch: list[Message]) -> None:
        """Hand ``batch`` to layer ``index``'s `up` (network input for that layer)."""
        self.layers[index].up(batch, self.net.now)
        self.drain()

    def up_event_at(self, index: int, event: Event) -> None:
        self.layers[index].up_event(event, self.net.now)
        self.drain()

    def tick(self) -> None:
        now = self.net.now
        for layer in self.layers:
            if layer.next_deadline() <= now:
                layer.tick(now)
                if layer.next_deadline() <= now:
                    raise AssertionError(f"{layer.name}.tick left its deadline due at {now}")
                self.drain()

    def next_deadline(self) -> float:
        return min(layer.next_deadline() for layer in self.layers)

    # --- hosting ------------------------------------------------------------------

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
                            self.net.transmit(self, item)
                    elif type(item) is list:
                        layers[i - 1].down(item, now)
                    else:
                        layers[i - 1].down_event(item, now)  # type: ignore[arg-type]
                for item in up:
                    if i == top:
                        if type(item) is list:
                            self.delivered.extend(item)
                        else:
                            self.events.append(item)  # type: ignore[arg-type]
                    elif type(item) is list:
                        layers[i + 1].up(item, now)
                    else:
                        layers[i + 1].up_event(item, now)  # type: ignore[arg-type]
        self._release()

    def _release(self) -> None:
        while self._pending and not any(layer.blocks_down() for layer in self.layers):
            self.layers[-1].down(self._pending.popleft(), self.net.now)
            self.drain()

    def blocked(self) -> bool:
        return bool(self._pending)


class Net:
    """Nodes on a lossless FIFO network with a virtual clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.nodes: dict[Address, Node] = {}
        self.codec = WireCodec(CLUSTER)
        self._queue: deque[tuple[Address, Address | None, bytes | list[Message]]] = deque()
        self.packets = 0
        #: every bundle sent, decoded: the corpus the fuzzer replays and mutates
        self.sent: list[tuple[Address, list[Message]]] = []
        self.record = False

    def add(self, address: Address, layers: list[Protocol]) -> Node:
        node = self.nodes[address] = Node(self, address, layers)
        return node

    def transmit(self, node: Node, batch: list[Message]) -> None:
        by_dest, local = route(batch, node.address)
        for dest, msgs in by_dest.items():
            for msg in msgs:  # one bundle per message: nothing is too large for the codec
                data = self.codec.encode(dest, node.address, [msg])
                self._queue.append((node.address, dest, data))
        if local:  # looped back after what is already in flight, never re-entrantly
            self._queue.append((node.address, node.address, [m.copy() for m in local]))

    def in_flight(self) -> int:
        """Datagrams sent and not yet delivered."""
        return len(self._queue)

    def deliver_all(self) -> None:
        """Deliver every datagram in flight, and what that provokes, until quiet."""
        while self._queue:
            self.packets += 1
            if self.packets > MAX_PACKETS:
                raise Livelock(f"more than {MAX_PACKETS} datagrams: the network never went quiet")
            src, dest, data = self._queue.popleft()
            if type(data) is list:
                self.nodes[src].up_at(0, data)
                continue
            assert isinstance(data, bytes)
            if self.record:
                self.sent.append((src, self.codec.decode(data).messages))
            targets: Iterable[Node]
            if dest is None:
                targets = [n for a, n in self.nodes.items() if a != src]
            else:
                targets = [self.nodes[dest]] if dest in self.nodes else []
            for target in targets:
                target.up_at(0, self.codec.decode(data).messages)

    def run(self, duration: float) -> None:
        """Advance the clock by ``duration``, ticking every due layer, delivering as it goes."""
        end = self.now + duration
        steps = 0
        while True:
            self.deliver_all()
            due = min((n.next_deadline() for n in self.nodes.values()), default=math.inf)
            if due > end:
                break
            steps += 1
            if steps > MAX_PACKETS:
                raise Livelock(f"more than {MAX_PACKETS} timer steps in {duration} s")
            self.now = max(self.now, due)
            for node in list(self.nodes.values()):
                node.tick()
        self.now = end

    def install(self, view: View, *, inject: bool) -> None:
        """Install ``view`` at every node in it: through GMS (`InjectView`) or past it."""
        for address in view.members:
            node = self.nodes.get(address)
            if node is not None:
                node.event_down(InjectView(view) if inject else ViewChange(view))
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
