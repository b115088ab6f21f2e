"""UNICAST3's connection states (seed 001) as a table: every state with every input.

`ConnectionTable.transition` is the one place a sender or receiver entry
changes state; these tests pin the table by hand, run the function on every
pair, and check that ``stats()["connections"]`` counts the entries that exist.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from tests.protocols.test_unicast3 import pair, send_range
from triogroups import Address
from triogroups.protocols.unicast3._common import (
    TRANSITIONS,
    Action,
    ConnectionTable,
    Input,
    State,
)

OP, CL, GONE = State.OPEN, State.CLOSING, State.CLOSED

#: Seed 001 written out: a send or data reopens CLOSING, a view with the peer reopens it,
#: idleness or a view without the peer closes OPEN, a CLOSING entry expires, DROP removes
#: any entry, and a removed (CLOSED) entry never moves again.
EXPECTED = {
    (OP, Input.USE): (Action.NONE, OP),
    (OP, Input.CLOSE): (Action.TOUCH, CL),
    (OP, Input.MEMBER): (Action.NONE, OP),
    (OP, Input.IDLE): (Action.TOUCH, CL),
    (OP, Input.EXPIRED): (Action.NONE, OP),
    (OP, Input.DROP): (Action.REMOVE, GONE),
    (CL, Input.USE): (Action.REOPEN, OP),
    (CL, Input.CLOSE): (Action.NONE, CL),
    (CL, Input.MEMBER): (Action.TOUCH, OP),
    (CL, Input.IDLE): (Action.NONE, CL),
    (CL, Input.EXPIRED): (Action.REMOVE, GONE),
    (CL, Input.DROP): (Action.REMOVE, GONE),
    **{(GONE, event): (Action.NONE, GONE) for event in Input},
}
PAIRS = list(itertools.product(State, Input))
PEER = Address(2, "B")


@dataclass
class _Entry:
    state: State
    last_used: float


def test_unicast3_transition_table_has_every_state_with_every_input() -> None:
    assert set(TRANSITIONS) == set(PAIRS)
    assert TRANSITIONS == EXPECTED


@pytest.mark.parametrize(("state", "event"), PAIRS, ids=lambda v: v.value)
def test_unicast3_transition_does_what_the_table_says(state: State, event: Input) -> None:
    """The next state is set; TOUCH and REOPEN set last_used; REMOVE deletes the entry."""
    table: ConnectionTable[_Entry] = ConnectionTable()
    entry = table.entries[PEER] = _Entry(state, 1.0)
    action = table.transition(PEER, entry, event, 5.0)
    want_action, want_state = EXPECTED[state, event]
    assert (action, entry.state) == (want_action, want_state)
    assert entry.last_used == (5.0 if action in (Action.TOUCH, Action.REOPEN) else 1.0)
    assert (PEER in table.entries) == (action is not Action.REMOVE)


def test_unicast3_stats_connections_count_the_entries_that_exist() -> None:
    """A removed connection is gone: it is not counted (no CLOSED that is always 0)."""
    a, b = pair(conn_expiry_timeout=10, conn_close_timeout=20)
    b.receive(send_range(a, b, 1, 2, 0.0), 0.0)
    a.receive(b.tick(0.5), 0.5)
    assert a.stats()["connections"] == {"OPEN": 1, "CLOSING": 0}
    a.tick(10.0)
    b.tick(10.5)
    assert a.stats()["connections"] == {"OPEN": 0, "CLOSING": 1}
    assert b.stats()["connections"] == {"OPEN": 0, "CLOSING": 1}
    close = a.tick(30.0)
    assert a.stats()["connections"] == {"OPEN": 0, "CLOSING": 0}
    b.receive(close, 30.0)
    assert b.stats()["connections"] == {"OPEN": 0, "CLOSING": 0}


def test_unicast3_data_on_a_closing_receiver_entry_reopens_it() -> None:
    """Seed 001: a message received on a CLOSING connection moves it back to OPEN."""
    a, b = pair(conn_expiry_timeout=10, conn_close_timeout=20)
    b.receive(send_range(a, b, 1, 1, 0.0), 0.0)
    a.receive(b.tick(0.5), 0.5)
    b.tick(10.5)
    assert b.stats()["recv_conns"]["A"]["state"] == "CLOSING"
    b.receive(send_range(a, b, 2, 2, 11.0), 11.0)
    assert b.stats()["recv_conns"]["A"]["state"] == "OPEN" and list(b.delivered)[-1:] == [b"2"]
