"""One member inside one barrier task: reserve a port, gather once, join, run, meet, leave.

Runs in Spark's Python worker, never on the driver. The order of a task:

1. Reserve a free port on the executor's host: a socket bound with SO_REUSEADDR and not
   listening holds the port against every other bind (Linux), while TCP binds the same port
   with SO_REUSEADDR and listens. So the endpoint published in step 2 is the one TCP takes,
   without a window where another program could take it.
2. One ``allGather`` (about a second: Spark polls once a second) publishes
   ``[host, port, token]``; the token is random per task and attempt.
3. The generation is partition 0's token. Every task of one attempt sees the same gathered
   list, and a rerun of the stage (Spark keeps ``attemptNumber()`` at 0 then) draws new
   tokens, so each attempt is a cluster of its own (``<cluster>-<generation>``): bundles of a
   failed attempt that still arrive are another cluster's traffic and dropped.
4. Addresses put the partition in the top 32 bits of the UUID, so partition 0 sorts first
   among members starting together and GMS makes it the coordinator; each attempt's addresses
   are new incarnations. A member that is late to listen (a loaded machine) is missing from
   the others' discovery, which may then make the next partition the coordinator, and the
   late member joins it: only the view's first member is sure to coordinate (`_meet`).
5. The member function runs once the view holds all N members (its result converted by the
   form's ``finish``, if any); then the members meet (`_meet`) so no member leaves while
   others still send, then the channel leaves.

The final meeting is the group's own (`_meet`: every member calls the coordinator, which
answers once every member's function returned, and leaves last), not Spark's
``barrier()``: a task still waiting in
``barrier()`` when Spark cancels the stage (another member failed) makes its executor's JVM
fail that wait with a TaskKilledException in a thread that nothing catches, and the whole
executor exits (code 50), taking every other task and cached block on it along (issue 39).
Waiting in the group instead, a cancelled task is an ordinary killed task. The ``allGather``
of step 2 has the same hazard, for a task that fails before every member has gathered.

Any error becomes a `SparkGroupError` whose text carries the member's own traceback between
markers the driver finds in Spark's error (`member_failure`).
"""

from __future__ import annotations

import json
import re
import secrets
import socket
import traceback
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from triogroups._channel import Channel, JoinFailed, open_channel
from triogroups.address import Address
from triogroups.config import StackConfig
from triogroups.supervisor.spark._setup import SparkGroupError

__all__ = ["SparkTask", "TaskSpec", "member_failure", "run_task"]

_BEGIN = "<<triogroups member p{partition}>>"
_END = "<</triogroups member>>"
# Every member's function has returned when a member leaves (`_meet`), so nobody needs the
# leave answered: waiting long for it only delays the stage's end.
_LEAVE_TIMEOUT = 0.2
# The RPC method every member answers once its own member function has returned.
_DONE = "triogroups.spark.done"
_BYE = "triogroups.spark.bye"  # a member tells the coordinator it has the answer to _DONE
_MEET_POLL = 0.05  # seconds between two looks at who called, while the coordinator waits
# How long the coordinator, having answered every member, waits for their byes before it
# leaves (a bye can be lost when its member leaves at once; it has its answer by then).
_BYES_WAIT = 5.0
_FAILURE = re.compile(r"<<triogroups member p(\d+)>>\n(.*?)<</triogroups member>>", re.DOTALL)


@dataclass(frozen=True)
class SparkTask:
    """A member's place in its barrier stage, handed to the member function with its channel.

    ``partition`` is this member's partition, ``members`` the group's size,
    ``generation`` the token of this stage attempt (a retried stage has a new one), ``rows``
    the partition's rows (empty for `run_group`), ``batches`` the partition as
    ``pyarrow.RecordBatch`` objects in the Arrow form of `map_in_group` (empty otherwise; its
    ``rows`` are then tuples in column order, converted when first read).
    """

    partition: int
    members: int
    generation: str
    rows: Sequence[Any]
    batches: list[Any] = field(default_factory=list)

    @property
    def coordinator(self) -> bool:
        """True for partition 0 only: one member of the group, whichever coordinates its view
        (partition 0 does when the members start together; the view's first member always)."""
        return self.partition == 0


MemberFn = Callable[[Channel, SparkTask], Awaitable[Any]]


