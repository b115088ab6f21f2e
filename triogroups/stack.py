"""The stack host: one member's protocol stack, each layer a supervised actor.

`Stack` builds the layers from a `StackConfig`, joins neighbours with bounded
trio memory channels whose items are batches (or events), each behind an
`Inlet` that runs an idle layer's handler in its neighbour's task instead
(run to completion; see `triogroups._layer`), and runs every layer as an
actor under a one-for-all `Supervisor`: a layer that crashes
takes the whole stack down, and it comes back as a new *incarnation* with a
new `Address` (a restarted member is a new member to its peers and rejoins;
it never resumes with half-lost protocol state). Restarts beyond the
intensity (``max_restarts`` within ``restart_window`` seconds) escalate:
`Stack.run` raises `RestartIntensityExceeded` and the process supervisor
takes over. A stack that cannot start at all (its transport cannot open in
the first incarnation: see `TransportActor`) is not retried: `Stack.run`
raises `StartupError` naming the cause at once.

The two ends that face the application survive restarts: items waiting to
go down stay queued, and deliveries are read from one channel for the life
of the stack.

Logged under ``triogroups.stack``: a layer's crash at WARNING (with its
traceback), the restart as a new incarnation at INFO, giving up beyond the
restart intensity at ERROR.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypedDict

import trio

from triogroups._cadence import SEND_CHECKPOINT_EVERY, Cadence
from triogroups._diagnostics import Responder, serve_diagnostics
from triogroups._layer import Inlet, LayerActor, TransportActor, original_error
from triogroups.actors import (
    Actor,
    ChildSpec,
    CrashReport,
    PermanentError,
    RestartIntensityExceeded,
    Strategy,
    Supervisor,
)
from triogroups.address import Address
from triogroups.config import StackConfig
from triogroups.events import Item
from triogroups.protocol import Protocol
from triogroups.transports.base import Transport

__all__ = ["Stack"]

_log = logging.getLogger("triogroups.stack")
_MERGE = 256  # messages a batch in the send queue may grow to by others joining it


class _Incarnation:
    """One life of a stack: an address, fresh protocol objects and the channels between them."""

    def __init__(
        self,
        config: StackConfig,
        address: Address,
        top_down_in: Inlet,
        top_up_out: Inlet,
        channel_size: int,
        on_blocked: Callable[[LayerActor, bool], None],
        *,
        first: bool,
        secret: bytes | None,
    ) -> None:
        self.address = address
        self.protocols = config.build()
        n = len(self.protocols)
        # down[i] carries items into layer i from above; up[i] into layer i + 1 from below.
        down = [Inlet(channel_size) for _ in range(n - 1)]
        up = [Inlet(channel_size) for _ in range(n - 1)]
        transport = self.protocols[0]
        assert isinstance(transport, Transport)
        if secret is not None:
            transport.give_secret(secret)
        self.actors: list[Actor] = [TransportActor(transport, down[0], up[0], first=first)]
        for i in range(1, n):
            top = i == n - 1
            self.actors.append(
                LayerActor(
                    self.protocols[i],
                    top_down_in if top else down[i],
                    up[i - 1],
                    down[i - 1],
                    top_up_out if top else up[i],
                    on_blocked,
                    inline_down=not top,  # the top channel is the send queue, drained whole
                )
            )

    def start(self, cluster: str) -> None:
        now = trio.current_time()
        for proto in self.protocols:
            proto.start(self.address, cluster, now)


class StackOptions(TypedDict, total=False):
    """`Stack`'s keyword options, as `open_channel` takes them on to its stack: each one typed,
    so a type checker checks the caller (`Stack` says what each does and its default)."""

    channel_size: int
    max_restarts: int
    restart_window: float
    new_address: Callable[[str], Address]
    secret: bytes | None


class Stack:
    """A member's protocol stack.

    Use `run` in a nursery (``await nursery.start(stack.run)`` returns once the
    first incarnation is up), `send` to pass items down from the top, and
    `receive` (or `deliveries`) for what comes out of the top. Every
    incarnation's address comes from ``new_address(name)`` (random UUIDs by
    default; the test kit derives them from its seed).

    ``secret`` turns on shared-secret mode (docs/how-to/shared-secret.md): every bundle
    is encrypted and authenticated with a key derived from it and the cluster
    name. Without it the transport's ``secret_file`` or ``$TRIOGROUPS_SECRET``
    is used, if set. `install_secret` rotates it at run time.
    """

    def __init__(
        self,
        config: StackConfig | str,
        cluster: str,
        name: str = "",
        *,
        channel_size: int = 16,
        max_restarts: int = 3,
        restart_window: float = 60.0,
        new_address: Callable[[str], Address] = Address.random,
        secret: bytes | None = None,
    ) -> None:
        if channel_size < 1:
            raise ValueError(f"channel_size must be >= 1, got {channel_size}")
        self.config = StackConfig.resolve(config)
        self.config.validate()
        self.cluster = cluster
        self.name = name
        self._channel_size = channel_size
        self._max_restarts = max_restarts
        self._restart_window = restart_window
        self._new_address = new_address
        self._secret = secret
        # the send queue, drained whole by the top layer (`send_nowait` with ``join``)
        self._down = Inlet(channel_size, merge=_MERGE)
        self._up = Inlet(channel_size)
        self.deliveries = self._up.receiver
        self.incarnation = 0
        self._cadence = Cadence(SEND_CHECKPOINT_EVERY)
        self._current: _Incarnation | None = None
        self._supervisor: Supervisor | None = None
        self._listeners: list[Callable[[Stack], None]] = []
        self._blocked: set[int] = set()  # layers holding back senders (id of the actor)
        self._blocked_since = 0.0  # when the top closed (valid while _blocked)
        self._blocked_total = 0.0  # seconds the top was closed, over closed spells
        self._blocked_count = 0  # how often the top closed
        self._open = trio.Event()
        self._open.set()
        self._gate = trio.StrictFIFOLock()
        self._released = False  # `release_senders`: nothing is held back at the top any more
        self.crash_reports: list[CrashReport] = []
        self.diagnostics: Responder | None = None  # set while it answers probes

    # --- lifecycle ---------------------------------------------------------------

    def _new_incarnation(self, _names: list[str] | None = None) -> None:
        self.incarnation += 1
        address = self._new_address(self.name)
        self._blocked.clear()
        self._open.set()
        self._current = _Incarnation(
            self.config,
            address,
            self._down,
            self._up,
            self._channel_size,
            self._layer_blocked,
            first=self.incarnation == 1,
            secret=self._secret,
        )
        self._current.start(self.cluster)
        if self.incarnation > 1:
            _log.info(
                "stack %s: restarted as %s (incarnation %d)",
                self._label,
                address,
                self.incarnation,
            )
        for listener in list(self._listeners):
            listener(self)

    def on_incarnation(self, listener: Callable[[Stack], None]) -> None:
        """Call ``listener(stack)`` whenever a new incarnation has started (after a crash)."""
        self._listeners.append(listener)

    def _child(self, index: int) -> Callable[[], Actor]:
        def factory() -> Actor:
            assert self._current is not None
            return self._current.actors[index]

        return factory

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the stack until cancelled; raises RestartIntensityExceeded on escalation, and
        StartupError (before reporting started, no restarts) when the first incarnation's
        transport cannot open."""
        if self._current is None:
            self._new_incarnation()
        assert self._current is not None
        labels = [p.name or type(p).__name__ for p in self._current.protocols]
        children = [ChildSpec(f"{i}:{label}", self._child(i)) for i, label in enumerate(labels)]
        self._supervisor = Supervisor(
            f"stack[{self.name or self.cluster}]",
            children,
            strategy=Strategy.ONE_FOR_ALL,
            max_restarts=self._max_restarts,
            restart_window=self._restart_window,
            before_restart=self._new_incarnation,
            on_crash=self._crashed,
        )
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._supervisor.run)
                nursery.start_soon(serve_diagnostics, self)
                task_status.started()
        except BaseExceptionGroup as group:
            error = original_error(group)
            if isinstance(error, RestartIntensityExceeded):
                _log.error("stack %s: %s", self._label, error)
            raise error from error.__cause__  # keeps a StartupError's cause

    @property
    def _label(self) -> str:
        return f"{self.name or '-'}@{self.cluster}"

    def _crashed(self, report: CrashReport) -> None:
        """A layer crashed: keep the report and say so (the supervisor restarts the stack).

        A `PermanentError` (a `StartupError`: a taken port) is not restarted but raised to
        whoever runs the stack, who says it: here it is one line at INFO, with its traceback
        only when DEBUG is on, instead of a WARNING with the whole chain before the same error
        is raised again."""
        self.crash_reports.append(report)
        exc = report.exception
        permanent = isinstance(exc, PermanentError)
        _log.log(
            logging.INFO if permanent else logging.WARNING,
            "stack %s: layer %s of %s crashed: %s: %s",
            self._label,
            report.actor.rsplit(".", 1)[-1],
            self.address,
            type(exc).__name__,
            exc,
            exc_info=(
                (type(exc), exc, exc.__traceback__)
                if not permanent or _log.isEnabledFor(logging.DEBUG)
                else None
            ),
        )

    # --- the top of the stack -------------------------------------------------------

    def _layer_blocked(self, layer: LayerActor, blocked: bool) -> None:
        """A layer started or stopped holding back senders: close or open the top."""
        if blocked:
            if not self._blocked:
                self._blocked_since = trio.current_time()
                self._blocked_count += 1
            self._blocked.add(id(layer))
            if self._open.is_set():
                self._open = trio.Event()
        else:
            if id(layer) in self._blocked:
                self._blocked.discard(id(layer))
                if not self._blocked:
                    self._blocked_total += trio.current_time() - self._blocked_since
            if not self._blocked:
                self._open.set()

    async def send(self, item: Item) -> None:
        """Pass a batch or an event down from the top; awaits when the stack is full.

        While there is room it returns without yielding (every
        `SEND_CHECKPOINT_EVERY`th call does: `_cadence`), so a burst of sends queues
        up and the layers carry it as one coalesced batch. While a layer holds
        back senders (`Protocol.blocks_down`: no credits, a full window) a
        batch waits here, senders in the order they came; events never wait,
        so a view change can reach the layer that blocks.
        """
        if type(item) is list and ((self._blocked and not self._released) or self._gate.locked()):
            async with self._gate:  # first come, first sent: waiting senders keep their order
                while self._blocked and not self._released:
                    await self._open.wait()
                await self._down.send(item)
            return
        if not self._cadence.tick():
            try:
                self._down.send_nowait(item)
                return
            except trio.WouldBlock:
                pass
        await self._down.send(item)

    def send_nowait(self, item: Item, *, inline: bool = False, join: bool = False) -> None:
        """As `send`; raises trio.WouldBlock when the stack is full or holds back batches.

        With ``inline`` an idle top layer handles the item at once, in this task, rather
        than from the send queue (`Inlet.offer_inline`): one task switch less for an item
        someone waits on, such as an RPC request or answer. With ``join`` a batch joins
        the last one waiting in the send queue, if no layer has taken it yet (up to 256
        messages; `Inlet.join_nowait`): for many tasks each sending one message at the
        same moment (RPC callers woken by one batch of answers), which then leave as
        one batch without filling the queue's ``channel_size`` slots.
        """
        if type(item) is list and ((self._blocked and not self._released) or self._gate.locked()):
            raise trio.WouldBlock
        if inline:
            self._down.offer_inline(item)
        elif join and type(item) is list:
            self._down.join_nowait(item)
        else:
            self._down.send_nowait(item)

    def release_senders(self) -> None:
        """Hold nothing back at the top any more, for good: for an owner that is leaving
        (a channel that closes). Batches that wait here for a layer that holds back
        senders, and those that come later, go into the layers, which queue them (MCAST's
        window, UFC/MFC's credits) and drop or release them once the member has left
        the group, instead of waiting at the top for room that may never come (a window
        that no member acks any more)."""
        self._released = True
        self._open.set()

    def sends_pending(self) -> bool:
        """Whether a batch sent down may not yet have been accepted by every layer.

        `send` returns once the batch is queued at the top of the stack, not
        once the layers took it: a sender held back by MCAST's window or by
        flow-control credits looks unblocked for its first sends. This is
        True while a batch waits at the top (senders held back, or the top
        channel not empty), in a channel or outbox between two layers, or in
        the queue of a layer that holds back senders (`Protocol.blocks_down`).
        False means every batch sent so far has been handed to the transport.

        A batch already handed to a layer task that has not run yet is not
        visible here: ask when every task is blocked
        (``trio.testing.wait_all_tasks_blocked``), as the test kit's
        `SimMember.accepted` does.
        """
        if self._blocked or self._gate.locked():
            return True
        if self._down.buffered():
            return True
        current = self._current
        return current is not None and any(
            actor.down_pending()
            for actor in current.actors
            if isinstance(actor, LayerActor | TransportActor)
        )

    async def receive(self) -> Item:
        """The next batch or event that came out of the top of the stack."""
        return await self.deliveries.receive()

    def deliver_to(self, consumer: Callable[[Item], bool]) -> None:
        """Hand what comes out of the top to ``consumer`` at once, in the top layer's task,
        while nothing waits in `deliveries`; what it refuses (returns False) waits there,
        to be read with `take` (not `receive`). ``consumer`` must not raise."""
        self._up.attach(consumer)

    async def take(self) -> Item:
        """The next item waiting in `deliveries`, when a consumer is attached (`deliver_to`)."""
        return await self._up.take()

    # --- introspection ----------------------------------------------------------------

    def _running(self) -> _Incarnation:
        if self._current is None:
            raise RuntimeError("the stack is not running yet")
        return self._current

    @property
    def address(self) -> Address:
        """The address of the current incarnation."""
        return self._running().address

    @property
    def protocols(self) -> list[Protocol]:
        """The current incarnation's layers, transport first."""
        return self._running().protocols

    def protocol(self, name: str) -> Protocol:
        """The current layer registered as ``name`` (e.g. "UNICAST3")."""
        for proto in self.protocols:
            if proto.name == name:
                return proto
        raise KeyError(f"stack has no protocol {name!r}")

    def pause(self) -> None:
        """Stop the current incarnation's clock, as SIGSTOP would: no layer's timer fires
        until `resume` (the test kit's `SimMember.pause`, which also holds the simulated
        transport, so nothing arrives or leaves either). What is already on its way
        through the layers at that instant still gets handled: the stop came a moment
        later. Idempotent."""
        incarnation = self._running()
        held = trio.Event()
        for actor in incarnation.actors:
            if isinstance(actor, LayerActor) and actor.held is None:
                actor.held = held

    def resume(self) -> None:
        """Let the clock run on from now, as SIGCONT would: every timer that came due
        while paused fires at once, late. Idempotent."""
        for actor in self._running().actors:
            if isinstance(actor, LayerActor) and actor.held is not None:
                held, actor.held = actor.held, None
                held.set()

    @property
    def paused(self) -> bool:
        """Whether `pause` stopped the current incarnation's clock."""
        return any(isinstance(a, LayerActor) and a.held is not None for a in self._running().actors)

    async def set_property(self, protocol: str, key: str, value: Any) -> None:
        """Change ``protocol``'s property ``key`` at run time (validated, PropertyError
        if bad); the layer acts on it at once (e.g. starts or stops a timer)."""
        incarnation = self._running()
        for proto, actor in zip(incarnation.protocols, incarnation.actors, strict=True):
            if proto.name == protocol:
                proto.set_property(key, value, trio.current_time())
                if isinstance(actor, LayerActor):
                    await actor.poke()
                return
        raise KeyError(f"stack has no protocol {protocol!r}")

    def install_secret(self, secret: bytes) -> None:
        """Rotate the cluster secret at run time, without stopping the group.

        The new key is accepted at once, this member sends with it after half
        the transport's ``rollover_time`` and refuses the old key after all
        of it, so every member must install it within ``rollover_time / 2`` of
        the others. A restarted incarnation starts with this secret. Raises
        RuntimeError when the stack runs without a secret, ValueError for a
        secret shorter than 16 bytes or already installed.
        """
        transport = self._running().protocols[0]
        assert isinstance(transport, Transport)
        transport.install_secret(secret)
        self._secret = bytes(secret)

    def reset_stats(self) -> None:
        """Zero every layer's counters and the host's (a probe's ``reset``); windows,
        queues and other gauges stay as they are."""
        self._blocked_count = 0
        self._blocked_total = 0.0
        if self._current is not None:
            for proto, actor in zip(self._current.protocols, self._current.actors, strict=True):
                proto.reset_stats()
                if isinstance(actor, LayerActor | TransportActor):
                    actor.reset_stats()
        if self.diagnostics is not None:
            self.diagnostics.reset_stats()

    def stats(self) -> dict[str, Any]:
        """Per layer: the protocol's own stats plus the host's batch counters and queue
        lengths; for the stack: the send queue's length and how often and how long senders
        were held back at the top (``blocked_for``: the current spell, 0 when open)."""
        layers = []
        if self._current is not None:
            for proto, actor in zip(self._current.protocols, self._current.actors, strict=True):
                layers.append(
                    {
                        "protocol": proto.name or type(proto).__name__,
                        "stats": proto.stats(),
                        "host": actor.stats(),
                    }
                )
        return {
            "cluster": self.cluster,
            "address": str(self._current.address) if self._current else None,
            "incarnation": self.incarnation,
            "restarts": len(self.crash_reports),
            "send_queue": self._down.buffered(),
            "senders_blocked": bool(self._blocked),
            "blocked_count": self._blocked_count,
            "blocked_for": trio.current_time() - self._blocked_since if self._blocked else 0.0,
            "blocked_total": self._blocked_total,
            "layers": layers,
        }
