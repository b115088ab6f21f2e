"""`triogroups probe` against a live three-member cluster of real processes started by the
supervisor (`open_process_group`) over loopback UDP multicast (issue 16)."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

import pytest
import trio

from triogroups import Channel, StackConfig, open_process_group, probe
from triogroups.testing import free_ports, wait_until

pytestmark = pytest.mark.real

STEP = 60  # seconds per awaited condition: a busy 2-core machine needs a few
SENT = 50


async def send_then_idle(ch: Channel) -> None:
    """The member app: once all three are in the view, multicast SENT messages, then stay
    in the group until stopped."""
    await wait_until(lambda: len(ch.view) >= 3, timeout=120)
    for i in range(SENT):
        await ch.send(f"{ch.name}-{i}".encode())
    await trio.sleep_forever()


def quiet(name: str, line: str) -> None:
    """Member output stays with the group."""


def _stack(diag_port: int) -> StackConfig:
    config = StackConfig.preset("udp").configure(
        "UDP", mcast_port=free_ports(), diagnostics_port=diag_port
    )
    return config.configure("GMS", join_timeout=1.0)


async def _cli(*args: str) -> tuple[int, str, str]:
    done = await trio.run_process(
        [sys.executable, "-m", "triogroups.cli", "probe", *args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _delivered(answer: dict[str, Any]) -> int:
    return int(answer["stats"]["NAKACK2"]["delivered"])


def _ticks(answer: dict[str, Any]) -> int:
    return int(answer["host"]["layers"]["NAKACK2"]["ticks"])


async def test_probe_json_reset_and_xmit_interval_on_a_supervised_cluster() -> None:
    """``probe --json`` gets all three members with one view and counters that add up;
    ``reset`` zeroes them; a run-time ``xmit_interval`` shows in the next probe and in how
    often the retransmit task runs; another cluster's name gets no answer (exit 1)."""
    port = free_ports()
    cluster = f"probe-{uuid.uuid4().hex[:8]}"
    where: dict[str, Any] = {"diagnostics_port": port, "port_range": 0, "tcp": False}
    async with open_process_group(
        send_then_idle, 3, stack=_stack(port), cluster=cluster, output=quiet
    ) as group:
        with trio.fail_after(STEP):
            await group.wait_for_view(3)
            while True:  # every member delivered everything
                answers = await probe(cluster=cluster, expect=3, timeout=5, **where)
                if len(answers) == 3 and all(_delivered(a) >= 3 * SENT for a in answers):
                    break
                await trio.sleep(0.2)
        code, out, err = await _cli("--cluster", cluster, "--json", "--port", str(port),
                                    "--expect", "3", "--timeout", "30")  # fmt: skip
        assert code == 0 and err == "", out + err
        answers = json.loads(out)
        assert [a["name"] for a in answers] == ["A", "B", "C"]
        assert sorted(a["pid"] for a in answers) == sorted(m.pid or 0 for m in group.members)
        (view,) = {json.dumps(a["view"]) for a in answers}
        assert sorted(json.loads(view)["members"]) == ["A", "B", "C"]
        for a in answers:
            nakack2, udp = a["stats"]["NAKACK2"], a["stats"]["UDP"]
            assert nakack2["sent"] >= SENT and nakack2["delivered"] >= 3 * SENT
            assert udp["bundles_sent"] > 0 and udp["bytes_sent"] > udp["bundles_sent"]
            assert a["stats"]["GMS"]["coord"] == a["view"]["coord"]

        code, out, err = await _cli("--cluster", f"{cluster}-other", "--port", str(port),
                                    "--timeout", "0.5")  # fmt: skip
        assert code == 1 and out == "" and "no member" in err  # issue 38 item 5: on stderr

        reset = await probe(cluster=cluster, request="reset", expect=3, timeout=30, **where)
        assert len(reset) == 3
        for a in reset:  # the answer is built right after the reset, in the same step
            assert _delivered(a) == 0 and a["stats"]["NAKACK2"]["sent"] == 0
            assert a["stats"]["UDP"]["bundles_sent"] == 0 and _ticks(a) == 0

        fast = await probe(cluster=cluster, request="set", protocol="NAKACK2",
                           property="xmit_interval", value=0.05, expect=3, timeout=30,
                           **where)  # fmt: skip
        await trio.sleep(2.0)
        after_fast = await probe(cluster=cluster, expect=3, timeout=30, **where)
        slow = await probe(cluster=cluster, request="set", protocol="NAKACK2",
                           property="xmit_interval", value=30, expect=3, timeout=30,
                           **where)  # fmt: skip
        await trio.sleep(2.0)
        after_slow = await probe(cluster=cluster, expect=3, timeout=30, **where)
    for before, after in ((fast, after_fast), (slow, after_slow)):
        assert [a["name"] for a in after] == ["A", "B", "C"]
        for a in after:
            props = {layer["protocol"]: layer["properties"] for layer in a["stack"]}
            assert props["NAKACK2"]["xmit_interval"] == (0.05 if before is fast else 30)
    for b, a in zip(fast, after_fast, strict=True):
        elapsed = a["time"] - b["time"]
        assert _ticks(a) - _ticks(b) >= elapsed / 0.05 / 4  # a retransmit round every 50 ms
    for b, a in zip(slow, after_slow, strict=True):
        assert _ticks(a) - _ticks(b) <= 1  # none in the 30 s after the change
