"""A replicated key-value store whose replicas converge, with state transfer for late joiners.

Run it in two or more terminals on this host::

    python examples/replicated_kv.py --name A
    python examples/replicated_kv.py --name B     # joins later: gets A's data first

Commands (one per line): ``put KEY VALUE``, ``del KEY``, ``get KEY``, ``dump``.
End with Ctrl-D.

Each node holds a replica of one `ReplicatedDict` (`open_replicated_dict`). A write
goes to every node and is applied when it is delivered; the ``udp-total`` stack
(SEQUENCER) delivers the group's writes in one order at every node, so two nodes
writing one key at once leave every replica with the same value. Reads are local. A
node that joins late (or restarts) gets the data by state transfer before it applies
any write.
"""

from __future__ import annotations

import argparse
import sys

import trio

from triogroups import ReplicatedDict, StackConfig, open_replicated_dict


async def execute(store: ReplicatedDict, line: str) -> str | None:
    """Run one command line; the text to print, if any."""
    words = line.strip().split(maxsplit=2)
    if not words:
        return None
    match words:
        case ["put", key, value]:
            await store.put(key, value)  # returns once applied here
            return None
        case ["del", key]:
            await store.delete(key)
            return None
        case ["get", key]:
            return repr(store.get(key))  # local: no message
        case ["dump"]:
            return "\n".join(f"{k} = {v!r}" for k, v in sorted(store.items()))
    return "commands: put KEY VALUE | del KEY | get KEY | dump"


async def run(cluster: str, stack: StackConfig, name: str) -> None:
    async with open_replicated_dict(cluster, stack, name) as store:
        print(f"* node {name}: {len(store)} keys after joining", flush=True)
        while line := await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True):
            output = await execute(store, line)
            if output:
                print(output, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="this node's name")
    parser.add_argument(
        "--stack", default="udp-total", help="preset name or TOML file with SEQUENCER (udp-total)"
    )
    parser.add_argument("--cluster", default="kv", help="group name (default: kv)")
    args = parser.parse_args(argv)
    try:
        stack = StackConfig.resolve(args.stack)
    except (OSError, ValueError) as exc:
        parser.error(f"--stack: {exc}")
    if "SEQUENCER" not in stack.names():
        parser.error(
            f"--stack: {args.stack} has no SEQUENCER, so replicas could differ; "
            "use udp-total or a stack with SEQUENCER"
        )
    trio.run(run, args.cluster, stack, args.name)


if __name__ == "__main__":
    main()
