"""A script whose member app lives in ``__main__``: run by test_process_group_real.

Usage: python main_app.py STACK.toml. Prints what the members printed, then ``ok``.
"""

from __future__ import annotations

import sys

import trio

from triogroups import Channel, open_process_group


async def app(ch: Channel, token: str) -> None:
    print(f"{ch.name} got {token}", flush=True)
    await trio.sleep_forever()


async def main(stack: str) -> None:
    lines: list[str] = []
    async with open_process_group(
        app, 2, stack=stack, args=("t0k3n",), output=lambda name, line: lines.append(line)
    ) as group:
        with trio.fail_after(60):
            await group.wait_for_view(2)
            while not {"A got t0k3n", "B got t0k3n"} <= set(lines):
                await trio.sleep(0.05)
    for line in sorted(set(lines) & {"A got t0k3n", "B got t0k3n"}):
        print(line)
    print("ok")


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
