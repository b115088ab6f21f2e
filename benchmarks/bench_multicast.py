"""Reliable multicast among three member processes, beside the transport alone, in one run.

    python benchmarks/bench_multicast.py [--seconds 3] [--repeat 3] [--members 3]
                                         [--size 1000] [--batch 64] [--stacks ...]
                                         [--long [--sample 10]]

Every member (see `_members`) runs a `Stack` and multicasts batches of 64
(``--batch``) messages of 1 KB for ``--seconds`` while it counts every
message delivered to it, its own included. The stacks:

- ``udp``: UDP with a PASS layer above it (a stack needs a layer above its
  transport): IP multicast with no reliability and no flow control;
- ``udp-nakack2``: UDP, NAKACK2, STABLE and MFC (NAKACK2 retransmits, STABLE
  lets senders purge, MFC keeps senders from running ahead of receivers);
- ``udp-mcast``: UDP and MCAST (its fixed window is its flow control);
- ``tcp``: TCP with a PASS layer (a multicast is one send per member);
- ``tcp-nakack2``: TCP, NAKACK2 with ``xmit_interval=0`` (seed 003: TCP
  retransmits, NAKACK2 only orders), STABLE and MFC, as in the tcp preset;
- ``tcp-nakack2-nofc``: the same without MFC, TCP's blocking sends being
  the only flow control. The senders then run ahead until TCP pushes back,
  and each keeps 120k-240k sent messages that STABLE has not yet seen
  delivered everywhere (~200 MiB per member, where MFC keeps ~45 MiB); MFC
  costs CPU per message in return (credit messages, smaller batches).
- ``udp-full``: the ``udp`` preset's layers but for discovery and GMS
  (the view is installed by hand, as for every stack here): MERGE3,
  FD_ALL3, VERIFY_SUSPECT, NAKACK2, UNICAST3, STABLE, UFC, MFC and FRAG,
  with the preset's properties. Not run by default: it is there to split
  what `bench_channel.py` measures into the full stack's share and the
  channel's (a diagnosis, beside ``--batch 1``).

Per member, the rate is the messages delivered per second between its first
and its last delivery; the table shows the lowest member's rate (what every
member got at least), its share of what was sent (the transport alone over
UDP loses what the receivers cannot keep up with; that is not counted), and
the ratio to the transport-only stack of the same transport, and the CPU
a member spends per message it delivers (process time between its first and
last delivery over its count, sending its share included; averaged over the
members): msgs/s swings with other load on the machine, CPU per message far
less. Peak memory is ``ru_maxrss`` of the largest member. Runs are interleaved and repeated;
medians are shown.

``--long`` runs each protocol stack once for ``--seconds`` (default 60) and
prints every member's RSS every ``--sample`` seconds, to check that memory
stays flat while traffic flows.

This is a measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from typing import Any

from _members import run_group

from triogroups._ports import free_ports

BATCH = 64  # messages per Stack.send
IDLE = 2.0  # a member stops counting this long after its last delivery
BUFFER = 4 << 20  # UDP receive buffers: what the kernel grants here without tuning

STACKS: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
    "udp": ("udp", [("PASS", {})]),
    "udp-nakack2": ("udp", [("NAKACK2", {}), ("STABLE", {}), ("MFC", {})]),
    "udp-mcast": ("udp", [("MCAST", {})]),
    "tcp": ("tcp", [("PASS", {})]),
    "tcp-nakack2": ("tcp", [("NAKACK2", {"xmit_interval": 0}), ("STABLE", {}), ("MFC", {})]),
    "tcp-nakack2-nofc": ("tcp", [("NAKACK2", {"xmit_interval": 0}), ("STABLE", {})]),
    "udp-full": (
        "udp",
        [
            ("MERGE3", {}),
            ("FD_ALL3", {"interval": "1s", "timeout": "5s"}),
            ("VERIFY_SUSPECT", {"timeout": "1s"}),
            ("NAKACK2", {}),
            ("UNICAST3", {}),
            ("STABLE", {}),
            ("UFC", {}),
            ("MFC", {}),
            ("FRAG", {}),
        ],
    ),
}
#: The stacks run when ``--stacks`` is not given.
DEFAULT_STACKS = [name for name in STACKS if name != "udp-full"]
#: The transport-only stack each protocol stack is compared with.
BASELINE = {name: kind for name, (kind, _) in STACKS.items()}


def _transport(kind: str) -> tuple[str, dict[str, Any]]:
    if kind == "udp":
        return "UDP", {
            "bind_port": 0,
            "mcast_port": free_ports(),
            "ip_ttl": 0,
            "ucast_recv_buf_size": BUFFER,
            "mcast_recv_buf_size": BUFFER,
        }
    return "TCP", {"bind_port": 0}


def run(
    stack: str, opts: Any, sample: float = 0.0, transport_props: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """One run: every member's result (count, seconds, sent, peak_rss_kb, rss_kb).

    ``transport_props`` are added to the transport's (e.g. a ``secret_file``).
    Each `Stack.send` takes ``opts.batch`` messages (64 where ``opts`` has none).
    """
    kind, layers = STACKS[stack]
    cluster = f"bench-{uuid.uuid4().hex[:12]}"
    name, props = _transport(kind)  # one multicast port for the whole group
    transport = (name, {**props, **(transport_props or {})})
    specs = [
        {
            "label": stack,
            "layers": [transport, *layers],
            "cluster": cluster,
            "name": f"M{i}",
            "role": "mcast",
            "size": opts.size,
            "batch": getattr(opts, "batch", BATCH),
            "seconds": opts.seconds,
            "idle": IDLE,
            "sample": sample,
        }
        for i in range(opts.members)
    ]
    return run_group(specs)


def _summary(results: list[dict[str, Any]]) -> tuple[float, float, int]:
    """The lowest member's rate, its share of all that was sent, the largest peak RSS."""
    sent = sum(r["sent"] for r in results)
    rates = [r["count"] / max(r["seconds"], 1e-9) for r in results]
    low = min(range(len(results)), key=lambda i: rates[i])
    return rates[low], results[low]["count"] / max(sent, 1), max(r["peak_rss_kb"] for r in results)


