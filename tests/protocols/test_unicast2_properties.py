"""UNICAST2 under hypothesis-driven faults on the simulated network.

Three members run SIM, DISCARD, UNICAST2 in virtual time. Hypothesis picks
the seed, the loss (up to 30%), duplication and delay spread (reordering),
and a plan of steps: unicasts between any two members (to itself too, OOB or
regular), one-way blocks that heal, and connections closed on either side
(`close_connection`, or a view that leaves the peers out). After the network
heals, every message is delivered exactly once and in order, the windows are
purged (bounded memory), and retransmissions stay in proportion to the loss.

A close on the *sending* side abandons that connection's unacked messages
(the seed: "cancelling all pending retransmissions"); those, and only those,
may be missing. They are read with `Unicast2.pending` just before the close.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Address, Flag, StackConfig
from triogroups.protocols.unicast2 import Unicast2
from triogroups.testing import ContractViolation, DeliveryLog, SimCluster, open_cluster

N = 3
PROPS = {"xmit_interval": 0.5, "stable_interval": 1.0}
STACK = StackConfig.of("SIM", "DISCARD", ("UNICAST2", PROPS))
CLOSING_STACK = StackConfig.of(
    "SIM",
    "DISCARD",
    ("UNICAST2", {**PROPS, "conn_expiry_timeout": 5.0, "max_retransmit_time": 0}),
)
SETTINGS = settings(
    max_examples=examples(20),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)

Step = tuple[Any, ...]
member = st.integers(0, N - 1)
send = st.tuples(st.just("send"), member, member, st.integers(1, 15), st.booleans())
pause = st.tuples(st.just("sleep"), st.floats(0.0, 3.0))
block = st.tuples(st.just("block"), member, member)
heal = st.just(("heal",))
close = st.tuples(st.just("close"), member, member)
alone = st.tuples(st.just("alone"), member)
view_all = st.just(("view_all",))


def _rounds(*actions: st.SearchStrategy[Step], rounds: int) -> st.SearchStrategy[list[Step]]:
    """Plans as rounds: a few unicasts, then one action (a pause, a fault, a close)."""
    one = st.tuples(st.lists(send, min_size=1, max_size=4), st.one_of(*actions))
    plan = st.lists(one, min_size=2, max_size=rounds)
    return plan.map(lambda rs: [step for sends, action in rs for step in (*sends, action)])


faults = {
    "seed": st.integers(0, 2**16),
    "loss": st.floats(0.0, 0.3),
    "duplicate": st.floats(0.0, 0.2),
    "max_delay": st.floats(0.001, 0.08),
}


def _run(body: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``body`` in a fresh trio run on virtual time (one run per example)."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    return trio.run(functools.partial(body, *args, **kwargs), clock=clock)


def _u2(cluster: SimCluster, i: int) -> Unicast2:
    proto = cluster[i].protocol("UNICAST2")
    assert isinstance(proto, Unicast2)
    return proto


def _total(cluster: SimCluster, key: str) -> int:
    return sum(_u2(cluster, i).stats()[key] for i in range(N))


class _Plan:
    """Runs steps against a cluster and remembers what a sender close put at risk."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.sent = 0
        self.at_risk: dict[tuple[Address, Address], set[bytes]] = {}

    def _abandon(self, i: int, peers: Sequence[int]) -> None:
        me = self.cluster[i].address
        for j in peers:
            peer = self.cluster[j].address
            gone = {m.payload for m in _u2(self.cluster, i).pending(peer)}
            self.at_risk.setdefault((me, peer), set()).update(gone)

    async def run(self, steps: list[Step]) -> None:
        cluster, net = self.cluster, self.cluster.network
        for step in steps:
            kind = step[0]
            if kind == "send":
                _, i, j, count, oob = step
                payloads = [b"%d>%d#%d" % (i, j, self.sent + k) for k in range(count)]
                self.sent += count
                flags = Flag.OOB if oob else 0
                await cluster[i].send_many(payloads, cluster[j].address, flags=flags)
            elif kind == "sleep":
                await trio.sleep(step[1])
            elif kind == "block":
                net.block(cluster[step[1]].address, cluster[step[2]].address)
            elif kind == "heal":
                net.heal()
            elif kind == "close":
                await trio.sleep(0.0001)  # let the stacks take what is queued
                _, i, j = step
                self._abandon(i, [j])
                _u2(cluster, i).close_connection(cluster[j].address, trio.current_time())
            elif kind == "alone":
                await trio.sleep(0.0001)
                self._abandon(step[1], range(N))
                await cluster.install_view([cluster[step[1]]])
            else:
                await cluster.install_view()
        net.heal()
        await cluster.install_view()

    def check(self, log: DeliveryLog, *, complete: bool) -> None:
        """Exactly once, per-sender FIFO (regular messages), nothing missing but the
        abandoned ones."""
        addresses = [m.address for m in self.cluster.members]
        for src in addresses:
            for dst in addresses:
                regular = log.sent.get((src, dst), [])
                oob = log.sent_oob.get((src, dst), [])
                got = log.delivered.get((dst, src), [])
                if len(got) != len(set(got)):
                    raise ContractViolation(f"{dst} delivered from {src} twice: {got}")
                if set(got) - set(regular) - set(oob):
                    raise ContractViolation(f"{dst} delivered what {src} never sent it")
                order = iter(regular)
                if not all(p in order for p in got if p not in oob):
                    raise ContractViolation(f"{dst} delivered {src}'s messages out of order")
                missing = set(regular) | set(oob)
                missing -= set(got) | self.at_risk.get((src, dst), set())
                if complete and missing:
                    raise ContractViolation(f"{dst} is missing {sorted(missing)} from {src}")

    async def settle(self, log: DeliveryLog, timeout: float = 120.0) -> None:
        with trio.move_on_after(timeout):
            while True:
                try:
                    self.check(log, complete=True)
                    return
                except ContractViolation:
                    await trio.sleep(0.1)
        self.check(log, complete=True)


