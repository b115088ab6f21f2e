"""One member process of `test_blocks_real`: takes a lock around appends to a shared file.

    python _lock_member.py CLUSTER NAME MCAST_PORT MEMBERS ROUNDS FILE

Joins CLUSTER with the shipped udp preset on loopback, runs the lock and counter
services, and once MEMBERS are in the view does ROUNDS times: hold lock "file" while
appending an enter and an exit line (with its token) to FILE, then add 1 to counter
"n". Prints the add_and_get results as one JSON line, and leaves once every member
has said it is done (a file beside FILE), so no member leaves while others still ask.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from triogroups import StackConfig, open_channel, open_counter_service, open_lock_service


async def main(cluster: str, name: str, port: int, members: int, rounds: int, path: str) -> None:
    # failure detection lenient enough that a loaded machine splits nobody off: a split
    # would void what the test checks (locks grant on both sides, counters merge)
    config = (
        StackConfig.preset("udp")
        .configure("UDP", mcast_port=port)
        .configure("FD_ALL3", interval=2.0, timeout=30.0)
    )
    async with (
        open_channel(cluster, config, name) as ch,
        open_lock_service(ch) as locks,
        open_counter_service(ch) as counters,
    ):
        with trio.fail_after(60):
            while len(ch.view) < members:
                await trio.sleep(0.05)
        results = []
        for _ in range(rounds):
            async with locks.lock("file") as lock:
                with open(path, "a") as f:
                    f.write(f"enter {name} {lock.token}\n")
                await trio.sleep(0.005)
                with open(path, "a") as f:
                    f.write(f"exit {name} {lock.token}\n")
            results.append(await counters.counter("n").add_and_get(1))
        print(json.dumps(results), flush=True)
        Path(f"{path}.{name}.done").touch()
        with trio.fail_after(60):
            while len(list(Path(path).parent.glob("*.done"))) < members:
                await trio.sleep(0.1)


if __name__ == "__main__":
    cluster, name, port, members, rounds, path = sys.argv[1:]
    trio.run(main, cluster, name, int(port), int(members), int(rounds), path)
