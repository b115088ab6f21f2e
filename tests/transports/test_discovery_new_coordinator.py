"""A member that becomes coordinator answers again, as coordinator, those who asked before.

Members started together all answer "not coordinator" until the lowest
installs the first view. One that asked again a moment before that used to
wait out its whole find (PING: the full ``timeout``, so a UDP group of 4
took two join timeouts to form). Pinned here at the protocol level.
"""

from __future__ import annotations

from tests.transports.test_discovery import A, B, C, Link, member, messages
from triogroups import Address, Message, View
from triogroups.extend import FindMembers, MembersFound, ViewChange
from triogroups.protocols import Ping, ids
from triogroups.protocols._discovery import RESPONSE


def _request_from(asker: Address) -> list[Message]:
    proto = member(Ping, asker)
    proto.down_event(FindMembers(2.0), 0.0)
    msgs = messages(proto.take_down())
    for msg in msgs:
        msg.src = asker
    return msgs


def test_new_coordinator_answers_earlier_askers_again_so_their_find_ends_at_once() -> None:
    a, b = member(Ping, A), member(Ping, B)
    link = Link(a, b)
    b.down_event(FindMembers(2.0), 0.0)  # B asks while A has no view yet
    link.flush(0.01)
    assert link.found(B) == []
    a.down_event(ViewChange(View.create(A, 1, [A])), 0.02)  # A becomes coordinator
    link.flush(0.02)
    (found,) = link.found(B)  # B's find ended at 0.02, not at its 2 s timeout
    assert {d.address: d.is_coord for d in found.responses} == {A: True}


def test_a_member_that_joins_as_participant_does_not_answer_again() -> None:
    a = member(Ping, A)
    a.up(_request_from(B), 0.0)
    a.take_down()
    a.down_event(ViewChange(View.create(C, 1, [C, A])), 0.1)
    assert [m for m in messages(a.take_down()) if ids.PING in m.headers] == []


def test_askers_already_in_the_new_view_are_not_answered_again() -> None:
    a = member(Ping, A)
    for asker in (B, C):
        a.up(_request_from(asker), 0.0)
    a.take_down()
    a.down_event(ViewChange(View.create(A, 1, [A, B])), 0.1)
    again = [m for m in messages(a.take_down()) if ids.PING in m.headers]
    assert [(m.dest, m.headers[ids.PING].type, m.headers[ids.PING].is_coord) for m in again] == [
        (C, RESPONSE, True)
    ]
    assert not [e for e in a.take_up() if isinstance(e, MembersFound)]
