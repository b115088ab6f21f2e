"""The chaos member on a total-order stack also runs the lock and counter services: its
history holds grants, releases and counter results, and the lock and counter rules judge
them (here three members on the simulated network, on virtual time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from triogroups import open_channel, open_sim_network
from triogroups.chaos._member import chaos_member
from triogroups.testing import check_histories, read_histories


async def test_chaos_member_on_a_total_order_stack_takes_locks_and_counts(
    autojump_clock: Any, tmp_path: Path
) -> None:
    async def member(name: str, net: Any) -> None:
        async with open_channel(
            "chaos-blocks", "udp-total", name, network=net, handle_signals=False
        ) as ch:
            await chaos_member(ch, str(tmp_path), 2.0, 7)

    async with open_sim_network(seed=3) as net, trio.open_nursery() as nursery:
        for name in "ABC":
            nursery.start_soon(member, name, net)
            await trio.sleep(0.5)
        await trio.sleep(40)
        nursery.cancel_scope.cancel()
    histories = read_histories(tmp_path)
    kinds = [line.record["k"] for h in histories for line in h.lines]
    assert kinds.count("lock") >= 5 and kinds.count("unlock") >= 5
    assert kinds.count("count") >= 5
    assert kinds.count("add") >= kinds.count("count")  # each call recorded as it is made
    values = [line.record["value"] for h in histories for line in h.of("count")]
    assert len(values) == len(set(values))  # one view throughout: every value once
    found = check_histories(histories, settle=10.0)
    assert found == [], "\n".join(str(v) for v in found[:3])
