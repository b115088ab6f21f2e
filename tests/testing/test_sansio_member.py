"""The sans-IO harness's member: hosts a stack as the stack host does, captures what it emits.

Small test layers (no header, so nothing to register) make each hosting rule
visible: forwarding in order, blocking at the top, ticks only when due.
"""

from __future__ import annotations

import math

import pytest

from triogroups import Address, Message
from triogroups.events import Event, Suspect, ViewChange
from triogroups.protocol import Protocol
from triogroups.protocols.passthrough import PassThrough
from triogroups.testing import (
    SansIONetwork,
    addresses,
    down_messages,
    split,
    started,
    up_messages,
    up_payloads,
    view_of,
)

A, B, C = addresses("ABC")


class Gate(Protocol):
    """Blocks the senders above while ``closed``; what still arrives is held in order."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.held: list[Message] = []

    def down(self, batch: list[Message], now: float) -> None:
        if self.closed:
            self.held.extend(batch)
        else:
            self.send_down(batch)

    def open(self) -> None:
        self.closed = False
        if self.held:
            self.send_down(self.held)
            self.held = []

    def blocks_down(self) -> bool:
        return self.closed


class Timer(Protocol):
    """Ticks every ``interval``, sending one message to the group each time; or, with
    ``stuck``, leaves its deadline where it was."""

    def __init__(self, interval: float = 1.0, *, stuck: bool = False) -> None:
        super().__init__()
        self.interval, self.stuck = interval, stuck
        self.deadline = math.inf
        self.ticks: list[float] = []

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self.deadline = now + self.interval

    def tick(self, now: float) -> None:
        self.ticks.append(now)
        if not self.stuck:
            self.deadline = now + self.interval
            self.send_down([Message(None, f"tick@{now}".encode())])

    def next_deadline(self) -> float:
        return self.deadline


class Answer(Protocol):
    """Answers every message that comes up with a unicast back, and an event up."""

    def up(self, batch: list[Message], now: float) -> None:
        for msg in batch:
            if not msg.payload.startswith(b"re:"):
                assert msg.src is not None
                self.send_down([Message(msg.src, b"re:" + msg.payload)])
        self.send_up(batch)
        self.pass_up(Suspect(tuple(m.src for m in batch if m.src is not None)))


def test_sansio_member_forwards_through_every_layer_in_order_and_captures_the_top() -> None:
    """Down through every layer to the link, up through every layer to `delivered`."""
    net = SansIONetwork()
    a = net.add(A, [PassThrough(), PassThrough()])
    b = net.add(B, [PassThrough(), PassThrough()])
    sent = a.send(b, b"1", b"2", now=0.5)
    assert [(m.src, m.dest, m.payload) for m in sent] == [(A, B, b"1"), (A, B, b"2")]
    assert b.payloads == [] and net.in_flight() == 2
    net.deliver_all()
    assert b.payloads == [b"1", b"2"] and [m.src for m in b.delivered] == [A, A]
    assert [layer.counters["msgs_up"] for layer in b.layers] == [2, 2]
    assert net.now == 0.5


def test_sansio_member_returns_what_each_input_sent_as_a_receiver_decodes_it() -> None:
    """The returned messages crossed the codec: copies, source stamped, destination kept."""
    net = SansIONetwork()
    a, b = net.add(A, Answer()), net.add(B, Answer())
    out = a.send(b, b"q")
    (got,) = out
    assert (got.src, got.dest, got.payload) == (A, B, b"q")
    reply = b.receive(out, now=1.0)
    assert [(m.src, m.dest, m.payload) for m in reply] == [(B, A, b"re:q")]
    assert b.events == [Suspect((A,))] and net.now == 1.0


def test_sansio_member_holds_application_sends_while_a_layer_blocks() -> None:
    """As the host: new sends wait at the top, in order, until the layer stops blocking."""
    net = SansIONetwork()
    gate = Gate()
    a = net.add(A, [PassThrough(), gate])
    gate.closed = True
    assert a.send(None, b"1") == []
    assert gate.held == [] and a.blocked()  # waits above the stack, not inside the gate
    assert a.send(None, b"2") == [] and a.blocked()
    gate.open()
    sent = a.send(None, b"3")
    assert [m.payload for m in sent] == [b"1", b"2", b"3"] and not a.blocked()


def test_sansio_member_captures_events_going_up_and_below() -> None:
    net = SansIONetwork()
    a = net.add(A, PassThrough())
    view = view_of(A, B)
    a.install(view)
    a.up_event_at(0, Suspect((B,)))
    assert a.events_below == [ViewChange(view)] and a.events == [Suspect((B,))]
    a.up_event_at(0, ViewChange(view))
    assert a.view == view


def test_sansio_member_ticks_due_layers_or_all_if_forced_and_refuses_a_deadline_left_due() -> None:
    net = SansIONetwork()
    slow, fast = Timer(2.0), Timer(0.5)
    a = net.add(A, [slow, fast])
    assert a.next_deadline() == 0.5
    a.tick(now=0.4)
    assert fast.ticks == [] and slow.ticks == []
    a.tick(now=0.5)
    assert fast.ticks == [0.5] and slow.ticks == []
    a.tick(0.6, force=True)  # a test running the timers by hand: every layer, due or not
    assert fast.ticks == [0.5, 0.6] and slow.ticks == [0.6]
    stuck = net.add(B, Timer(1.0, stuck=True))  # started at 0.6: due at 1.6
    with pytest.raises(AssertionError, match=r"left its deadline due at 1\.6"):
        stuck.tick(now=1.6)


def test_sansio_member_refuses_an_empty_stack() -> None:
    with pytest.raises(ValueError, match="layers must not be empty"):
        SansIONetwork().add(A, [])


def test_sansio_started_installs_the_view_and_empties_the_outboxes() -> None:
    proto = started(PassThrough(), A, view=view_of(A, B, C, counter=3), now=2.0)
    assert proto.local_address == A and proto.view == view_of(A, B, C, counter=3)
    assert proto.take_down() == [] and proto.take_up() == []
    assert proto.view is not None and proto.view.view_id.id == 3


def test_sansio_outbox_helpers_keep_messages_and_events_in_order() -> None:
    proto = started(PassThrough(), A)
    m1, m2, m3 = Message(B, b"1"), Message(B, b"2"), Message(C, b"3")
    event: Event = Suspect((C,))
    proto.down([m1, m2], 0.0)
    proto.down_event(event, 0.0)
    proto.down([m3], 0.0)
    assert split(proto.take_down()) == ([m1, m2, m3], [event])
    proto.up([m1], 0.0)
    proto.up_event(event, 0.0)
    assert up_messages(proto) == [m1] and proto.take_up() == []
    proto.down([m2], 0.0)
    assert down_messages(proto) == [m2]
    assert [a.name for a in addresses("XY")] == ["X", "Y"] and addresses("XY")[1].uuid == 2


def test_sansio_down_messages_with_wire_are_decoded_copies_from_the_protocol() -> None:
    """``wire=True``: each message as a receiver decodes it (a copy, src stamped, dest kept)."""
    proto = started(PassThrough(), A)
    sent = [Message(B, b"u"), Message(None, b"m")]
    proto.down(list(sent), 0.0)
    got = down_messages(proto, wire=True)
    assert [(m.src, m.dest, m.payload) for m in got] == [(A, B, b"u"), (A, None, b"m")]
    assert all(g is not s for g, s in zip(got, sent, strict=True))
    proto.up([Message(A, b"x", src=B), Message(A, b"y", src=B)], 0.0)
    assert up_payloads(proto) == [b"x", b"y"] and proto.take_up() == []
    with pytest.raises(RuntimeError, match="needs a started protocol"):
        down_messages(PassThrough(), wire=True)
