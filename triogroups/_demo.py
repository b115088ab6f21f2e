"""The demo behind ``triogroups demo``: a reliable group on a lossy network.

Members join through GMS on the simulated network, then every member
multicasts while DISCARD drops a share of everything that arrives (data,
acks, retransmissions alike). NAKACK2 heals the loss: the table shows every
member delivered every message from every sender, in order, and the line
below it what it took (messages dropped, retransmission requests). It grows
with the project; the real multi-process demo comes with the process
supervisor.
"""

from __future__ import annotations

import argparse

import trio
from rich.console import Console
from rich.table import Table

from triogroups.config import StackConfig
from triogroups.runtime import tune_gc
from triogroups.testing import ContractViolation, SimMember, open_cluster


def demo_stack(loss: float, seed: int) -> StackConfig:
    """The demo's stack: discovery, loss, reliable multicast and unicast, membership."""
    return StackConfig.of(
        "SIM",
        "PING",
        ("DISCARD", {"up_loss": loss, "seed": seed}),
        ("NAKACK2", {"xmit_interval": 0.1}),
        ("UNICAST3", {"xmit_interval": 0.1}),
        ("STABLE", {"desired_avg_gossip": 1.0}),
        ("GMS", {"join_timeout": 0.5}),
    )


async def run_demo(console: Console, args: argparse.Namespace) -> int:
    """Run the demo; returns the exit status."""
    if args.members < 1 or args.messages < 0 or not 0 <= args.loss < 1:
        console.print("[red]error:[/red] need members >= 1, messages >= 0, 0 <= loss < 1")
        return 2
    tune_gc()
    config = demo_stack(args.loss, args.seed)
    console.print(
        f"[bold]triogroups demo[/bold]: {args.members} members on the simulated network, "
        f"stack {' -> '.join(config.names())}, DISCARD drops {args.loss:.0%} of what arrives"
    )
    async with open_cluster(args.members, config, seed=args.seed, max_delay=0.01) as cluster:
        console.print(f"view: {cluster.members[0].view}")
        async with trio.open_nursery() as nursery:
            for member in cluster.members:
                nursery.start_soon(_multicast, member, args.messages)
        try:
            await cluster.wait_until_delivered(timeout=120)
            verdict = "[green]every message delivered exactly once, per-sender in order[/green]"
        except ContractViolation as exc:
            verdict = f"[red]delivery contract broken: {exc}[/red]"
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
        dropped = sum(m.protocol("DISCARD").stats()["dropped_up"] for m in cluster.members)
        nak = [m.protocol("NAKACK2").stats() for m in cluster.members]
        console.print(
            f"DISCARD dropped {dropped} messages on arrival; NAKACK2 sent "
            f"{sum(s['xmit_reqs_sent'] for s in nak)} retransmission requests for "
            f"{sum(s['xmit_seqnos_requested'] for s in nak)} messages"
        )
        console.print(verdict)
    return 0


async def _multicast(member: SimMember, count: int) -> None:
    for start in range(0, count, 10):
        payloads = [f"{member.name}:{i}".encode() for i in range(start, min(start + 10, count))]
        await member.send_many(payloads)
        await trio.sleep(0.001)