@dataclass(frozen=True)
class TaskSpec:
    """What every task of the stage runs; shipped from the driver with the stage's closure."""

    member_fn: MemberFn
    stack: StackConfig
    cluster: str
    bind_addr: str | None
    formation_timeout: float
    allow_pickle: bool
    meet_timeout: float = 300.0


def member_failure(text: str) -> tuple[int, str] | None:
    """The first member failure (partition, message with traceback) in an error's text."""
    match = _FAILURE.search(text)
    return None if match is None else (int(match.group(1)), match.group(2).rstrip())


def _reserve(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


def _stack_for(spec: TaskSpec, host: str, port: int, peers: list[list[Any]]) -> StackConfig:
    """The member's stack: TCP on the reserved port, TCPPING listing exactly the gathered
    endpoints, and GMS taking every gathered member as a pending join at once.

    Every member of a stage joins in the same instant, so the coordinator gets N-1
    JOIN_REQs together; GMS drops those beyond ``max_pending_joins`` (100, a guard against
    floods from strangers) and the dropped ones retry only after ``join_timeout``: a group of
    128 formed in 2.06 s instead of 0.05 s, one of 256 in about 4 s
    (benchmarks/bench_group_scale.py). The joiners here are exactly the stage's tasks, so
    the guard is raised to the stage's size (never lowered).
    """
    hosts = [f"{h}[{p}]" for h, p, _token in peers]
    config = spec.stack.configure("TCP", bind_addr=host, bind_port=port, port_range=0)
    config = config.configure("TCPPING", initial_hosts=hosts, port_range=0)
    if "GMS" in config.names():
        gms = config.layers[config.names().index("GMS")].build()
        if getattr(gms, "max_pending_joins", len(peers)) < len(peers):
            config = config.configure("GMS", max_pending_joins=len(peers))
    return config


class _Member:
    """The member of one task; keeps what the failure text names."""

    def __init__(
        self,
        spec: TaskSpec,
        ctx: Any,
        rows: Sequence[Any],
        batches: list[Any] | None = None,
        finish: Callable[[Any], Any] | None = None,
    ) -> None:
        self.spec = spec
        self.ctx = ctx
        self.rows = rows
        self.batches = batches or []
        self.finish = finish
        self.partition = int(ctx.partitionId())
        infos = ctx.getTaskInfos()
        self.members = len(infos)
        # Spark may rerun a failed barrier stage for only the partitions whose output it
        # did not keep (the standalone tier's retry step: p0's had been registered), so
        # this attempt's task infos stop before our partition: no group can form of it.
        self.partial = self.partition >= len(infos)
        info = infos[0 if self.partial else self.partition]
        self.host = spec.bind_addr or str(info.address).rsplit(":", 1)[0]
        self.generation = "-"
        self.everyone_returned = trio.Event()  # the coordinator's: every function returned
        self.called_by: set[str] = set()  # the members that called _DONE here
        self.said_bye: set[str] = set()  # the members that have their answer to _DONE

    def new_address(self, name: str) -> Address:
        return Address((self.partition << 96) | secrets.randbits(96), name)

    async def run(self) -> Any:
        spec = self.spec
        if self.partial:
            raise RuntimeError(
                f"Spark ran only {self.members} of this barrier stage's tasks in this attempt "
                f"(a rerun after a failure, for the partitions whose output it did not keep), "
                f"so no group forms of it"
            )
        reserved = _reserve(self.host)
        try:
            port = reserved.getsockname()[1]
            mine = json.dumps([self.host, port, secrets.token_hex(6)])
            gathered = await trio.to_thread.run_sync(self.ctx.allGather, mine)
            peers = [json.loads(entry) for entry in gathered]
            self.generation = str(peers[0][2])
            deadline = trio.current_time() + spec.formation_timeout
            try:
                async with open_channel(
                    f"{spec.cluster}-{self.generation}",
                    _stack_for(spec, self.host, port, peers),
                    f"p{self.partition}",
                    allow_pickle=spec.allow_pickle,
                    connect_timeout=spec.formation_timeout,
                    close_timeout=_LEAVE_TIMEOUT,
                    handle_signals=False,
                    new_address=self.new_address,
                    handlers={_DONE: self._answer_done, _BYE: self.said_bye.add},
                ) as ch:
                    reserved.close()
                    await self._formed(ch, deadline)
                    task = SparkTask(
                        self.partition, self.members, self.generation, self.rows, self.batches
                    )
                    result = await spec.member_fn(ch, task)
                    if self.finish is not None:
                        result = self.finish(result)
                    await self._meet(ch)
            except JoinFailed as exc:
                raise self._not_formed(str(exc)) from None
            return result
        finally:
            reserved.close()

    async def _formed(self, ch: Channel, deadline: float) -> None:
        """Return once the view holds every member of the stage (SparkGroupError at deadline)."""
        with trio.move_on_at(deadline):
            async for view in ch.views():
                if len(view) >= self.members:
                    return
        raise self._not_formed(f"last view {ch.view}")

    async def _answer_done(self, caller: str) -> None:
        """`_DONE` at the coordinator: answer ``caller`` once every member's function has
        returned."""
        self.called_by.add(caller)
        await self.everyone_returned.wait()

    async def _meet(self, ch: Channel) -> None:
        """Return once every member's function has returned; the coordinator returns once
        the others have their answer too (or `_BYES_WAIT` passed).

        Each other member calls `_DONE` at the coordinator, which answers all of them once
        its own function returned and every member in the view has called; on the answer
        they tell the coordinator (`_BYE`) and leave. A member that left the view early
        failed (it fails the stage whatever the others do): it counts as done. The
        coordinator leaves last, so no member waits for an answer from a member that has
        left: members that leave together leave their last messages unsent, and a member
        waiting for one would wait for FD_ALL3's 30 s to see the view without its sender.

        SparkGroupError when a member is still running after ``meet_timeout`` seconds (the
        session's ``spark.barrier.sync.timeout``, as for Spark's own ``barrier()``)."""
        deadline = trio.current_time() + self.spec.meet_timeout
        coordinator = ch.view.members[0]
        if coordinator != ch.address:
            rsps = await ch.rpc.call(
                _DONE, ch.name, to=coordinator, oob=True, timeout=self.spec.meet_timeout
            )
            if rsps.timed_out:
                raise self._still_running([coordinator.name])
            if rsps[coordinator].ok:
                await ch.rpc.call(_BYE, ch.name, to=coordinator, mode="none", oob=True)
            return
        while waiting := self._others(ch) - self.called_by:
            if trio.current_time() >= deadline:
                raise self._still_running(sorted(waiting))
            await trio.sleep(_MEET_POLL)
        self.everyone_returned.set()
        with trio.move_on_after(_BYES_WAIT):
            while self._others(ch) - self.said_bye:
                await trio.sleep(_MEET_POLL)

    @staticmethod
    def _others(ch: Channel) -> set[str]:
        return {m.name for m in ch.view.members if m != ch.address}

    def _still_running(self, names: list[str]) -> SparkGroupError:
        return SparkGroupError(
            f"{', '.join(names)} still running after {self.spec.meet_timeout:g} s "
            f"(spark.barrier.sync.timeout) while this member waited at the end"
        )

    def _not_formed(self, detail: str) -> SparkGroupError:
        return SparkGroupError(
            f"no view of {self.members} within formation_timeout="
            f"{self.spec.formation_timeout}s ({detail})"
        )

    def failure(self, exc: BaseException) -> SparkGroupError:
        where = f"member p{self.partition} of {self.members} (generation {self.generation})"
        text = "".join(traceback.format_exception(exc))
        begin = _BEGIN.format(partition=self.partition)
        return SparkGroupError(f"{begin}\n{where} failed:\n{text}{_END}", self.partition)


def run_task(
    spec: TaskSpec,
    rows: Iterable[Any],
    batches: list[Any] | None = None,
    finish: Callable[[Any], Any] | None = None,
) -> Any:
    """Run this barrier task's member to its end and return what the member function returned.

    ``finish`` converts that result inside the member, before the members' meeting at the
    end, so a result it refuses is this member's failure (with its traceback) rather than
    the stage's.
    """
    from pyspark import BarrierTaskContext

    kept = rows if isinstance(rows, Sequence) else list(rows)
    member = _Member(spec, BarrierTaskContext.get(), kept, batches, finish)
    try:
        return trio.run(member.run)
    except Exception as exc:
        raise member.failure(exc) from None
