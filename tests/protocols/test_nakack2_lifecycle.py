"""NAKACK2's member lifecycle: the (phase, input) -> phase table, every pair, on the real object.

A member is JOINING (multicasts are queued), a SERVER (they are delivered,
gaps are asked for) or has LEFT (no windows, no retransmit task). The table
in `_state` is the one place that says how a member moves between them;
these tests pin every pair, both in the table and in what a `Nakack2` does.
"""

from __future__ import annotations

import itertools
import math

import pytest

from triogroups import Address, Message, View
from triogroups.events import Disconnect, Event
from triogroups.extend import BecomeServer, ViewChange
from triogroups.protocols import ids
from triogroups.protocols.nakack2 import Nakack2
from triogroups.protocols.nakack2._header import MSG, NakAckHeader2
from triogroups.protocols.nakack2._state import LIFECYCLE, Input, Phase

ID = ids.NAKACK2
A, B = Address(1, "A"), Address(2, "B")

#: The lifecycle written out by hand: only a joiner becomes a server, and leaving is final.
EXPECTED = {
    (Phase.JOINING, Input.BECOME_SERVER): Phase.SERVER,
    (Phase.JOINING, Input.FIRST_VIEW): Phase.SERVER,
    (Phase.JOINING, Input.DISCONNECT): Phase.LEFT,
    (Phase.SERVER, Input.BECOME_SERVER): Phase.SERVER,
    (Phase.SERVER, Input.FIRST_VIEW): Phase.SERVER,
    (Phase.SERVER, Input.DISCONNECT): Phase.LEFT,
    (Phase.LEFT, Input.BECOME_SERVER): Phase.LEFT,
    (Phase.LEFT, Input.FIRST_VIEW): Phase.LEFT,
    (Phase.LEFT, Input.DISCONNECT): Phase.LEFT,
}
PAIRS = list(itertools.product(Phase, Input))


def test_nakack2_lifecycle_table_has_every_phase_with_every_input() -> None:
    assert set(LIFECYCLE) == set(PAIRS)
    assert LIFECYCLE == EXPECTED


def _msg_from(src: Address, seqno: int) -> Message:
    return Message(None, f"{seqno}".encode(), src=src, headers={ID: NakAckHeader2(MSG, seqno)})


def _in_phase(phase: Phase) -> Nakack2:
    """A started NAKACK2 of A in ``phase``; B is in its view from view 1 on (or its last one)."""
    nak = Nakack2()
    nak.start(A, "c", 0.0)
    if phase is Phase.JOINING:
        nak.down_event(ViewChange(View.create(B, 2, [B, A])), 0.0)  # a joiner: a later view
    else:
        nak.down_event(ViewChange(View.create(A, 1, [A, B])), 0.0)  # the group's first view
    if phase is Phase.LEFT:
        nak.down_event(Disconnect(), 0.0)
    nak.take_down()
    nak.take_up()
    assert nak.stats()["phase"] == phase.value
    return nak


def _apply(nak: Nakack2, event: Input) -> None:
    stimulus: Event = {
        Input.BECOME_SERVER: BecomeServer(),
        Input.FIRST_VIEW: ViewChange(View.create(A, 1, [A, B])),
        Input.DISCONNECT: Disconnect(),
    }[event]
    nak.down_event(stimulus, 0.1)
    nak.take_down()
    nak.take_up()


@pytest.mark.parametrize(("phase", "event"), PAIRS, ids=lambda v: v.value)
def test_nakack2_lifecycle_pair_does_what_the_table_says(phase: Phase, event: Input) -> None:
    """Every phase with every input: the member ends in the table's phase and acts as it.

    JOINING queues B's multicast, SERVER delivers it (and runs the retransmit
    task), LEFT drops it as from a non-member and never runs the task, even
    when ``xmit_interval`` changes.
    """
    nak = _in_phase(phase)
    _apply(nak, event)
    after = EXPECTED[phase, event]
    stats = nak.stats()
    assert stats["phase"] == after.value
    assert stats["is_server"] == (after is Phase.SERVER)
    nak.up([_msg_from(B, 1)], 0.2)
    delivered = [m for item in nak.take_up() if isinstance(item, list) for m in item]
    stats = nak.stats()
    if after is Phase.JOINING:
        assert delivered == [] and stats["become_server_queue"] == 1
    elif after is Phase.SERVER:
        assert [m.payload for m in delivered] == [b"1"]
        assert nak.next_deadline() < math.inf
    else:
        assert delivered == [] and stats["non_member_dropped"] == 1
        assert stats["windows"] == {} and stats["become_server_queue"] == 0
        nak.xmit_interval = 0.2
        nak.property_changed("xmit_interval", 0.3)
        assert nak.next_deadline() == math.inf


def test_nakack2_joiner_queue_is_received_when_it_becomes_a_server() -> None:
    """The queue is replayed in arrival order when BecomeServer moves a joiner to SERVER."""
    nak = _in_phase(Phase.JOINING)
    nak.up([_msg_from(B, 2), _msg_from(B, 1)], 0.0)
    assert nak.stats()["become_server_queue"] == 2
    nak.down_event(BecomeServer(), 0.1)
    delivered = [m.payload for item in nak.take_up() if isinstance(item, list) for m in item]
    assert delivered == [b"1", b"2"] and nak.stats()["become_server_queue_replayed"] == 2
