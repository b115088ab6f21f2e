"""SEQUENCER's forwards: the forward table, and a FORWARD's form on the wire (sans-IO).

`forget_forwarded` drops a forwarder's own multicasts once the coordinator's order brings
them back, by walking down from the seqno delivered (issue 42: asking a dict for its lowest
key cost more the more had been dropped from its front). These check what it drops and
returns, alone and through a forwarder's `Sequencer`, over a long run; and that a FORWARD
crosses the real codec as its bare seqno (issue 42: its tuple cost the coordinator a
converter call per forwarded message).
"""

from __future__ import annotations

from triogroups import Message
from triogroups.events import ViewChange
from triogroups.message import Flag
from triogroups.protocols import ids
from triogroups.protocols.sequencer import BCAST, FLUSH, FORWARD, Sequencer, SequencerHeader
from triogroups.protocols.sequencer._header import as_header
from triogroups.protocols.sequencer._tables import forget_forwarded
from triogroups.testing import addresses, down_messages, split, started, view_of

A, B, C = addresses("ABC")


def _table(first: int, last: int) -> dict[int, Message]:
    return {s: Message(None, str(s).encode()) for s in range(first, last + 1)}


def test_forget_forwarded_drops_the_seqno_and_every_one_below_and_returns_it() -> None:
    """A seqno delivered takes itself and the run below it (those came back before it, or
    were delivered elsewhere); the ones above stay, in order."""
    table = _table(4, 10)
    found = forget_forwarded(table, 6)
    assert found is not None and found.payload == b"6"
    assert list(table) == [7, 8, 9, 10]
    assert forget_forwarded(table, 7) is not None
    assert list(table) == [8, 9, 10]


def test_forget_forwarded_of_a_seqno_not_in_the_table_still_drops_those_below() -> None:
    """A seqno no longer (or never) in the table returns nothing, and still drops every
    seqno below it; one below the table drops nothing."""
    table = _table(5, 9)
    assert forget_forwarded(table, 3) is None
    assert list(table) == [5, 6, 7, 8, 9]
    table = _table(5, 9)
    assert forget_forwarded(table, 12) is None
    assert table == {}
    assert forget_forwarded({}, 1) is None


def test_forget_forwarded_over_a_long_stream_matches_dropping_from_the_lowest() -> None:
    """Seqnos added one above the highest and delivered back in order, sometimes skipping
    ahead (one delivered elsewhere first), while thousands stay in flight: the table is at
    every step exactly the seqnos above the last delivered."""
    table: dict[int, Message] = {}
    added = delivered = 0
    for step in range(8_000):
        for _ in range(2 if step % 3 else 1):
            added += 1
            table[added] = Message(None, b"")
        if added - delivered > 3_000 or step % 2:
            delivered = min(added, delivered + (3 if step % 7 == 0 else 1))
            assert forget_forwarded(table, delivered) is not None or step % 7 == 0
            if step % 500 == 0:
                assert list(table) == list(range(delivered + 1, added + 1))
    assert list(table) == list(range(delivered + 1, added + 1))


def test_forwarder_forward_table_empties_as_its_multicasts_come_back_in_order() -> None:
    """A forwarder with thousands of multicasts in flight: each BCAST of its own that
    comes back takes its entry, DONT_LOOPBACK ones are not delivered to it, and a
    duplicate (already delivered) takes nothing more."""
    seq = started(Sequencer(), B, view=view_of(A, B, C))
    for i in range(1, 5001):
        flags = Flag.DONT_LOOPBACK if i % 10 == 0 else Flag(0)
        seq.down([Message(None, str(i).encode(), flags=flags)], 0.0)
    seq.take_down()
    assert seq.stats()["forward_table"] == 5000
    delivered: list[bytes] = []
    nak = 0
    for first in range(1, 4001, 100):
        batch = []
        for seqno in range(first, first + 100):
            nak += 1
            hdr = SequencerHeader(BCAST, seqno, B)
            batch.append(Message(None, b"%d" % seqno, src=A, headers={ids.SEQUENCER: hdr}))
        seq.up(batch, 0.0)
        delivered += [m.payload for m in split(seq.take_up())[0]]
        assert seq.stats()["forward_table"] == 5000 - (first + 99)
    assert delivered == [b"%d" % s for s in range(1, 4001) if s % 10]
    dup = Message(None, b"1", src=A, headers={ids.SEQUENCER: SequencerHeader(BCAST, 1, B)})
    seq.up([dup], 0.0)
    assert seq.stats()["forward_table"] == 1000
    assert seq.stats()["duplicates"] == 1


def test_a_forward_crosses_the_wire_as_its_bare_seqno_and_the_coordinator_orders_it() -> None:
    """A FORWARD's header is its seqno, an int, on the wire and in ``Message.headers`` (no
    tuple to encode, decode or check per forwarded message); FLUSH keeps the NamedTuple.
    The coordinator orders the int form, and the NamedTuple form of a FORWARD as well."""
    b = started(Sequencer(), B, view=view_of(A, B, C))
    b.down([Message(None, b"b1"), Message(None, b"b2")], 0.0)
    forwards = down_messages(b, wire=True)
    assert [(m.dest, m.headers[ids.SEQUENCER]) for m in forwards] == [(A, 1), (A, 2)]
    assert as_header(forwards[1].headers[ids.SEQUENCER]) == SequencerHeader(FORWARD, 2)
    old_form = Message(A, b"c1", src=C, headers={ids.SEQUENCER: SequencerHeader(FORWARD, 1)})
    a = started(Sequencer(), A, view=view_of(A, B, C))
    a.up([*forwards, old_form], 0.0)
    out = down_messages(a, wire=True)
    assert [(as_header(m.headers[ids.SEQUENCER]), m.payload) for m in out] == [
        (SequencerHeader(BCAST, 1, B, 0, 1), b"b1"),
        (SequencerHeader(BCAST, 2, B, 0, 1), b"b2"),
        (SequencerHeader(BCAST, 1, C, 0, 1), b"c1"),
    ]
    # a new coordinator gets what is still unacknowledged as FLUSH, the NamedTuple
    b.down_event(ViewChange(view_of(C, B, counter=2)), 0.0)
    flushes = [m for m in down_messages(b, wire=True) if m.dest == C]
    assert [m.headers[ids.SEQUENCER] for m in flushes][-2:] == [
        SequencerHeader(FLUSH, 1),
        SequencerHeader(FLUSH, 2),
    ]
