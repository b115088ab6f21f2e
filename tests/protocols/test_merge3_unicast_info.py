"""MERGE3 over a transport whose multicast reaches only the view (TCP): INFO by unicast.

(The main rule, INFO unicast to every member discovery found, is tested in
test_merge.py; these pin its edges.)

A multicast INFO over TCP is written to the members of the sender's own view
only, so a member that started alone (or a subgroup) was never heard by the
others and the group never merged. Each INFO round now asks discovery who is
there and sends the INFO to every member found, as JGroups' MERGE3 does.
"""

from __future__ import annotations

from triogroups import Address, Message, View, ViewId
from triogroups.events import MembersFound, PingData
from triogroups.protocols import ids
from triogroups.protocols.merge3 import Merge3
from triogroups.transports import TcpTransport, UdpTransport

A, B, C = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C")))
ALONE = View(ViewId(1, A), [A])


def _merge3(transport: object) -> Merge3:
    m = Merge3(min_interval=1.0, max_interval=1.0, check_interval=5.0)
    m.check_stack([transport], [])  # type: ignore[list-item]
    m.start(A, "t", 0.0)
    m.view = ALONE
    return m


def _infos(items: list[object]) -> list[Message]:
    return [
        msg
        for item in items
        if isinstance(item, list)
        for msg in item
        if isinstance(msg, Message) and ids.MERGE3 in msg.headers
    ]


def test_merge3_over_tcp_sends_no_info_for_a_find_it_did_not_start() -> None:
    m = _merge3(TcpTransport())
    found = MembersFound((PingData(B, ("127.0.0.1", 7801), True),))
    m.up_event(found, 0.5)  # GMS's find, say
    assert _infos(m.take_down()) == []
    assert m.take_up() == [found]


def test_merge3_over_udp_multicasts_info_without_asking_discovery() -> None:
    m = _merge3(UdpTransport())
    m.tick(1.0)
    down = m.take_down()
    infos = _infos(down)
    assert len(down) == 1 and [msg.dest for msg in infos] == [None]
