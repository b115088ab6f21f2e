"""GMS and discovery: a joiner that hears members of a view but no coordinator does not start
a group of its own (JGroups' ClientGmsImpl: answers from servers mean a group exists)."""

from __future__ import annotations

from typing import Any

from triogroups import Address, Message, StackConfig
from triogroups.events import Connect, FindMembers, MembersFound, PingData, ViewChange
from triogroups.protocols import ids
from triogroups.protocols._discovery import RESPONSE
from triogroups.protocols.gms import Gms
from triogroups.testing import open_cluster

STACK = StackConfig.of("SIM", "DISCARD", "PING", "GMS")  # DISCARD below PING: it sees answers

A, B, C = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C")))


def _joiner(me: Address, **props: Any) -> Gms:
    gms = Gms(**props)
    gms.check_stack([], [])
    gms.start(me, "test", 0.0)
    gms._has_discovery = True
    gms.down_event(Connect(), 0.0)
    assert [e for e in gms.take_down() if isinstance(e, FindMembers)]
    return gms


def test_gms_joiner_that_hears_only_non_coordinating_servers_discovers_again() -> None:
    """A sorts first, but B answered from inside a view: the coordinator's answer was lost."""
    gms = _joiner(A)
    gms.up_event(MembersFound((PingData(B, ("h", 2), False, True),)), 1.0)
    down = gms.take_down()
    assert [e for e in down if isinstance(e, FindMembers)], down
    assert not [e for e in down if isinstance(e, ViewChange)]
    assert gms.view is None
    assert gms.stats()["discovery_without_coord"] == 1


def test_gms_joiner_that_sorts_first_among_joiners_only_starts_the_group() -> None:
    gms = _joiner(A)
    gms.up_event(MembersFound((PingData(B, ("h", 2), False, False),)), 1.0)
    assert gms.view is not None and gms.view.members == (A,)


def test_gms_joiner_hearing_servers_but_no_coordinator_starts_alone_after_max_join_attempts() -> (
    None
):
    """The rediscovery is bounded: a group whose coordinator never answers does not keep a
    joiner out for ever."""
    gms = _joiner(A, max_join_attempts=3)
    servers_only = MembersFound((PingData(B, ("h", 2), False, True),))
    for attempt in range(3):
        gms.up_event(servers_only, 1.0 + attempt)
        gms.take_down()
        assert gms.view is None
    gms.up_event(servers_only, 5.0)
    assert gms.view is not None and gms.view.members == (A,)
    assert gms.stats()["join_attempts_exhausted"] == 1


async def test_gms_joiner_that_loses_the_coordinators_discovery_answer_still_joins_the_group(
    autojump_clock: Any,
) -> None:
    """The member that sorts first joins last and loses the coordinator's first answer: it
    hears only a participant, discovers again and joins, instead of starting alone."""
    async with open_cluster(3, STACK, seed=3, view=False) as cluster:
        first, second, third = sorted(cluster.members, key=lambda m: m.address)
        await cluster.join(third)
        await cluster.join(second)
        coord = third.address

        def coord_answer(msg: Message) -> bool:
            hdr = msg.headers.get(ids.PING)
            return msg.src == coord and hdr is not None and hdr.type == RESPONSE

        first.protocol("DISCARD").drop_if(coord_answer, direction="up", count=1)
        await cluster.join(first)
        view = await cluster.wait_for_view()
        assert set(view.members) == {first.address, second.address, third.address}
        assert view.coord == coord
        assert first.protocol("GMS").stats()["discovery_without_coord"] >= 1