def _assert_bounded_memory(cluster: SimCluster) -> None:
    for i in range(N):
        s = _u2(cluster, i).stats()
        assert s["send_window_size"] == 0, (cluster[i], s["send"])
        assert s["recv_window_size"] == 0, (cluster[i], s["recv"])
        assert s["send_connections"] <= N and s["recv_connections"] <= N
        assert s["tombstones"] <= N


async def _until_bounded(cluster: SimCluster, timeout: float = 120.0) -> None:
    """Windows are purged by STABLE, or, if every STABLE was lost, after a probe."""
    with trio.move_on_after(timeout):
        while True:
            try:
                _assert_bounded_memory(cluster)
                return
            except AssertionError:
                await trio.sleep(1)
    _assert_bounded_memory(cluster)


async def _faults_run(
    stack: StackConfig, steps: list[Step], seed: int, **faults: Any
) -> dict[str, Any]:
    async with open_cluster(N, stack, seed=seed, **faults) as cluster:
        plan = _Plan(cluster)
        await plan.run(steps)
        await plan.settle(cluster.log)
        await _until_bounded(cluster)
        keys = ("abandoned", "retransmissions", "msgs_sent", "dropped_no_connection")
        out = {key: _total(cluster, key) for key in keys}
        out["connections"] = _total(cluster, "connections_opened")
        out["at_risk"] = sum(len(v) for v in plan.at_risk.values())
        out["lost"] = sum(m.protocol("DISCARD").stats()["dropped_up"] for m in cluster.members)
        return out


def _lossy_stack(loss: float, seed: int) -> StackConfig:
    """Loss per message (DISCARD below UNICAST2), so lost messages can be counted exactly."""
    return StackConfig.of("SIM", ("DISCARD", {"up_loss": loss, "seed": seed}), ("UNICAST2", PROPS))


@SETTINGS
@given(steps=_rounds(pause, rounds=8), **faults)
def test_unicast2_property_exactly_once_in_order_under_loss_duplication_reordering(
    steps: list[Step], seed: int, loss: float, duplicate: float, max_delay: float
) -> None:
    """Every unicast delivered once, in order; windows purged; retransmissions in
    proportion to the messages lost (data or control), never a storm.

    A message that overtakes its connection's first message is dropped and resent
    after SEND_FIRST_SEQNO, as the seed says: that is a loss too."""
    stack = _lossy_stack(loss, seed)
    out = _run(_faults_run, stack, steps, seed, duplicate=duplicate, max_delay=max_delay)
    assert out["abandoned"] == 0
    bound = 2 * out["lost"] + 2 * out["dropped_no_connection"] + 2 * out["connections"]
    assert out["retransmissions"] <= bound, out
    if out["lost"] == out["dropped_no_connection"] == 0:
        assert out["retransmissions"] == 0, out


@SETTINGS
@given(
    steps=_rounds(pause, block, heal, rounds=10),
    **faults,
)
def test_unicast2_property_asymmetric_partitions_that_heal(
    steps: list[Step], seed: int, loss: float, duplicate: float, max_delay: float
) -> None:
    """One-way blocks between any members, healed at the end: nothing is lost."""
    out = _run(_faults_run, STACK, steps, seed, loss=loss, duplicate=duplicate, max_delay=max_delay)
    assert out["abandoned"] == 0


@settings(SETTINGS, max_examples=examples(40))
@given(
    steps=_rounds(pause, block, heal, close, close, alone, view_all, rounds=12),
    **faults,
)
def test_unicast2_property_connections_closed_and_reopened_on_either_side(
    steps: list[Step], seed: int, loss: float, duplicate: float, max_delay: float
) -> None:
    """Closes on either side at any time (explicit or by a view), with loss and blocks:
    nothing is delivered twice or out of order, only what a sender's close abandoned
    may be missing, and memory is bounded afterwards."""
    _run(
        _faults_run,
        CLOSING_STACK,
        steps,
        seed,
        loss=loss,
        duplicate=duplicate,
        max_delay=max_delay,
    )


async def _steady(loss: float) -> dict[str, int]:
    async with open_cluster(2, _lossy_stack(loss, 21), seed=21, max_delay=0.02) as cluster:
        a, b = cluster.members
        for i in range(300):
            await a.send(b"m%d" % i, b.address)
            await trio.sleep(0.01)
        await cluster.wait_until_delivered(timeout=60)
        cluster.check_contract()
        lost = sum(m.protocol("DISCARD").stats()["dropped_up"] for m in cluster.members)
        return {"lost": lost, "retransmissions": _u2(cluster, 0).stats()["retransmissions"]}


def test_unicast2_retransmissions_are_proportional_to_loss() -> None:
    """No loss, no retransmission (reordering alone costs none); with loss, between
    one per lost data message and two per lost message of any kind."""
    runs = {loss: _run(_steady, loss) for loss in (0.0, 0.1, 0.3)}
    assert runs[0.0] == {"lost": 0, "retransmissions": 0}
    for loss in (0.1, 0.3):
        assert 300 * loss * 0.5 <= runs[loss]["retransmissions"] <= 2 * runs[loss]["lost"], runs
    assert runs[0.1]["retransmissions"] < runs[0.3]["retransmissions"]
