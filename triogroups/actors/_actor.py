"""Actors, their mailboxes and unsupervised `spawn`.

An actor is an object whose methods run in one trio task and which is reached only through its
bounded mailbox. The mailbox belongs to a *slot*, not to the actor object: a supervisor builds a
fresh actor for every restart and gives it the same mailbox, so an `ActorRef` stays valid and
messages queued during a restart wait for the next incarnation. This module never decides about
restarts; that is the supervisor's job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from ._errors import ActorCrashed, ActorGone, MailboxFull, format_traceback

__all__ = ["Actor", "ActorRef", "spawn"]


class Actor:
    """Base class of actors: override `handle`, or `run` for an actor with its own loop.

    The runtime calls `started` before the first message, then `run`, then `stopped` when `run`
    returns or is cancelled (not after a crash: a crashed actor's state is not trusted, the
    next incarnation is a new object). `stopped` runs shielded for at most ``stop_timeout``.
    """

    mailbox_size: int = 100
    stop_timeout: float = 1.0
    name: str = ""
    _handled: int = 0

    async def started(self) -> None:
        """Hook: runs once per incarnation before the first message is received."""

    async def handle(self, message: Any) -> None:
        """Process one message; an exception escaping here is a crash."""
        raise NotImplementedError(
            f"{type(self).__name__} got a message but overrides neither handle() nor run()"
        )

    async def stopped(self) -> None:
        """Hook: runs after `run` returned or was cancelled."""

    async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
        """Handle messages one at a time, in arrival order, until the mailbox is closed."""
        async for message in mailbox:
            await self.handle(message)
            self._handled += 1

    def stats(self) -> dict[str, Any]:
        """A plain snapshot of the actor's own counters; `ActorRef.stats` adds the mailbox."""
        return {}


class _Slot:
    """The lasting part of an actor: name, mailbox, counters and state across incarnations."""

    def __init__(self, name: str, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"mailbox_size must be >= 0, got {capacity}")
        self.name = name
        self.send_channel, self.receive_channel = trio.open_memory_channel[Any](capacity)
        self.state = "starting"
        self.actor: Actor | None = None
        self.handled_before = 0
        self.restarts = 0
        self.ref = ActorRef(self)

    def close(self) -> None:
        """Stop the slot for good: later sends raise ActorGone, queued messages are dropped."""
        self.state = "stopped"
        self.send_channel.close()
        self.receive_channel.close()


class ActorRef:
    """A handle to an actor slot; valid across restarts of that actor.

    Sends are cancellation-safe: a cancelled `send` was not sent.
    """

    __slots__ = ("_slot",)

    def __init__(self, slot: _Slot) -> None:
        self._slot = slot

    @property
    def name(self) -> str:
        """The name of the child this ref reaches (stable across restarts)."""
        return self._slot.name

    async def send(self, message: Any) -> None:
        """Queue *message*; waits while the mailbox is full. Raises ActorGone if stopped."""
        try:
            await self._slot.send_channel.send(message)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise ActorGone(f"actor {self.name!r} is stopped") from None

    def send_nowait(self, message: Any) -> None:
        """Queue *message* or raise MailboxFull at once. Raises ActorGone if stopped."""
        try:
            self._slot.send_channel.send_nowait(message)
        except trio.WouldBlock:
            capacity = self._slot.send_channel.statistics().max_buffer_size
            raise MailboxFull(f"mailbox of {self.name!r} is full, capacity {capacity}") from None
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise ActorGone(f"actor {self.name!r} is stopped") from None

    def stats(self) -> dict[str, Any]:
        """Mailbox depth and capacity, messages handled, restarts, state, the actor's stats."""
        slot = self._slot
        channel = slot.send_channel.statistics()
        actor = slot.actor
        handled = slot.handled_before + (actor._handled if actor is not None else 0)
        return {
            "name": slot.name,
            "state": slot.state,
            "mailbox_depth": channel.current_buffer_used,
            "mailbox_capacity": channel.max_buffer_size,
            "mailbox_peak": channel.peak_buffer_used,
            "senders_waiting": channel.tasks_waiting_send,
            "processed": handled,
            "restarts": slot.restarts,
            "actor": actor.stats() if actor is not None else {},
        }

    def __repr__(self) -> str:
        return f"<ActorRef {self.name!r} {self._slot.state}>"


async def _call_stopped(actor: Actor) -> None:
    with trio.move_on_after(actor.stop_timeout, shield=True):
        await actor.stopped()


async def run_incarnation(actor: Actor, slot: _Slot, on_started: Callable[[], None]) -> None:
    """Run one incarnation of *actor* on *slot*: started, run, stopped.

    The actor gets a clone of the slot's receive channel, so closing it (``with mailbox:``)
    ends this incarnation only and never the slot.
    """
    actor.name = slot.name
    actor._handled = 0
    slot.actor = actor
    try:
        with slot.receive_channel.clone() as mailbox:
            try:
                await actor.started()
                on_started()
                await actor.run(mailbox)
            except trio.Cancelled:
                await _call_stopped(actor)
                raise
            await _call_stopped(actor)
    finally:
        slot.handled_before += actor._handled
        slot.actor = None


def spawn(nursery: trio.Nursery, actor: Actor, *, name: str | None = None) -> ActorRef:
    """Start *actor* unsupervised in *nursery* and return its ref at once.

    Messages sent before the actor has started wait in its mailbox. A crash is raised into the
    nursery as ActorCrashed; cancelling the nursery stops the actor (``stopped`` runs).
    """
    slot = _Slot(type(actor).__name__ if name is None else name, actor.mailbox_size)
    nursery.start_soon(_run_spawned, actor, slot, name=f"actor {slot.name}")
    return slot.ref


async def _run_spawned(actor: Actor, slot: _Slot) -> None:
    def mark_running() -> None:
        slot.state = "running"

    try:
        await run_incarnation(actor, slot, mark_running)
    except Exception as exc:
        raise ActorCrashed(slot.name, exc, format_traceback(exc)) from exc
    finally:
        slot.close()
