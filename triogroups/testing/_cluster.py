"""Run N members in one process on the simulated network, on virtual time.

``open_cluster`` builds each member's stack from any preset or config with
its transport swapped for the simulated one (UDP becomes a lossy endpoint,
TCP a lossless one), runs the stacks, records every delivery, and checks the
delivery contract on request. Until membership (GMS) is in the stack, the
kit installs views itself. When the body fails, the seed that reproduces the
run is attached to the exception. With ``history=`` a directory, every member
incarnation records its history there for `check_histories`. A member can
be killed (`SimMember.kill`, as SIGKILL) or paused and resumed
(`SimMember.pause`, as SIGSTOP/SIGCONT: its clock stops, not only its network).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Unpack

import trio
import trio._core._run as _trio_run
import trio.testing

from triogroups.address import Address
from triogroups.config import StackConfig, sim_config
from triogroups.events import Connect, Disconnect, Disconnected, Event, InjectView, ViewChange
from triogroups.message import Flag, Message
from triogroups.protocols import ids
from triogroups.protocols.mcast import Mcast
from triogroups.stack import Stack
from triogroups.testing._contract import DeliveryLog
from triogroups.testing._history import HistoryWriter
from triogroups.transports.sim import NetworkOptions, SimNetwork, SimTransport, open_sim_network
from triogroups.view import Digest, MergeView, View, ViewId

__all__ = ["SimCluster", "SimMember", "open_cluster"]


@contextmanager
def _deterministic_scheduling(seed: int) -> Iterator[None]:
    """Make Trio run ready tasks in an order that depends only on ``seed``, until exit.

    Trio shuffles each batch of ready tasks; it exposes a deterministic mode
    (a seeded module-level Random) only through its Hypothesis plugin. The
    kit turns that mode on and seeds it, so a simulated run with a given
    seed schedules, bundles and drops exactly the same way every time; on
    exit it puts back the flag and the Random's state, so code that runs
    after a cluster (another test, an application) is scheduled as Trio
    would schedule it. The flag is private to Trio: the dependency's upper
    bound in pyproject.toml exists because of it.
    """
    flag = _trio_run._ALLOW_DETERMINISTIC_SCHEDULING
    state = _trio_run._r.getstate()
    _trio_run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
    _trio_run._r.seed(seed)
    try:
        yield
    finally:
        _trio_run._ALLOW_DETERMINISTIC_SCHEDULING = flag  # type: ignore[misc]
        _trio_run._r.setstate(state)


class SimMember:
    """One member of a `SimCluster`: its stack plus what it delivered."""

    def __init__(self, cluster: SimCluster, stack: Stack) -> None:
        self.cluster = cluster
        self.stack = stack
        self.delivered: list[Message] = []
        self.events: list[Event] = []
        self._cancel = trio.CancelScope()
        self._history: HistoryWriter | None = None
        self._history_of: Address | None = None
        self._resumed: trio.Event | None = None  # set while paused

    @property
    def address(self) -> Address:
        """The address of the member's current incarnation."""
        return self.stack.address

    @property
    def history(self) -> HistoryWriter | None:
        """The history writer of the current incarnation (``open_cluster(history=...)``)."""
        directory = self.cluster.history
        if directory is None:
            return None
        me = self.stack.address
        if self._history is None or self._history_of != me:
            if self._history is not None:
                self._history.close()
            path = directory / f"{self.name}-{me.uuid:032x}.jsonl"
            self._history = HistoryWriter(path, me, trio.current_time, name=self.name)
            self._history_of = me
        return self._history

    @property
    def name(self) -> str:
        """The member's name ("A", "B", ...)."""
        return self.stack.name

    @property
    def view(self) -> View | None:
        """The last view this member's stack passed up to the application."""
        for event in reversed(self.events):
            if isinstance(event, ViewChange):
                return event.view
        return None

    @property
    def left(self) -> bool:
        """True once GMS reported that this member left the group."""
        return any(isinstance(e, Disconnected) for e in self.events)

    async def connect(self) -> None:
        """Ask GMS to join; see `SimCluster.join` to wait for the view."""
        await self.stack.send(Connect())

    async def disconnect(self) -> bool:
        """Ask GMS to leave gracefully; returns once it left, with whether it flushed.

        True when every member of its last view had what it sent before it left;
        False when GMS's ``leave_timeout`` ran out first (`Disconnected.flushed`).
        Without GMS in the stack nothing leaves and nothing is waited for: False.
        """
        seen = len(self.events)  # an earlier incarnation's leave is not this one
        await self.stack.send(Disconnect())
        if "GMS" not in self.cluster.config.names():
            return False
        while True:
            for event in self.events[seen:]:
                if isinstance(event, Disconnected):
                    return event.flushed
            await trio.sleep(0.01)

    async def send(
        self,
        payload: bytes,
        to: Address | None = None,
        *,
        flags: int = 0,
        wait_accepted: bool = False,
    ) -> None:
        """Send one message down this member's stack and record it in the log.

        Returns once the message is queued at the top of the stack, as
        `Stack.send` does: while a layer holds back senders (MCAST's full
        window, no flow-control credits) a send waits, but the first sends
        after the window filled are already queued and return at once. With
        ``wait_accepted=True`` it returns only once every layer accepted
        everything this member sent so far (see `accepted`).
        """
        await self._wait_resumed()
        self._record_send(payload, to, flags)
        since = trio.current_time()
        try:
            await self.stack.send([Message(to, payload, flags=flags)])
        except BaseException:
            self._unrecord_sends([payload], to, flags)
            raise
        self._record_taken([payload], since)
        if wait_accepted:
            await self.accepted()

    async def send_many(
        self,
        payloads: Sequence[bytes],
        to: Address | None = None,
        *,
        flags: int = 0,
        wait_accepted: bool = False,
    ) -> None:
        """Send several messages as one batch (``wait_accepted`` as in `send`)."""
        await self._wait_resumed()
        for p in payloads:
            self._record_send(p, to, flags)
        since = trio.current_time()
        try:
            await self.stack.send([Message(to, p, flags=flags) for p in payloads])
        except BaseException:
            self._unrecord_sends(payloads, to, flags)
            raise
        self._record_taken(payloads, since)
        if wait_accepted:
            await self.accepted()

    def _record_send(self, payload: bytes, to: Address | None, flags: int) -> None:
        oob = bool(flags & Flag.OOB)
        self.cluster.log.record_send(self.address, to, payload, oob)
        history = self.history
        if history is not None:
            loopback = not flags & Flag.DONT_LOOPBACK
            # SEQUENCER orders every regular multicast of its stack (DONT_LOOPBACK too)
            total = to is None and not oob and self.cluster.total_order
            history.send(_message_id(payload), to, oob=oob, loopback=loopback, total=total)

    def _record_taken(self, payloads: Sequence[bytes], since: float) -> None:
        """The stack took sends recorded at ``since`` only now (they waited while a layer
        held senders back): the history says when, as the checker's ``settle`` runs from
        then (campaign udp-mcast 21144: a multicast held back 7.4 s by a window a killed
        member kept full). Nothing is written for a send taken at once."""
        history = self.history
        if history is not None and trio.current_time() > since:
            for p in payloads:
                history.taken(_message_id(p))

    def _unrecord_sends(self, payloads: Sequence[bytes], to: Address | None, flags: int) -> None:
        """`Stack.send` raised (cancelled while a full window held it back): it sent
        nothing, so the log and the history take the sends back (kept, they owed their
        delivery to every member; campaign udp-mcast 2204: a leave's burst cancelled
        after 10 s left 30 "missing" multicasts that never went down)."""
        oob = bool(flags & Flag.OOB)
        history = self.history
        for p in payloads:
            self.cluster.log.unrecord_send(self.address, to, p, oob)
            if history is not None:
                history.unsent(_message_id(p))

    def pause(self) -> None:
        """Stop this member as SIGSTOP stops a process, until `resume`.

        Its stack's clock stops (`Stack.pause`: no timer fires) and so does its
        network endpoint (`SimTransport.pause`): nothing leaves, and what
        arrives waits in the receive buffer as in a stopped process's socket
        buffer (a lossy endpoint keeps up to ``rx_buffer`` datagrams and drops
        the rest, a lossless one keeps all). Its application stops too: `send`
        waits until it is resumed. Recorded as a ``pause`` fault. Idempotent.
        """
        if self.paused:
            return
        self.stack.pause()
        self._transport().pause()
        self._resumed = trio.Event()
        self.cluster.record_fault("pause", self.name)

    def resume(self) -> None:
        """Let a paused member run on from virtual now, as SIGCONT does: its timers that
        came due meanwhile fire at once (late), what waited in its receive buffer is
        handled and what it sent meanwhile leaves. Recorded as a ``resume`` fault."""
        if not self.paused:
            return
        self.stack.resume()
        self._transport().resume()
        resumed, self._resumed = self._resumed, None
        assert resumed is not None
        resumed.set()
        self.cluster.record_fault("resume", self.name)

    @property
    def paused(self) -> bool:
        """Whether `pause` stopped this member."""
        return self._resumed is not None

    def _transport(self) -> SimTransport:
        transport = self.stack.protocols[0]
        assert isinstance(transport, SimTransport)
        return transport

    async def _wait_resumed(self) -> None:
        while self._resumed is not None:
            await self._resumed.wait()

    async def accepted(self, *, poll: float = 0.01) -> None:
        """Return once every layer accepted everything this member sent so far.

        Accepted means handed on to the transport: no longer waiting at the
        top of the stack, between layers, or queued in a layer that holds
        back senders (`Stack.sends_pending`). Checked whenever every task is
        blocked, else again after ``poll`` seconds of (virtual) time. Waits as
        long as that takes (wrap it in ``trio.fail_after``); cancelling the
        wait does not take anything back.
        """
        while True:
            await trio.testing.wait_all_tasks_blocked()
            if not self.stack.sends_pending():
                return
            await trio.sleep(poll)

    def protocol(self, name: str) -> Any:
        """The current layer registered as ``name`` (e.g. "MCAST"), for its stats and state."""
        return self.stack.protocol(name)

    async def _read(self) -> None:
        log = self.cluster.log
        async for item in self.stack.deliveries:
            history = self.history
            if type(item) is list:
                me = self.stack.address
                for msg in item:
                    self.delivered.append(msg)
                    if msg.src is not None:
                        log.record_delivery(me, msg.src, msg.payload)
                        if history is not None:
                            history.deliver(msg.src, _message_id(msg.payload))
            else:
                self.events.append(item)  # type: ignore[arg-type]
                if history is not None and isinstance(item, ViewChange):
                    history.view(item.view)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run this member's stack and read what it delivers until `kill`; started once by
        `SimCluster.add_member` in the cluster's nursery (a member it returned already
        runs: a test never calls this). ``task_status.started()`` once the stack runs."""
        with self._cancel:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.stack.run)
                nursery.start_soon(self._read)
                task_status.started()

    def kill(self) -> None:
        """Stop this member at once, as if its process died.

        Multicasts MCAST still parks for room (`Mcast.parked`) die with it: they were
        taken, but never numbered or sent, as the sends still waiting above the stack
        (which the cancellation takes back) were not. So the log and the history take
        them back too (campaign udp-mcast 51305: A's first multicast after its window
        filled was parked 11.8 s, while A sat in a view the others had left, until A
        was killed; the checker held A to deliver it)."""
        self._unrecord_parked()
        self._cancel.cancel()

    def _unrecord_parked(self) -> None:
        try:
            mcast = self.stack.protocol("MCAST")
        except (KeyError, RuntimeError):  # no MCAST, or the stack never ran
            return
        assert isinstance(mcast, Mcast)
        for msg in mcast.parked():
            # a parked fragment is not a send of ours: FRAG sits above MCAST and the
            # campaign's messages are smaller than one fragment
            if msg.headers.get(ids.FRAG) is None:
                self._unrecord_sends([msg.payload], None, msg.flags)

    def __repr__(self) -> str:
        return f"<SimMember {self.name}>"


class SimCluster:
    """Members on one `SimNetwork`, plus the log of what they sent and delivered."""

    def __init__(
        self,
        network: SimNetwork,
        config: StackConfig,
        nursery: trio.Nursery,
        cluster: str,
        history: Path | None = None,
    ) -> None:
        self.network = network
        #: where member histories go (``open_cluster(history=...)``), or None
        self.history = history
        self._faults = (
            None
            if history is None
            else HistoryWriter(history / "faults.jsonl", None, trio.current_time)
        )
        self.config = config
        #: whether the stack orders every regular multicast (SEQUENCER): histories mark
        #: those sends ``total`` for the checker's **total_order** rule
        self.total_order = "SEQUENCER" in config.names()
        self.cluster = cluster
        self.members: list[SimMember] = []
        self.log = DeliveryLog()
        self._nursery = nursery
        self._view_counter = 0
        self._addresses = random.Random(network.seed)

    def _new_address(self, name: str) -> Address:
        """Addresses drawn from the seed, so views and orderings repeat too."""
        return Address(self._addresses.getrandbits(128), name)

    def new_address(self, name: str) -> Address:
        """A new address drawn from the run's seed, as this cluster's members get: for a
        channel of the caller's own on `network` (``open_channel(new_address=...)``), whose
        addresses then replay with the seed too."""
        return self._new_address(name)

    @property
    def seed(self) -> int:
        """The seed of the network's randomness: the same seed replays the same run."""
        return self.network.seed

    def partition(self, *groups: Sequence[SimMember]) -> None:
        """Split the network into ``groups`` (as `SimNetwork.partition`), recorded as a fault."""
        self.network.partition(*([m.address for m in g] for g in groups))
        self.record_fault("partition", " | ".join(",".join(m.name for m in g) for g in groups))

    def heal(self) -> None:
        """Heal every partition (`SimNetwork.heal`), recorded as a fault."""
        self.network.heal()
        self.record_fault("heal")

    def record_fault(self, kind: str, detail: str = "") -> None:
        """Note a fault in the run's fault log (with ``history``; else nothing)."""
        if self._faults is not None:
            self._faults.fault(kind, detail)

    def __getitem__(self, index: int) -> SimMember:
        return self.members[index]

    async def add_member(self, name: str | None = None) -> SimMember:
        """Start one more member (named "A", "B", ... in order by default) and return it
        once its stack runs; it has not joined (see `join`).
        """
        name = name or chr(ord("A") + len(self.members))
        stack = Stack(self.config, self.cluster, name, new_address=self._new_address)
        member = SimMember(self, stack)
        await self._nursery.start(member.run)
        self.members.append(member)
        return member

    async def join(self, member: SimMember, *, timeout: float = 60.0) -> View:
        """Connect ``member`` through GMS; returns once it has a view that includes it."""
        await member.connect()
        with trio.fail_after(timeout):
            while member.view is None or member.address not in member.view:
                await trio.sleep(0.01)
        assert member.view is not None
        return member.view

    async def wait_for_view(
        self, members: Sequence[SimMember] | None = None, *, timeout: float = 60.0
    ) -> View:
        """Wait until ``members`` (default: all) have the same view of exactly them."""
        chosen = list(self.members if members is None else members)
        wanted = {m.address for m in chosen}
        with trio.fail_after(timeout):
            while True:
                views = {m.view for m in chosen}
                if len(views) == 1:
                    (view,) = views
                    if view is not None and set(view.members) == wanted:
                        return view
                await trio.sleep(0.01)

    async def inject_view(
        self,
        view: View,
        members: Sequence[SimMember] | None = None,
        *,
        digest: Digest | None = None,
    ) -> View:
        """Make GMS install ``view`` at ``members`` (default: those in it), as if the
        coordinator had sent it: JGroups' ``injectView``.

        Unlike `install_view`, which passes a `ViewChange` past GMS (for stacks
        without membership), this goes through GMS (`InjectView`): its state
        (coordinator or participant), the layers below and the application
        see the view as they would a real one. A `MergeView` is installed as
        after a merge, ``digest`` then giving the windows for the other
        subgroups; a member that has not joined yet starts from ``digest``.
        Returns once each member's stack took the event; wait for the view
        with `wait_for_view` or `SimMember.view`.
        """
        if "GMS" not in self.config.names():
            raise RuntimeError("inject_view needs GMS in the stack; use install_view without it")
        chosen = [m for m in self.members if m.address in view] if members is None else members
        for member in chosen:
            if member.address not in view:
                raise ValueError(f"{member.name} is not in the injected view {view}")
            await member.stack.send(InjectView(view, digest))
        return view

    def merge_view(self, *subgroups: View, counter: int | None = None) -> MergeView:
        """A `MergeView` of ``subgroups``: its coordinator is the first subgroup's, its members
        those of every subgroup in order, its id one above the highest subgroup's."""
        if len(subgroups) < 2:
            raise ValueError(f"a merge view needs at least 2 subgroups, got {len(subgroups)}")
        members = list(dict.fromkeys(m for sub in subgroups for m in sub.members))
        number = counter if counter is not None else max(s.view_id.id for s in subgroups) + 1
        return MergeView(ViewId(number, subgroups[0].coord), members, subgroups)

    async def install_view(self, members: Sequence[SimMember] | None = None) -> View:
        """Install one view with ``members`` (default: all) at each of them, past GMS.

        The view goes straight to the layers and the application (a
        `ViewChange` from the top), for stacks without GMS; with GMS use
        `inject_view`, which GMS itself installs.
        """
        chosen = list(self.members if members is None else members)
        self._view_counter += 1
        view = View.create(chosen[0].address, self._view_counter, [m.address for m in chosen])
        for member in chosen:
            await member.stack.send(ViewChange(view))
        return view

    def check_contract(
        self, members: Sequence[SimMember] | None = None, *, complete: bool = True
    ) -> None:
        """Raise ContractViolation if a member broke the delivery contract.

        Messages are identified by sender and payload: each payload a member
        sends must be unique for the whole run among what one receiver gets
        from it (see `DeliveryLog`); a repeated one is itself a
        ContractViolation that names it.
        """
        chosen = list(self.members if members is None else members)
        addresses = [m.address for m in chosen]
        self.log.check(addresses, addresses, complete=complete)

    async def wait_until_delivered(self, *, timeout: float = 60.0, poll: float = 0.05) -> None:
        """Wait (virtual time) until every member delivered everything sent to it.

        Polls the delivered counts (cheap), then checks the whole contract once;
        raises ContractViolation if it does not hold by ``timeout``.
        """
        addresses = [m.address for m in self.members]
        with trio.move_on_after(timeout):
            while not self.log.all_arrived(addresses, addresses):
                await trio.sleep(poll)
        self.check_contract()


