"""What one multicast costs a member in Python work: the send path and its own delivery.

    python benchmarks/bench_loopback.py [--messages 30000] [--preset udp] [--repeat 6]
        [--instructions]

For diagnosis, not a headline figure (`bench_channel.py` runs real member
processes): one member alone with ``open_channel`` and a shipped preset on
loopback, one task sending ``--messages`` 1 KB multicasts with ``await
ch.send(...)`` as `bench_channel` does, another counting them with ``async for
msg in ch``. Every message goes down the whole stack, out of the socket, and
up again from the layer that loops it back (NAKACK2), so the CPU time per
message is the sender's share of a multicast with nothing else in it: no
other process, no wake-ups, no flow control waiting for receivers. The best
of ``--repeat`` rounds is shown.

``--instructions`` counts machine instructions with valgrind's callgrind
instead (valgrind must be installed): the script runs twice under valgrind,
with ``--messages`` and with twice as many, and the difference over
``--messages`` leaves out start-up and joining. Steadier than a timing on
these shared machines for comparing two versions of the send path. It counts
the compiled core (where the install has it) and the pure Python
(``TRIOGROUPS_PURE_PYTHON=1``) in the same run, and their ratio.
"""

from __future__ import annotations

import argparse
import time
import uuid

import trio
from _callgrind import instructions_by_form, print_header, print_row, require_valgrind
from bench_channel import preset_config

from triogroups import Channel, open_channel
from triogroups._ports import free_ports
from triogroups.runtime import tune_gc

PAYLOAD_SIZE = 1000
WARMUP_MESSAGES = 2000  # the same in every run: `--instructions` takes two runs' difference


async def _round(ch: Channel, messages: int) -> float:
    """CPU seconds to send ``messages`` multicasts and deliver them all back."""

    async def count() -> None:
        n = 0
        async for _ in ch:
            n += 1
            if n == messages:
                return

    payload = bytes(PAYLOAD_SIZE)
    began = time.process_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(count)
        for _ in range(messages):
            await ch.send(payload)
    return time.process_time() - began


async def measure(messages: int, preset: str, repeat: int) -> None:
    config = preset_config(preset, 1, free_ports(11))
    cluster = f"lb-{uuid.uuid4().hex[:12]}"
    async with open_channel(cluster, config, "a", handle_signals=False) as ch:
        await _round(ch, WARMUP_MESSAGES)
        best = min([await _round(ch, messages) for _ in range(repeat)])
    print(
        f"{preset}: {messages} multicasts of {PAYLOAD_SIZE} B sent and delivered back, "
        f"{best / messages * 1e6:.2f} us CPU each (best of {repeat})"
    )


def count_instructions(messages: int, preset: str) -> None:
    """Print the instructions per multicast of each form of the compiled core, one run
    after the other (see `instructions_by_form`)."""
    require_valgrind()
    per = instructions_by_form(
        __file__, lambda n: ["--messages", str(n), "--preset", preset, "--repeat", "1"], messages
    )
    print_header(f"instructions per multicast ({messages} multicasts)", "preset", 10)
    print_row(preset, per, ",.0f", 10)


def main() -> None:
    parser = argparse.ArgumentParser(description="Python work per multicast sent, one member")
    parser.add_argument("--messages", type=int, default=30_000, help="multicasts per round")
    parser.add_argument("--preset", default="udp", help="a shipped preset (udp, tcp, ...)")
    parser.add_argument("--repeat", type=int, default=6, help="rounds; the best is shown")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions with callgrind"
    )
    opts = parser.parse_args()
    if opts.messages < 1:
        parser.error(f"--messages must be at least 1, got {opts.messages}")
    if opts.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {opts.repeat}")
    if opts.instructions:
        count_instructions(opts.messages, opts.preset)
        return
    tune_gc()
    trio.run(measure, opts.messages, opts.preset, opts.repeat)


if __name__ == "__main__":
    main()
