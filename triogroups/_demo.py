"""The demo behind ``triogroups demo``: a cluster on the simulated network.

Every member multicasts in small batches while DISCARD drops a share of what
arrives; the table shows what each member delivered from each sender. It
grows with the project: as reliability and membership land, the same demo
runs them (and real member processes).
"""

from __future__ import annotations

import argparse

import trio
from rich.console import Console
from rich.table import Table

from triogroups.config import StackConfig
from triogroups.runtime import tune_gc
from triogroups.testing import SimMember, open_cluster


async def run_demo(console: Console, args: argparse.Namespace) -> int:
    """Run the demo; returns the exit status."""
    if args.members < 1 or args.messages < 0 or not 0 <= args.loss < 1:
        console.print("[red]error:[/red] need members >= 1, messages >= 0, 0 <= loss < 1")
        return 2
    tune_gc()
    config = StackConfig.preset("sim").configure("DISCARD", up_loss=args.loss, seed=args.seed)
    console.print(
        f"[bold]triogroups demo[/bold]: {args.members} members on the simulated network, "
        f"stack {' -> '.join(config.names())}, loss {args.loss:.0%}, seed {args.seed}"
    )
    async with open_cluster(args.members, config, seed=args.seed, max_delay=0.01) as cluster:
        async with trio.open_nursery() as nursery:
            for member in cluster.members:
                nursery.start_soon(_multicast, member, args.messages)
        await trio.sleep(0.5)
        table = Table(title="messages delivered (receiver <- sender)")
        table.add_column("receiver")
        for sender in cluster.members:
            table.add_column(f"from {sender.name}", justify="right")
        for receiver in cluster.members:
            row = [receiver.name]
            for sender in cluster.members:
                got = sum(1 for m in receiver.delivered if m.src == sender.address)
                row.append(f"{got}/{args.messages}")
            table.add_row(*row)
        console.print(table)
        net = cluster.network.stats()
        dropped = sum(m.protocol("DISCARD").stats()["dropped_up"] for m in cluster.members)
        console.print(
            f"network: {net['sent']} datagrams carried {args.members * args.messages} "
            f"multicasts; DISCARD dropped {dropped} on arrival (no reliability layer yet)"
        )
    return 0


async def _multicast(member: SimMember, count: int) -> None:
    for start in range(0, count, 10):
        payloads = [f"{member.name}:{i}".encode() for i in range(start, min(start + 10, count))]
        await member.send_many(payloads)
        await trio.sleep(0.001)
