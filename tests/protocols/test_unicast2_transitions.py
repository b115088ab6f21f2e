"""UNICAST2's receive connections as a table: what a receiver holds for a sender, every input.

A receiver holds nothing, a window (OPEN) or a closed window's tombstone
(CLOSED) for each sender. `RECV_TRANSITIONS` is the one place that says what
a message or a close does to it; these tests pin the table by hand and run
every reachable pair on a real `Unicast2`.
"""

from __future__ import annotations

import itertools

import pytest

from triogroups import Address, Message, View
from triogroups.extend import ViewChange
from triogroups.protocols import ids
from triogroups.protocols.unicast2 import DATA, Unicast2, Unicast2Header
from triogroups.protocols.unicast2._state import RECV_TRANSITIONS, Peer, RecvAction, RecvInput

A, B = Address(0xA, "A"), Address(0xB, "B")
ID = ids.UNICAST2
N, OP, CL = Peer.NONE, Peer.OPEN, Peer.CLOSED
IN = RecvInput

#: The table written out: an older connection's message is dropped, a non-first one of an
#: unknown connection asks for the first, a first one opens (resets a window, reopens from
#: a tombstone), a close keeps a tombstone, and a tombstone expires.
EXPECTED = {
    (N, IN.OLDER): (RecvAction.DROP_STALE, N),
    (N, IN.NOT_FIRST): (RecvAction.ASK_FIRST, N),
    (N, IN.FIRST): (RecvAction.OPEN, OP),
    (N, IN.CLOSE): (RecvAction.NONE, N),
    (N, IN.EXPIRED): (RecvAction.NONE, N),
    (OP, IN.OLDER): (RecvAction.DROP_STALE, OP),
    (OP, IN.NOT_FIRST): (RecvAction.ASK_FIRST, OP),
    (OP, IN.FIRST): (RecvAction.RESET, OP),
    (OP, IN.CLOSE): (RecvAction.BURY, CL),
    (OP, IN.EXPIRED): (RecvAction.NONE, OP),
    (CL, IN.OLDER): (RecvAction.DROP_STALE, CL),
    (CL, IN.NOT_FIRST): (RecvAction.ASK_FIRST, CL),
    (CL, IN.FIRST): (RecvAction.REOPEN, OP),
    (CL, IN.CLOSE): (RecvAction.NONE, CL),
    (CL, IN.EXPIRED): (RecvAction.FORGET, N),
}
#: With nothing held no connection is older: OLDER cannot happen there.
REACHABLE = [pair for pair in itertools.product(Peer, RecvInput) if pair != (N, IN.OLDER)]
#: The counter each action moves (FORGET shows in "tombstones").
COUNTER = {
    RecvAction.DROP_STALE: "stale_dropped",
    RecvAction.ASK_FIRST: "dropped_no_connection",
    RecvAction.OPEN: "connections_opened",
    RecvAction.RESET: "connections_reset",
    RecvAction.REOPEN: "connections_opened",
    RecvAction.BURY: "connections_closed",
}


def test_unicast2_recv_table_has_every_state_with_every_input() -> None:
    assert set(RECV_TRANSITIONS) == set(itertools.product(Peer, RecvInput))
    assert RECV_TRANSITIONS == EXPECTED


def _data(seqno: int, conn_id: int, first: bool) -> list[Message]:
    hdr = Unicast2Header(DATA, seqno, conn_id, first)
    return [Message(A, str(seqno).encode(), src=B, headers={ID: hdr})]


def _holding(state: Peer) -> Unicast2:
    """A's UNICAST2 holding ``state`` for sender B (connection 10); B is a member."""
    p = Unicast2(conn_expiry_timeout=0)
    p.start(A, "unit", 0.0)
    p.down_event(ViewChange(View.create(A, 1, [A, B])), 0.0)
    if state is not N:
        p.up(_data(1, 10, True), 0.0)
    if state is CL:
        p.close_connection(B, 0.0)
    p.take_up()
    p.take_down()
    assert p.peer_state(B) is state
    return p


def _apply(p: Unicast2, event: RecvInput) -> None:
    if event is IN.OLDER:
        p.up(_data(1, 5, True), 1.0)
    elif event is IN.NOT_FIRST:
        p.up(_data(3, 20, False), 1.0)
    elif event is IN.FIRST:
        p.up(_data(1, 20, True), 1.0)
    elif event is IN.CLOSE:
        p.close_connection(B, 1.0)
    else:
        p.tick(1000.0)  # past a tombstone's max_retransmit_time


@pytest.mark.parametrize(("state", "event"), REACHABLE, ids=lambda v: v.value)
def test_unicast2_recv_pair_does_what_the_table_says(state: Peer, event: RecvInput) -> None:
    """Every reachable pair on a real UNICAST2: what it holds after, and the counter moved."""
    p = _holding(state)
    before = p.stats()
    _apply(p, event)
    after = p.stats()
    action, held = EXPECTED[state, event]
    assert p.peer_state(B) is held
    moved = {k for k in COUNTER.values() if after[k] != before[k]}
    assert moved == ({COUNTER[action]} if action in COUNTER else set())
    assert after["tombstones"] - before["tombstones"] == {
        RecvAction.BURY: 1,
        RecvAction.REOPEN: -1,
        RecvAction.FORGET: -1,
    }.get(action, 0)