@asynccontextmanager
async def open_cluster(
    n: int = 3,
    stack: StackConfig | str | Path = "sim",
    *,
    seed: int = 0,
    cluster: str = "test",
    view: bool = True,
    history: str | Path | None = None,
    **faults: Unpack[NetworkOptions],
) -> AsyncIterator[SimCluster]:
    """``n`` members on a fresh simulated network; ``faults`` go to `SimNetwork` (``loss``,
    ``duplicate``, ``min_delay``, ``max_delay``, ``name``).

    With ``history`` (a directory) every member incarnation records what it sent,
    delivered and installed there, one JSON-lines file each, plus ``faults.jsonl``
    for `SimCluster.partition` and `SimCluster.heal`: `check_histories` reads them.
    A message's id in the history is its payload (as text).

    With ``view=True`` every member is in one view before the body runs: joined
    one by one through GMS when the stack has GMS, else installed by the kit.
    On failure the exception gets a note with the seed, offered as a reproducer
    only on virtual time (a `trio.testing.MockClock`, e.g. pytest-trio's
    ``autojump_clock``).
    """
    try:
        with _deterministic_scheduling(seed):
            async with open_sim_network(seed=seed, **faults) as net, trio.open_nursery() as nursery:
                directory = None if history is None else Path(history)
                if directory is not None:
                    directory.mkdir(parents=True, exist_ok=True)
                sim = SimCluster(net, sim_config(stack, net), nursery, cluster, directory)
                for _ in range(n):
                    await sim.add_member()
                if view and n:
                    if "GMS" in sim.config.names():
                        for member in sim.members:
                            await sim.join(member)
                        await sim.wait_for_view()
                    else:
                        await sim.install_view()
                yield sim
                nursery.cancel_scope.cancel()
    except BaseException as exc:
        exc.add_note(_seed_note(seed))
        raise


def _message_id(payload: bytes) -> str:
    """A payload as the message's id in a history: its text, or hex if it is not utf-8."""
    try:
        return payload.decode()
    except UnicodeDecodeError:
        return "0x" + payload.hex()


def _seed_note(seed: int) -> str:
    """What a failure says of its seed: a replay only on virtual time.

    The network's faults and Trio's scheduling follow the seed, but on the real
    clock timers fire when the machine gets to them, so the same seed can pass
    once and fail the next time: it must not be offered as a reproducer then.
    """
    if isinstance(trio.lowlevel.current_clock(), trio.testing.MockClock):
        return f"simulated run on virtual time: reproduce with seed={seed}"
    return f"simulated run with seed={seed} on the real clock: a rerun may not replay it"
