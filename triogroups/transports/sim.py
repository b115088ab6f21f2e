"""The simulated network: many members in one process, on virtual time.

`SimNetwork` carries encoded bundles between `SimTransport` endpoints. A
seeded RNG decides per copy whether it is lost, duplicated, and how long it
is delayed (random delays reorder); partitions drop traffic between groups
of members, symmetric or one-way, until healed. Run it under trio's
``MockClock`` (pytest-trio's ``autojump_clock``) and a whole cluster runs in
virtual time, deterministically for a given seed.

Bundles go through the real `WireCodec`, so simulated members share no
objects and the codec is exercised on every message. The simulated network
is an addition to the real transports for deterministic tests, never a
replacement for them.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
import weakref
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, TypedDict, Unpack

import trio

from triogroups.address import Address
from triogroups.events import Item, LocalPhysicalAddress, TmpView, ViewChange
from triogroups.message import Message
from triogroups.properties import Bool, Int, Size, Str, at_least, between
from triogroups.transports._addresses import Physical, SendToHosts
from triogroups.transports._bundler import encode_bundles, route
from triogroups.transports.base import Transport, UpChannel, fan_out_targets
from triogroups.view import View
from triogroups.wire import MAX_DATAGRAM, WireCodec, WireError

__all__ = ["NetworkOptions", "SimNetwork", "SimNetworkOptions", "SimTransport", "open_sim_network"]

_log = logging.getLogger(__name__)
_NETWORKS: weakref.WeakValueDictionary[str, SimNetwork] = weakref.WeakValueDictionary()
_names = itertools.count(1)


class NetworkOptions(TypedDict, total=False):
    """A `SimNetwork`'s keyword options but the seed (its faults and its name), as
    `open_cluster` takes them on beside a seed of its own."""

    loss: float
    duplicate: float
    min_delay: float
    max_delay: float
    name: str | None


class SimNetworkOptions(NetworkOptions, total=False):
    """Every keyword option of `SimNetwork`, as `open_sim_network` takes them on."""

    seed: int


class SimNetwork:
    """An in-process network of `SimTransport` endpoints with seeded faults.

    ``loss`` and ``duplicate`` are probabilities per copy; each copy is
    delayed uniformly in [``min_delay``, ``max_delay``] seconds, so a spread
    reorders. ``lossless`` endpoints (TCP-like) are exempt from random loss
    but not from partitions. Every endpoint has a physical address on the
    network's one host (its name), which discovery announces and TCPPING
    sends to (`transmit_to_host`).
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        loss: float = 0.0,
        duplicate: float = 0.0,
        min_delay: float = 0.001,
        max_delay: float = 0.001,
        name: str | None = None,
    ) -> None:
        self.name = name or f"sim{next(_names)}"
        self.seed = seed
        self.rng = random.Random(seed)
        self.set_faults(loss=loss, duplicate=duplicate, min_delay=min_delay, max_delay=max_delay)
        self._endpoints: dict[Address, SimTransport] = {}
        self._hosts: dict[Physical, Address] = {}  # physical address -> endpoint there
        self._blocked: set[tuple[Address, Address]] = set()
        self._queue: list[tuple[float, int, Address, bytes]] = []
        self._seq = itertools.count()
        self._wakeup: trio.CancelScope | None = None
        self._ports = itertools.count(1)
        self.counters = {"sent": 0, "delivered": 0, "lost": 0, "duplicated": 0, "blocked": 0}
        self.counters["unreachable"] = 0
        _NETWORKS[self.name] = self

    @staticmethod
    def named(name: str) -> SimNetwork:
        """The open network called ``name`` (how a `SimTransport` finds it from its config);
        RuntimeError if none is open."""
        net = _NETWORKS.get(name)
        if net is None:
            raise RuntimeError(
                f"no simulated network named {name!r} is open (SIM's network property names "
                "one; run the stack inside open_sim_network())"
            )
        return net

    def set_faults(
        self,
        *,
        loss: float | None = None,
        duplicate: float | None = None,
        min_delay: float | None = None,
        max_delay: float | None = None,
    ) -> None:
        """Change fault rates; unnamed ones keep their values."""
        if loss is not None:
            if not 0 <= loss < 1:
                raise ValueError(f"loss must be in [0, 1), got {loss}")
            self.loss = loss
        if duplicate is not None:
            if not 0 <= duplicate < 1:
                raise ValueError(f"duplicate must be in [0, 1), got {duplicate}")
            self.duplicate = duplicate
        if min_delay is not None:
            self.min_delay = min_delay
        if max_delay is not None:
            self.max_delay = max_delay
        if not 0 <= self.min_delay <= self.max_delay:
            raise ValueError(
                f"delays need 0 <= min_delay <= max_delay, got {self.min_delay}, {self.max_delay}"
            )

    # --- partitions ---------------------------------------------------------------

    def block(self, src: Address, dst: Address) -> None:
        """Drop everything from ``src`` to ``dst`` (one way) until healed."""
        self._blocked.add((src, dst))

    def partition(self, *groups: Iterable[Address]) -> None:
        """Split into groups that cannot reach each other (both ways)."""
        sets = [set(g) for g in groups]
        for i, a in enumerate(sets):
            for b in sets[i + 1 :]:
                for x in a:
                    for y in b:
                        self._blocked.add((x, y))
                        self._blocked.add((y, x))

    def heal(self) -> None:
        """Remove every partition and one-way block."""
        self._blocked.clear()

    # --- endpoints and delivery -------------------------------------------------------

    def attach(self, endpoint: SimTransport) -> None:
        """Make ``endpoint`` reachable at its address (a transport calls this when it starts)."""
        assert endpoint.local_address is not None
        self._endpoints[endpoint.local_address] = endpoint

    def detach(self, endpoint: SimTransport) -> None:
        """Make ``endpoint`` unreachable; what is in flight to it is dropped (``unreachable``)."""
        if endpoint.local_address is not None:
            self._endpoints.pop(endpoint.local_address, None)
        for physical, address in list(self._hosts.items()):
            if address == endpoint.local_address:
                del self._hosts[physical]

    def physical_address(self, endpoint: SimTransport | None = None) -> Physical:
        """The (host, port) of a starting endpoint, so discovery has one to announce.

        An endpoint with a ``bind_port`` takes the first port of ``bind_port ..
        bind_port + port_range`` no attached endpoint holds, as a TCP transport
        binds the first free one, so a static host list (TCPPING's
        ``initial_hosts``) finds it, and a restarted member may take its old
        port; RuntimeError if all are taken. Others get a port of their own,
        never reused.
        """
        if endpoint is None or not endpoint.bind_port:
            physical = (self.name, next(self._ports))
        else:
            first, last = endpoint.bind_port, endpoint.bind_port + endpoint.port_range
            free = [p for p in range(first, last + 1) if (self.name, p) not in self._hosts]
            if not free:
                raise RuntimeError(
                    f"SIM: every port of {first}..{last} on network {self.name!r} is taken "
                    "(raise port_range)"
                )
            physical = (self.name, free[0])
        if endpoint is not None and endpoint.local_address is not None:
            self._hosts[physical] = endpoint.local_address
        return physical

    def transmit_to_host(self, src: Address, host: Physical, data: bytes) -> None:
        """Schedule one datagram to the endpoint at physical address ``host`` (what TCP does
        when discovery sends to an endpoint); counted ``unreachable`` if none is there."""
        dest = self._hosts.get(host)
        if dest is None:
            self.counters["sent"] += 1
            self.counters["unreachable"] += 1
            return
        self.transmit(src, dest, data)

    def members(self) -> list[Address]:
        """The addresses of the endpoints attached now."""
        return list(self._endpoints)

    def transmit(self, src: Address, dest: Address | None, data: bytes) -> None:
        """Schedule delivery of one datagram (a multicast goes to every other endpoint)."""
        self.counters["sent"] += 1
        now = trio.current_time()
        targets = [a for a in self._endpoints if a != src] if dest is None else [dest]
        for target in targets:
            endpoint = self._endpoints.get(target)
            if endpoint is None:
                self.counters["unreachable"] += 1
                continue
            if (src, target) in self._blocked:
                self.counters["blocked"] += 1
                continue
            if not endpoint.lossless and self.loss and self.rng.random() < self.loss:
                self.counters["lost"] += 1
                continue
            copies = 1
            if not endpoint.lossless and self.duplicate and self.rng.random() < self.duplicate:
                copies = 2
                self.counters["duplicated"] += 1
            for _ in range(copies):
                at = now + self.rng.uniform(self.min_delay, self.max_delay)
                if endpoint.lossless:
                    at = max(at, endpoint.last_scheduled)  # a stream never reorders
                    endpoint.last_scheduled = at
                heapq.heappush(self._queue, (at, next(self._seq), target, data))
        if self._queue and self._wakeup is not None:
            self._wakeup.deadline = min(self._wakeup.deadline, self._queue[0][0])

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Deliver scheduled datagrams at their time; one batch per endpoint per wake-up."""
        task_status.started()
        queue = self._queue
        while True:
            deadline = queue[0][0] if queue else float("inf")
            with trio.CancelScope(deadline=deadline) as scope:
                self._wakeup = scope
                await trio.sleep_forever()
            self._wakeup = None
            now = trio.current_time()
            due: dict[Address, list[bytes]] = {}
            while queue and queue[0][0] <= now:
                _, _, target, data = heapq.heappop(queue)
                due.setdefault(target, []).append(data)
            for target, datagrams in due.items():
                endpoint = self._endpoints.get(target)
                if endpoint is None:
                    self.counters["unreachable"] += len(datagrams)
                else:
                    self.counters["delivered"] += len(datagrams)
                    endpoint.arrive(datagrams)

    def stats(self) -> dict[str, Any]:
        """Counters (sent, delivered, lost, duplicated, blocked, unreachable), datagrams in
        flight and the number of endpoints."""
        return {**self.counters, "in_flight": len(self._queue), "endpoints": len(self._endpoints)}


@asynccontextmanager
async def open_sim_network(**options: Unpack[SimNetworkOptions]) -> AsyncIterator[SimNetwork]:
    """A running `SimNetwork` for the body of the ``async with``; ``options`` are `SimNetwork`'s
    (``seed``, ``loss``, ``duplicate``, ``min_delay``, ``max_delay``, ``name``)."""
    net = SimNetwork(**options)
    async with trio.open_nursery() as nursery:
        await nursery.start(net.run)
        try:
            yield net
        finally:
            nursery.cancel_scope.cancel()


class SimTransport(Transport):
    """The transport of a member on a `SimNetwork`.

    Bundles each batch per destination (up to ``max_bundle_size``), loops
    back its own multicasts (unless DONT_LOOPBACK) and unicasts to itself
    without touching the network, and receives in batches. A multicast
    reaches every endpoint on the network, or with ``fan_out`` only the
    members of the current view (and of a `TmpView`), one copy each, as TCP
    sends it: such a transport then does not support multicasting
    (``supports_multicasting``), so MERGE3 finds other views by discovery as
    over TCP. Discovery's `SendToHosts` goes to the endpoints at those
    physical addresses (one group bundle each), as TCP connects to them.
    """

    name = "SIM"
    COUNTERS = (
        "bundles_sent",
        "msgs_sent",
        "bundles_received",
        "msgs_received",
        "dropped_rx_full",
        "dropped_oversized",
    )

    network = Str("", doc="name of the open SimNetwork to attach to")
    lossless = Bool(False, doc="behave like TCP: no random loss, no reordering, never drop")
    max_bundle_size = Size(
        MAX_DATAGRAM,
        doc="largest bundle (bytes)",
        check=at_least(64),
    )
    rx_buffer = Size(4096, doc="datagrams queued at the receiver before it drops (lossy only)")
    fan_out = Bool(
        False,
        doc="multicast as TCP does: one copy to each member of the view (all endpoints without)",
    )
    bind_port = Int(
        0,
        doc="first port to take on the network's host (the first free one up to "
        "bind_port + port_range, as TCP binds); 0: a port of its own",
        check=between(0, 65535),
        rule="in 0..65535",
    )
    port_range = Int(
        0, doc="how many ports above bind_port to try", check=between(0, 65535), rule="in 0..65535"
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.last_scheduled = 0.0
        self._next_view: View | None = None
        self._inbox: list[bytes] = []
        self._arrived = trio.Event()
        self._codec: WireCodec | None = None
        self._net: SimNetwork | None = None
        self._resumed: trio.Event | None = None  # set while paused
        self.physical: Physical | None = None

    @property
    def supports_multicasting(self) -> bool:  # type: ignore[override]
        """False with ``fan_out``: a multicast reaches only the view's members, as over TCP."""
        return not self.fan_out

    def port_span(self) -> int | None:
        """``port_range`` when the port comes from a range (``bind_port``), as TCP's."""
        return self.port_range if self.bind_port else None

    def pause(self) -> None:
        """Stop sending and receiving, as a SIGSTOPped process's socket does.

        Datagrams that arrive meanwhile wait in the receive buffer, as in a
        stopped process's socket buffer: up to ``rx_buffer`` of them on a
        lossy endpoint (UDP: the rest are dropped, ``dropped_rx_full``),
        every one on a lossless one (a TCP peer's data waits in the kernel).
        What the stack sends down waits until `resume`. Idempotent.
        """
        if self._resumed is None:
            self._resumed = trio.Event()

    def resume(self) -> None:
        """Hand up what arrived while paused and send what waited (idempotent)."""
        resumed, self._resumed = self._resumed, None
        if resumed is not None:
            resumed.set()

    @property
    def paused(self) -> bool:
        """Whether `pause` holds this endpoint."""
        return self._resumed is not None

    async def _running(self) -> None:
        while self._resumed is not None:
            await self._resumed.wait()

    def open(self) -> None:
        """Attach to the open `SimNetwork` named ``network``."""
        if self._net is None:
            assert self.local_address is not None, "start() must run before open()"
            net = SimNetwork.named(self.network)
            net.attach(self)
            self._net = net

    def arrive(self, datagrams: list[bytes]) -> None:
        """Called by the network: queue datagrams for the receive loop."""
        room = len(datagrams) if self.lossless else self.rx_buffer - len(self._inbox)
        if room < len(datagrams):
            self.counters["dropped_rx_full"] += len(datagrams) - max(room, 0)
            datagrams = datagrams[: max(room, 0)]
        self._inbox.extend(datagrams)
        self._arrived.set()

    async def serve(
        self,
        down: trio.MemoryReceiveChannel[Item],
        up: UpChannel,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self._codec = self.make_codec(self.max_bundle_size)
        self.open()
        net, self._net = self._net, None
        assert net is not None
        try:
            self.physical = net.physical_address(self)
            await up.send(LocalPhysicalAddress(self.physical))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._receive_loop, up)
                task_status.started()
                async for item in down:
                    await self._running()
                    if type(item) is list:
                        await self._send_batch(net, item, up)
                    elif isinstance(item, ViewChange):
                        self.view = item.view
                        self._next_view = None
                    elif isinstance(item, TmpView):
                        self._next_view = item.view
                    elif isinstance(item, SendToHosts):
                        self._send_to_hosts(net, item)
                nursery.cancel_scope.cancel()
        finally:
            net.detach(self)

    async def _send_batch(self, net: SimNetwork, batch: list[Message], up: UpChannel) -> None:
        me = self.local_address
        assert me is not None and self._codec is not None
        by_dest, local = route(batch, me)
        for dest, msgs in by_dest.items():
            encoded, too_large = encode_bundles(self._codec, dest, me, msgs, self.max_bundle_size)
            if too_large:
                self.counters["dropped_oversized"] += len(too_large)
                _log.warning(
                    "%s: dropped %d message(s) larger than max_bundle_size %d",
                    me,
                    len(too_large),
                    self.max_bundle_size,
                )
            targets = self._fan_out_targets() if dest is None and self.fan_out else [dest]
            for data, count in encoded:
                self.counters["bundles_sent"] += 1
                self.counters["msgs_sent"] += count
                for target in targets:
                    net.transmit(me, target, data)
        if local:
            await up.send([m.copy() for m in local])

    def _send_to_hosts(self, net: SimNetwork, event: SendToHosts) -> None:
        """Discovery's messages, as one group bundle, to each endpoint but our own."""
        me = self.local_address
        assert me is not None and self._codec is not None
        msgs = list(event.messages)
        encoded, _ = encode_bundles(self._codec, None, me, msgs, self.max_bundle_size)
        for host in event.hosts:
            if host == self.physical:
                continue
            for data, count in encoded:
                self.counters["bundles_sent"] += 1
                self.counters["msgs_sent"] += count
                net.transmit_to_host(me, host, data)

    def _fan_out_targets(self) -> list[Address | None]:
        """The members a TCP multicast goes to: the view's, the TmpView's joiners too."""
        if self.view is None:
            return [None]
        return list(fan_out_targets(self.view.members, self._next_view, self.local_address))

    async def _receive_loop(self, up: UpChannel) -> None:
        assert self._codec is not None
        me = self.local_address
        while True:
            await self._arrived.wait()
            await self._running()
            self._arrived = trio.Event()
            datagrams, self._inbox = self._inbox, []
            batch: list[Message] = []
            for data in datagrams:
                try:
                    bundle = self._codec.decode(data)
                except WireError as exc:
                    self.drops.count(exc.reason)
                    continue
                if bundle.dest is not None and bundle.dest != me:
                    self.drops.count("wrong_dest")
                    continue
                self.counters["bundles_received"] += 1
                batch.extend(bundle.messages)
            if batch:
                self.counters["msgs_received"] += len(batch)
                await up.send(batch)

    def gauges(self) -> dict[str, Any]:
        return {
            "decode_errors": self.drops.snapshot(),
            "rx_queue": len(self._inbox),
            **self.secret_stats(),
        }
