"""A merge never skips what a member of our own subgroup can still retransmit (issue 37, 6b).

Whole stack on the simulated network, virtual clock. The shape of the chaos run
(udp, 6 members, 22% loss between A and C): A led a merge of its view, which
held C, with B's view, whose member list also had C. GMS counts C as a member
of the other subgroup (B's view may be where C went), and B's digest said C
delivered further than A's window, which had a gap A was still asking C for.
The merge digest moved A's window past it: ``skipped_by_window_move`` counted
9 seqnos that C, still in A's view, held and would have retransmitted.
"""

from __future__ import annotations

from typing import Any

from triogroups import Message, StackConfig, View, ViewId
from triogroups.testing import SimMember, open_cluster, wait_until

STACK = StackConfig.of(
    "SIM",
    "PING",
    ("MERGE3", {"min_interval": 0.5, "max_interval": 1.0, "check_interval": 2.0}),
    "DISCARD",
    ("NAKACK2", {"xmit_interval": 0.5}),
    "UNICAST3",
    "STABLE",
    ("GMS", {"merge_timeout": 3.0}),
)


def _from(member: SimMember, sender: SimMember) -> list[bytes]:
    return [m.payload for m in member.delivered if m.src == sender.address]


async def test_merge_digest_rule_overlapping_subgroup_member_keeps_its_window(
    autojump_clock: Any,
) -> None:
    """A holds (A, C), C holds it too; B holds (B, C): C is in A's subgroup and listed in
    B's. C multicasts c1-c6; A loses c3 and c4 (and their retransmissions) until the merge,
    B gets them all. A leads the merge (the lowest coordinator); B's digest says C is at
    c6. A's window for C must not move past c3-c4: once the loss ends, retransmission
    fills the gap, A delivers c1-c6 in order and skips nothing. Before the fix the merge
    digest moved the window: c3 and c4 were skipped and never delivered."""
    async with open_cluster(3, STACK, seed=6) as cluster:
        a, b, c = sorted(cluster.members, key=lambda m: m.address)
        orig = await cluster.wait_for_view()
        n = orig.view_id.id
        ac = await cluster.inject_view(View(ViewId(n + 1, a.address), [a.address, c.address]))
        bc = View(ViewId(n + 2, b.address), [b.address, c.address])
        await cluster.inject_view(bc, [b])
        await wait_until(
            lambda: (a.view, b.view, c.view) == (ac, bc, ac), timeout=1, interval=0.001
        )

        lost = {b"c3", b"c4"}

        def gap(msg: Message) -> bool:
            return msg.src == c.address and msg.payload in lost

        a.protocol("DISCARD").drop_if(gap, direction="up", count=None)
        for i in range(1, 7):
            await c.send(b"c%d" % i)
        await wait_until(
            lambda: _from(b, c) == [b"c%d" % i for i in range(1, 7)] and len(_from(a, c)) >= 2,
            timeout=5,
            interval=0.01,
        )
        assert _from(a, c) == [b"c1", b"c2"]  # c5, c6 held behind the gap

        # a few MERGE3 rounds
        await wait_until(
            lambda: a.view is not None and set(a.view.members) == {a.address, b.address, c.address},
            timeout=30,
            interval=0.01,
        )
        a.protocol("DISCARD").reset()
        await wait_until(lambda: len(_from(a, c)) >= 6, timeout=10)
        assert _from(a, c) == [b"c%d" % i for i in range(1, 7)]
        assert a.protocol("NAKACK2").stats()["skipped_by_window_move"] == 0