def _cpu_per_message(results: list[dict[str, Any]]) -> float:
    """Microseconds of a member's CPU per message it delivered (sending its share included),
    averaged over the members: what the stack costs, much steadier than msgs/s on a busy
    machine."""
    return statistics.mean(r["cpu_seconds"] / max(r["count"], 1) * 1e6 for r in results)


def short(opts: Any) -> None:
    names = opts.stacks.split(",")
    rates: dict[str, list[float]] = {s: [] for s in names}
    shares: dict[str, list[float]] = {s: [] for s in names}
    peaks: dict[str, list[int]] = {s: [] for s in names}
    cpus: dict[str, list[float]] = {s: [] for s in names}
    for _ in range(opts.repeat):  # interleaved, so a noisy moment hits every stack
        for stack in names:
            results = run(stack, opts)
            rate, share, peak = _summary(results)
            rates[stack].append(rate)
            shares[stack].append(share)
            peaks[stack].append(peak)
            cpus[stack].append(_cpu_per_message(results))
    print(
        f"\n{opts.members} members each multicasting {opts.size} B messages in batches of "
        f"{opts.batch}; medians of {opts.repeat} interleaved runs"
    )
    print(
        f"{'stack':<16} {'msgs/s/member':>13} {'ratio':>6} {'delivered':>9} "
        f"{'CPU us/msg':>10} {'peak RSS MiB':>12}   runs (lowest member's msgs/s)"
    )
    for stack in names:
        rate = statistics.median(rates[stack])
        base = BASELINE[stack]
        ratio = f"{rate / statistics.median(rates[base]):>5.2f}x" if base in rates else f"{'-':>6}"
        print(
            f"{stack:<16} {rate:>13,.0f} {ratio} {statistics.median(shares[stack]):>9.1%} "
            f"{statistics.median(cpus[stack]):>10.2f} "
            f"{statistics.median(peaks[stack]) / 1024:>12.1f}   "
            f"{[round(r) for r in rates[stack]]}"
        )


def long(opts: Any) -> None:
    names = [s for s in opts.stacks.split(",") if s != BASELINE[s]]
    for stack in names:
        results = run(stack, opts, sample=opts.sample)
        rate, share, peak = _summary(results)
        print(
            f"\n{stack}: {opts.seconds:.0f} s, {rate:,.0f} msgs/s at the lowest member "
            f"({share:.1%} of those sent), peak RSS {peak / 1024:.1f} MiB"
        )
        print(f"RSS MiB every {opts.sample:g} s, per member:")
        for i, result in enumerate(results):
            curve = " ".join(f"{kb / 1024:6.1f}" for kb in result["rss_kb"])
            print(f"  M{i}: {curve}")


def main() -> None:
    parser = argparse.ArgumentParser(description="reliable multicast vs transport-only stack")
    parser.add_argument("--seconds", type=float, default=None, help="sending time per run")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs; medians shown")
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--size", type=int, default=1000, help="payload bytes")
    parser.add_argument("--batch", type=int, default=BATCH, help="messages per Stack.send")
    parser.add_argument("--stacks", default=",".join(DEFAULT_STACKS))
    parser.add_argument("--long", action="store_true", help="one long run per protocol stack")
    parser.add_argument("--sample", type=float, default=10.0, help="RSS sampling period (--long)")
    opts = parser.parse_args()
    if opts.batch < 1:
        parser.error(f"--batch must be at least 1, got {opts.batch}")
    if opts.seconds is None:
        opts.seconds = 60.0 if opts.long else 3.0
    if opts.long:
        long(opts)
    else:
        short(opts)


if __name__ == "__main__":
    main()
